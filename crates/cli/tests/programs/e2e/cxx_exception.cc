// An exception thrown through two frames that hold guards: their
// destructors run during the unwind, the catch is in run(), and main
// goes on with finish() after run() returns.
#include <cstdio>
#include <stdexcept>

#define NOINLINE __attribute__((noinline))

struct Guard {
    int id;
    NOINLINE explicit Guard(int i);
    NOINLINE ~Guard();
};

Guard::Guard(int i) : id(i)
{
    std::printf("cxx_exception: guard %d\n", id);
}

Guard::~Guard()
{
    std::printf("cxx_exception: ~guard %d\n", id);
}

NOINLINE void throw_it(int n)
{
    if (n > 0)
        throw std::runtime_error("boom");
}

NOINLINE void deeper(int n)
{
    Guard g(2);
    throw_it(n);
}

NOINLINE void thrower()
{
    Guard g(1);
    deeper(3);
}

NOINLINE void caught(const char *what)
{
    std::printf("cxx_exception: caught %s\n", what);
}

NOINLINE int run()
{
    try {
        thrower();
    } catch (const std::exception &e) {
        caught(e.what());
        return 1;
    }
    return 0;
}

NOINLINE void finish(int r)
{
    std::printf("cxx_exception: run %d\n", r);
}

int main()
{
    int r = run();
    finish(r);
    return 0;
}
