// C++: exceptions thrown through traced frames whose locals have traced
// destructors, caught higher up, then more calls; a rethrow; an exception
// object of a traced class; std::vector and std::sort with a traced
// comparator.
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "golden.h"

struct Guard {
    int id;
    TRACED explicit Guard(int i) : id(i) { sink++; }
    TRACED ~Guard() { sink += id; }
};

struct Oops {
    int code;
    TRACED explicit Oops(int c) : code(c) { sink++; }
    TRACED Oops(const Oops &o) : code(o.code) { sink++; }
    TRACED ~Oops() { sink++; }
};

TRACED int note(int x) {
    sink++;
    return x * 10;
}

TRACED void thrower(int n) {
    Guard g(n);
    if (n == 0)
        throw Oops(7);
    thrower(n - 1);
    sink++;
}

TRACED int catcher(int depth) {
    try {
        thrower(depth);
    } catch (const Oops &e) {
        return note(e.code);
    }
    return 0;
}

TRACED void rethrower() {
    Guard g(100);
    try {
        thrower(2);
    } catch (...) {
        note(2);
        throw;
    }
}

TRACED void std_thrower(int n) {
    Guard g(n);
    if (n == 0)
        throw std::runtime_error("deep");
    std_thrower(n - 1);
    sink++;
}

TRACED bool by_value(int a, int b) {
    sink++;
    return a < b;
}

TRACED int sorted_sum() {
    std::vector<int> v = {42, 7, 19, 3, 88, 21, 5, 64, 13, 50, 1, 30, 17, 9, 71, 2, 40};
    std::sort(v.begin(), v.end(), by_value);
    int s = 0;
    for (size_t i = 0; i < v.size(); i++)
        s += v[i] * (int)(i + 1);
    return s;
}

int main() {
    int r = catcher(3);
    try {
        rethrower();
    } catch (const Oops &e) {
        r += note(e.code);
    }
    try {
        std_thrower(2);
    } catch (const std::exception &e) {
        r += note(1);
    }
    r += catcher(0);
    r += sorted_sum();
    std::printf("r=%d\n", r);
    return 0;
}
