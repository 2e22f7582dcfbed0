/* A long-running multi-threaded workload that `fntrace attach` goes into
 * and out of while it runs (tests/attach.rs).
 *
 * Three workers call mid() -> leaf() + lib_twice() (lib_twice lives in a
 * shared library, mapped far from this program) in rounds and check every
 * result against an uninstrumented twin: a wrong result counts as bad.
 * One more thread sits in parked(), a traced function blocked in read()
 * until the test says `tick`: it is inside a traced call, its return
 * address possibly hijacked, whenever the test attaches or detaches.
 *
 * The main thread reads commands on stdin, one per line, and answers each
 * with one line:
 *   tick     parked() returns (its result is checked) and is called again
 *   report   rounds=R bad=B parks=P value=V   (V: the last round's sum,
 *            computed through the traced functions)
 *   quit     the report, then exit 0
 *   load P   dlopen(P) and find its plug_work(); `ok`
 *   call     plug_work(5): `plug=R` (R: 5 * 7 + 2, computed by the library)
 *   unload   dlclose it; `ok`
 * It prints `ready PID` first. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Not traced, in any build style. */
#if defined(__clang__)
#define TWIN __attribute__((noinline, no_instrument_function, xray_never_instrument, patchable_function_entry(0, 0)))
#else
#define TWIN __attribute__((noinline, no_instrument_function, patchable_function_entry(0, 0)))
#endif
#define TRACED __attribute__((noinline))

int lib_twice(int x);

static atomic_long rounds, bad, parks, last;
static long value;
static int tick_pipe[2];
static volatile int sink;

TRACED int leaf(int x) { sink = x; return x * 3 + 1; }
TRACED int mid(int x) { return leaf(x) + lib_twice(x + 1); }
TWIN static int twin_mid(int x) { return (x * 3 + 1) + (2 * (x + 1) + 1); }

TRACED long parked(long k) {
    char c;
    while (read(tick_pipe[0], &c, 1) != 1)
        ;
    return k * 2 + 1;
}

TWIN static long one_round(void) {
    long sum = 0;
    for (int i = 0; i < 200; i++) {
        int v = mid(i);
        if (v != twin_mid(i))
            atomic_fetch_add(&bad, 1);
        sum += v;
    }
    return sum;
}

TWIN static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        long sum = one_round();
        if (sum != value)
            atomic_fetch_add(&bad, 1);
        atomic_store(&last, sum);
        atomic_fetch_add(&rounds, 1);
        usleep(200);
    }
    return NULL;
}

TWIN static void *parker(void *arg) {
    (void)arg;
    for (long k = 0;; k++) {
        if (parked(k) != k * 2 + 1)
            atomic_fetch_add(&bad, 1);
        atomic_fetch_add(&parks, 1);
    }
    return NULL;
}

TWIN static void report(void) {
    printf("rounds=%ld bad=%ld parks=%ld value=%ld\n", atomic_load(&rounds), atomic_load(&bad),
           atomic_load(&parks), atomic_load(&last));
    fflush(stdout);
}

TWIN int main(void) {
    for (int i = 0; i < 200; i++)
        value += twin_mid(i);
    if (pipe(tick_pipe) != 0)
        return 1;
    pthread_t t;
    for (int i = 0; i < 3; i++)
        pthread_create(&t, NULL, worker, NULL);
    pthread_create(&t, NULL, parker, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[4096];
    void *plug = NULL;
    int (*plug_work)(int) = NULL;
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "tick", 4) == 0) {
            long before = atomic_load(&parks);
            if (write(tick_pipe[1], "t", 1) != 1)
                return 1;
            while (atomic_load(&parks) == before)
                usleep(100);
            printf("ok\n");
            fflush(stdout);
        } else if (strncmp(line, "report", 6) == 0) {
            report();
        } else if (strncmp(line, "load ", 5) == 0) {
            line[strcspn(line, "\n")] = 0;
            plug = dlopen(line + 5, RTLD_NOW);
            plug_work = plug ? (int (*)(int))dlsym(plug, "plug_work") : NULL;
            printf("%s\n", plug_work ? "ok" : dlerror());
            fflush(stdout);
        } else if (strncmp(line, "call", 4) == 0) {
            printf("plug=%d\n", plug_work ? plug_work(5) : -1);
            fflush(stdout);
        } else if (strncmp(line, "unload", 6) == 0) {
            printf("%s\n", plug && dlclose(plug) == 0 ? "ok" : "error");
            plug = NULL;
            plug_work = NULL;
            fflush(stdout);
        } else if (strncmp(line, "quit", 4) == 0) {
            report();
            return 0;
        }
    }
    return 0;
}
