/* Workload "fib": recursive fib(N), the deep-stack case (every call
 * nested in another). Calls traced: 2 fib(N+1) - 1 (fib) + 1 (main). */
#include <stdlib.h>
#include "bench.h"

__attribute__((noinline)) long fib(int n) {
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv) {
    BENCH_START();
    int n = argc > 1 ? atoi(argv[1]) : 25;
    double t0 = bench_now();
    long r = fib(n);
    double t1 = bench_now();
    BENCH_REPORT(t1 - t0, r);
    return 0;
}
