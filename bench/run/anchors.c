/* The floor any timestamped event pays, measured in the same run:
 * MODE N with MODE rdtsc (one __rdtsc() per iteration) or clock
 * (one clock_gettime(CLOCK_MONOTONIC)). Never instrumented. */
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>
#include "bench.h"

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    long n = atol(argv[2]);
    volatile unsigned long sink = 0;
    double t0 = bench_now();
    if (!strcmp(argv[1], "rdtsc")) {
        for (long i = 0; i < n; i++)
            sink += __rdtsc();
    } else if (!strcmp(argv[1], "clock")) {
        struct timespec ts;
        for (long i = 0; i < n; i++) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            sink += ts.tv_nsec;
        }
    } else {
        return 2;
    }
    double t1 = bench_now();
    BENCH_REPORT(t1 - t0, sink & 0);
    return 0;
}
