/* demo: a small program to try fntrace on.
 *   gcc -O2 -fpatchable-function-entry=5 examples/demo.c -o demo
 *   fntrace list ./demo
 */
#include <stdio.h>
#include <stdlib.h>

static int is_prime(int n) {
    if (n < 2)
        return 0;
    for (int d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

__attribute__((noinline)) int count_primes(int limit) {
    int count = 0;
    for (int n = 2; n <= limit; n++)
        count += is_prime(n);
    return count;
}

__attribute__((noinline)) long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__attribute__((noinline)) static long square(long x) { return x * x; }
__attribute__((noinline)) static long cube(long x) { return x * x * x; }

__attribute__((noinline)) long apply(long (*f)(long), long x) { return f(x); }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20;
    printf("primes up to %d: %d\n", n * 100, count_primes(n * 100));
    printf("fib(%d) = %ld\n", n, fib(n));
    printf("square, cube of %d: %ld %ld\n", n, apply(square, n), apply(cube, n));
    return 0;
}
