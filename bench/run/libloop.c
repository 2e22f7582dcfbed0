/* Workload "libloop" (bench/libcall.sh): N calls of a tiny function of a
 * shared library (libtiny.so), through the PLT; with a second argument
 * "inner", one call of the library's `inner`, which makes the N calls of
 * `tiny` itself. Calls the program makes: N + 1 (main) or 2. */
#include <stdlib.h>
#include <string.h>
#include "bench.h"

int tiny(int x);
unsigned long inner(long n);

int main(int argc, char **argv) {
    BENCH_START();
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int from_inside = argc > 2 && strcmp(argv[2], "inner") == 0;
    volatile unsigned long sink = tiny(0);
    double t0 = bench_now();
    if (from_inside)
        sink += inner(n);
    else
        for (long i = 0; i < n; i++)
            sink += (unsigned long)tiny((int)i);
    double t1 = bench_now();
    BENCH_REPORT(t1 - t0, sink);
    return 0;
}
