/* main -> a -> b -> leaf, in a loop of 3 (or argv[1] times), then leaf
 * from main directly. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static volatile int sink;

NOINLINE int leaf(int x)
{
    sink += x;
    return x * 2;
}

NOINLINE int b(int x)
{
    return leaf(x) + 1;
}

NOINLINE int a(int x)
{
    return b(x) + 1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3;
    int total = 0;
    for (int i = 0; i < n; i++)
        total += a(i);
    total += leaf(10);
    printf("nested: %d rounds, total %d\n", n, total);
    return 0;
}
