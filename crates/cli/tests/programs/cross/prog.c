/* The cross-architecture test program of list_cross.rs: functions of
 * several shapes, one of them never instrumented. Compiled only, never run. */
#include <stdio.h>

#define NOINLINE __attribute__((noinline))
/* Neither -pg nor -fpatchable-function-entry touches this one. */
#define PLAIN __attribute__((noinline, no_instrument_function, patchable_function_entry(0, 0)))

static NOINLINE int helper(int x) { return x * 3 + 1; }

NOINLINE int leaf(int a) { return a + 1; }

/* More arguments than registers, and a frame larger than 4 KiB. */
NOINLINE long many(long a, long b, long c, long d, long e, long f, long g, long h, long i,
                   long j) {
    volatile char buf[5000];
    buf[a % 5000] = (char)b;
    return a + b + c + d + e + f + g + h + i + j + buf[c % 5000];
}

PLAIN int plain(int x) { return x * 7; }

NOINLINE int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(int argc, char **argv) {
    (void)argv;
    printf("%d %ld %d %d\n", helper(argc), many(argc, 2, 3, 4, 5, 6, 7, 8, 9, 10), plain(argc),
           fib(argc + 5) + leaf(argc));
    return 0;
}
