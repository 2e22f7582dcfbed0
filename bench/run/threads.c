/* Workload "threads": two threads, each N calls of its own small
 * function chain (work -> leaf), started together; the time is until both
 * are done. Calls traced: 4 N + 2 (thread bodies) + 1 (main). */
#include <pthread.h>
#include <stdlib.h>
#include "bench.h"

__attribute__((noinline)) int leaf2(int x) {
    __asm__ volatile("");
    return x ^ (x >> 3);
}

__attribute__((noinline)) int work(int x) {
    return leaf2(x) + 1;
}

static long n;

__attribute__((noinline)) void *body(void *arg) {
    unsigned long sink = (unsigned long)arg;
    for (long i = 0; i < n; i++)
        sink += work((int)i);
    return (void *)sink;
}

int main(int argc, char **argv) {
    BENCH_START();
    n = argc > 1 ? atol(argv[1]) / 2 : 500000;
    pthread_t a, b;
    void *ra, *rb;
    double t0 = bench_now();
    pthread_create(&a, NULL, body, (void *)1);
    pthread_create(&b, NULL, body, (void *)2);
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    double t1 = bench_now();
    BENCH_REPORT(t1 - t0, (unsigned long)ra + (unsigned long)rb);
    return 0;
}
