/* Workload "loop": N calls of a tiny leaf (the per-call cost, undiluted).
 * Calls traced: N (leaf) + 1 (main). */
#include <stdlib.h>
#include "bench.h"

__attribute__((noinline)) int leaf(int x) {
    __asm__ volatile("");
    return x * 3 + 1;
}

int main(int argc, char **argv) {
    BENCH_START();
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    volatile unsigned long sink = 0;
    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        sink += leaf((int)i);
    double t1 = bench_now();
    BENCH_REPORT(t1 - t0, sink);
    return 0;
}
