/* Thousands of live frames, each at its own stack pointer: built with
 * pointer authentication, each signs its return address with a modifier
 * of its own, and a signature of 7 bits is all zero (the signed address
 * equals the plain one) about once in 128 of them. A tracer that told
 * signed from plain by the value would crash here: returns (dive),
 * an exception through every frame (thrown), and one caught halfway,
 * whose outer frames then return (caught midway). */
#include <cstdio>
#include <cstdlib>

#define NOINLINE __attribute__((noinline))

static int calls;

NOINLINE int dive(int n, int fail)
{
    calls++;
    if (n == 0) {
        if (fail)
            throw n;
        return 0;
    }
    return dive(n - 1, fail) + 1;
}

NOINLINE int catch_midway(int n, int at)
{
    calls++;
    if (n == at) {
        try {
            return dive(n, 1);
        } catch (int) {
            return -1;
        }
    }
    return catch_midway(n - 1, at) + 1;
}

int main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 2000;
    int a = dive(depth, 0);
    int b = -2;
    try {
        dive(depth, 1);
    } catch (int) {
        b = -1;
    }
    int c = catch_midway(depth, depth / 2);
    printf("pac_depth: dive %d, thrown %d, caught midway %d, %d calls\n", a, b, c, calls);
    return 0;
}
