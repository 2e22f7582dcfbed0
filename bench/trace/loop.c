/* bench/trace.sh's driver (built without instrumentation): MODE CALLS.
 * Prints the nanoseconds per iteration of the timed loop:
 *   call   - CALLS calls of leaf() (traced or not, as the run is set up)
 *   rdtsc  - CALLS reads of the time stamp counter
 *   clock  - CALLS clock_gettime(CLOCK_MONOTONIC) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

int leaf(int x);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    long n = atol(argv[2]);
    volatile unsigned long sink = 0;
    double t0 = now();
    if (!strcmp(argv[1], "call")) {
        for (long i = 0; i < n; i++)
            sink += leaf((int)i);
    } else if (!strcmp(argv[1], "rdtsc")) {
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
    double t1 = now();
    printf("%.3f\n", (t1 - t0) / n);
    return (int)(sink & 0);
}
