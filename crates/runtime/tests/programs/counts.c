/* A deterministic program whose calls are counted two ways: by the fntrace
 * runtime's counting client, and by a -finstrument-functions build of the
 * same source (cyg.c), the independent truth. Exit status 3, on purpose. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

NOINLINE static int is_even(int n);
NOINLINE static int is_odd(int n) { return n == 0 ? 0 : is_even(n - 1); }
NOINLINE static int is_even(int n) { return n == 0 ? 1 : is_odd(n - 1); }

NOINLINE long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

NOINLINE double scale(double x, double y) { return x * 1.5 + y; }

NOINLINE long square(long x) { return x * x; }
NOINLINE long cube(long x) { return x * x * x + 1; }
NOINLINE long apply(long (*f)(long), long x) { return f(x); }

NOINLINE int sum_args(int a, int b, int c, int d, int e, int f, int g, int h) {
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 15;
    long total = 0;
    double d = 0;
    for (int i = 0; i < n; i++) {
        total += is_even(i);
        total += apply(i % 2 ? square : cube, i);
        total += sum_args(i, 1, 2, 3, 4, 5, 6, 7);
        d = scale(d, i);
    }
    total += fib(n);
    printf("total %ld scale %.3f\n", total, d);
    return 3;
}
