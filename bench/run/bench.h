/* Shared by bench/run.sh's workloads: each program times only its work
 * (CLOCK_MONOTONIC around it, so start-up and write-out are not counted)
 * and prints "NS RESULT" on stdout. */
#ifndef BENCH_H
#define BENCH_H
#include <stdio.h>
#include <time.h>

__attribute__((no_instrument_function)) static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Defined only in the XRay builds (xray-flush.c): XRay's FDR mode must be
 * initialised by the program itself, after XRay registered its modes. */
void bench_start(void) __attribute__((weak));
#define BENCH_START()       \
    do {                    \
        if (bench_start)    \
            bench_start();  \
    } while (0)

#define BENCH_REPORT(ns, result) printf("%.0f %llu\n", (ns), (unsigned long long)(result))
#endif
