/* The target of bench/attach.sh: a worker thread that measures its own
 * pauses while fntrace attaches and detaches (one worker, so that on a
 * 2-core machine the other core is left to fntrace: what is measured is
 * what attaching imposes, not the contention of more busy threads than
 * cores). The worker loops over a unit of work (calls of traced functions)
 * and notes the longest gap between two units in the current window. The
 * main thread blocks in read() on stdin (the thread fntrace stops to
 * inject the runtime) and takes commands:
 *   window     starts a new window (the maximum back to 0)
 *   report     prints the longest gap of the window (ns), then `units=N`
 * Built with -DGEN and gen.c (bench/attach/gen.sh), each unit also calls
 * 20 of 100,000 more functions. With the argument `quiet` the worker
 * sleeps 1 ms after each unit: the machine is then mostly idle. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 1

__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int mid(int x) { return leaf(x) + leaf(x + 1); }

static atomic_ulong max_gap[WORKERS];
static atomic_ulong units;
static volatile int sink;
static int quiet;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#ifdef GEN
void gen_calls(int);
#endif

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    uint64_t last = now_ns();
    for (int n = 0;; n++) {
        int s = 0;
        for (int i = 0; i < 40; i++)
            s += mid(i);
#ifdef GEN
        gen_calls(n);
#endif
        sink = s;
        uint64_t t = now_ns();
        uint64_t gap = t - last;
        last = t;
        if (gap > atomic_load_explicit(&max_gap[w], memory_order_relaxed))
            atomic_store_explicit(&max_gap[w], gap, memory_order_relaxed);
        atomic_fetch_add_explicit(&units, 1, memory_order_relaxed);
        if (quiet) {
            usleep(1000);
            last = now_ns();
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    quiet = argc > 1 && strcmp(argv[1], "quiet") == 0;
    pthread_t t;
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&t, NULL, worker, (void *)(intptr_t)i);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "window", 6) == 0) {
            for (int i = 0; i < WORKERS; i++)
                atomic_store(&max_gap[i], 0);
            printf("ok\n");
        } else if (strncmp(line, "report", 6) == 0) {
            unsigned long m = 0;
            for (int i = 0; i < WORKERS; i++)
                if (atomic_load(&max_gap[i]) > m)
                    m = atomic_load(&max_gap[i]);
            printf("%lu units=%lu\n", m, atomic_load(&units));
        }
        fflush(stdout);
    }
    return 0;
}
