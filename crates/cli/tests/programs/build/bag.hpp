/* The C++ program of the build table (tests/build_table.rs): templates and
 * inline functions used by three translation units, so that each object
 * has its own COMDAT copy of them and the linker keeps one. std::vector's
 * push_back brings libstdc++'s _M_realloc_insert, the template of the
 * g++ 12 link failure in issue 17. NOINLINE keeps every function a
 * function at -O2, called as often as the source says, so each can be
 * traced and its calls counted. */
#pragma once
#include <vector>

#ifdef __clang__
#define NOINLINE __attribute__((noinline))
#else
/* Not inlined, not cloned, and not taken for pure: with -flto, gcc would
 * otherwise merge two calls of twice(n) in one. */
#define NOINLINE __attribute__((noipa))
#endif

/* Defined in the header: one COMDAT copy per object that calls it. */
NOINLINE inline int mix(int x) { return x * 31 + 7; }

template <typename T> struct Bag {
    std::vector<T> items;
    /* Member functions defined in the class are inline: COMDAT too. */
    NOINLINE void add(T x) { items.push_back(x); }
    NOINLINE T sum() const {
        T s{};
        for (T x : items)
            s += x;
        return s;
    }
};

template <typename T> NOINLINE T twice(T x) { return x + x; }

int fill_ints(int n);
double fill_doubles(int n);
