// Two threads calling a traced leaf as fast as they can (issue 17): the
// default recording must keep every event, however far ahead of the
// writer they run. stdout says how many calls the threads made, and how
// long they ran (ns: the benchmark's rate, bench/lossless.sh).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long calls;

__attribute__((noinline)) long leaf(long x) {
    __asm__ volatile("");
    return x + 1;
}

static void *run(void *arg) {
    long s = 0;
    for (long i = 0; i < calls; i++)
        s += leaf(i);
    return (void *)s;
}

int main(int argc, char **argv) {
    calls = argc > 1 ? atol(argv[1]) : 5000000;
    pthread_t t[2];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, run, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("leaf %ld\nns %ld\n", 2 * calls, (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec));
    return 0;
}
