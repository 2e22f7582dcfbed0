/* Workload "args": N calls of a function with two integer arguments (the
 * cost of recording them, #20). Calls traced: N (add2) + 1 (main). */
#include <stdlib.h>
#include "bench.h"

__attribute__((noinline)) int add2(int a, int b) {
    __asm__ volatile("");
    return a * 3 + b;
}

int main(int argc, char **argv) {
    BENCH_START();
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    volatile unsigned long sink = 0;
    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        sink += add2((int)i, (int)(n - i));
    double t1 = bench_now();
    BENCH_REPORT(t1 - t0, sink);
    return 0;
}
