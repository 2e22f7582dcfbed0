/* Live patching under load: worker threads call traced functions in tight
 * loops while the main thread registers, unregisters and re-filters ops
 * thousands of times. Every result is checked, and while a function is
 * surely enabled every call to it must reach the callback (surely disabled:
 * none may).
 *
 * usage: stress MODE CYCLES   MODE: ops | list | filter | regs
 *
 * The phase counter: 4k = surely off, 4k+2 = surely on, odd = changing.
 * A worker reads it before and after a call; only when both reads agree is
 * the call checked. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "phases.h"


#if defined(__aarch64__)
#define CALL_IS_A_WORD 1
#else
#define CALL_IS_A_WORD 0
#endif

NOINLINE int work(int x) { return x * 3 + 1; }
NOINLINE int other(int x) { return x ^ 5; }

static atomic_ulong checked_on, checked_off, bad_results, bad_args, missed, unexpected;
static __thread volatile unsigned long hits;
static __thread int expected_arg;
static uintptr_t work_ip;
/* While work_ip is unknown: the first ip a callback sees. */
static _Atomic uintptr_t seen_ip;

static void callback(uintptr_t ip, uintptr_t parent, fntrace_ops *ops, struct fntrace_regs *regs) {
    (void)parent;
    (void)ops;
    if (!work_ip) {
        uintptr_t none = 0;
        atomic_compare_exchange_strong(&seen_ip, &none, ip);
        return;
    }
    if (ip != work_ip)
        return;
    hits++;
    if (regs && (int)FNTRACE_REGS_ARG0(regs) != expected_arg)
        atomic_fetch_add(&bad_args, 1);
}

/* Counts nothing: two more ops on the same function (mode list), so that it
 * calls the list trampoline whether the counting ops is registered or not:
 * registering it changes only the set of ops the list walks. */
static void idle(uintptr_t ip, uintptr_t parent, fntrace_ops *ops, struct fntrace_regs *regs) {
    (void)ip, (void)parent, (void)ops, (void)regs;
}

static void *worker(void *arg) {
    int x = (int)(intptr_t)arg;
    while (!atomic_load(&stop)) {
        x = (x + 7) & 0xffff;
        unsigned long p1 = atomic_load(&phase);
        unsigned long h0 = hits;
        expected_arg = x;
        int r = work(x);
        unsigned long h1 = hits;
        unsigned long p2 = atomic_load(&phase);
        if (r != x * 3 + 1 || other(x) != (x ^ 5))
            atomic_fetch_add(&bad_results, 1);
        atomic_fetch_add(&calls, 1);
        int on;
        if (!checkable(p1, p2, &on))
            continue;
        atomic_fetch_add(on ? &checked_on : &checked_off, 1);
        if (h1 - h0 != (unsigned long)on) {
            atomic_fetch_add(&violations, 1);
            /* Which way: a call that should have reached the callback and
               did not, or one that reached it when it should not have. */
            atomic_fetch_add(h1 - h0 < (unsigned long)on ? &missed : &unexpected, 1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: stress ops|list|filter|regs CYCLES\n");
        return 2;
    }
    const char *mode = argv[1];
    int cycles = atoi(argv[2]);
    unsigned flags = strcmp(mode, "regs") == 0 ? FNTRACE_OPS_FL_SAVE_REGS : 0;
    fntrace_ops *ops = fntrace_ops_new(callback, NULL, NULL, flags);
    fntrace_ops *second = fntrace_ops_new(idle, NULL, NULL, 0);
    fntrace_ops *third = fntrace_ops_new(idle, NULL, NULL, 0);
    if (!ops || !second || !third) {
        fprintf(stderr, "stress: %s\n", fntrace_last_error());
        return 2;
    }
    /* The ip callbacks get for work(): find it by enabling it once. */
    must(fntrace_ops_set_filter(ops, "work", NULL), "filter");
    char buf[4096];
    must(fntrace_ops_register(ops), "register");
    work_ip = 0;
    fntrace_enabled_functions(buf, sizeof buf);
    /* A bare site (a plain build) calls from its detour: its ip is the
       detour's, which the callback sees. */
    if (work(1) != 4)
        return 2;
    must(fntrace_ops_unregister(ops), "unregister");
    unsigned long site = 0;
    char kind[32];
    if (sscanf(buf, "work (1) %*s ops %31s %lx", kind, &site) != 2 &&
        sscanf(buf, "work (1) %*s ops R %31s %lx", kind, &site) != 2) {
        fprintf(stderr, "stress: unexpected enabled_functions: %s\n", buf);
        return 2;
    }
    /* An entry site of 5 bytes (or more: the call is at its end). On
       AArch64 the callback's own first ip (below) is the one. */
    for (uintptr_t ip = site + 5; ip < site + 16 && !CALL_IS_A_WORD; ip++) {
        char name[64];
        if (fntrace_lookup(ip, name, sizeof name) == 0 && strcmp(name, "work") == 0) {
            work_ip = ip;
            break;
        }
    }
    char seen_name[64];
    if (!work_ip && fntrace_lookup(seen_ip, seen_name, sizeof seen_name) == 0 &&
        strcmp(seen_name, "work") == 0)
        work_ip = seen_ip;
    if (!work_ip) {
        fprintf(stderr, "stress: no ip for work\n");
        return 2;
    }
    if (strcmp(mode, "list") == 0) {
        must(fntrace_ops_set_filter(second, "work other", NULL), "filter");
        must(fntrace_ops_register(second), "register second");
        must(fntrace_ops_set_filter(third, "work", NULL), "filter");
        must(fntrace_ops_register(third), "register third");
    }
    if (strcmp(mode, "filter") == 0) {
        /* Registered all along; phase 0 is "surely off" for work(). */
        must(fntrace_ops_set_filter(ops, "other", "work"), "filter");
        must(fntrace_ops_register(ops), "register");
    }

    pthread_t threads[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)(i * 1000));
    /* Under an emulator whose threads may run code a little after another
       thread changed it (qemu's multi-threaded TCG: docs/CROSS.md), the
       harness waits STRESS_GRACE_US after each change before calling the
       state sure. Natively it is 0: sure as soon as the call returns. */
    const char *grace_env = getenv("STRESS_GRACE_US");
    useconds_t grace = grace_env ? (useconds_t)atoi(grace_env) : 0;
    for (int c = 0; c < cycles; c++) {
        atomic_fetch_add(&phase, 1);
        if (strcmp(mode, "filter") == 0)
            must(fntrace_ops_set_filter(ops, c % 3 ? "work" : "wo*", NULL), "filter on");
        else
            must(fntrace_ops_register(ops), "register");
        if (grace)
            usleep(grace);
        atomic_fetch_add(&phase, 1);
        settle();
        atomic_fetch_add(&phase, 1);
        if (strcmp(mode, "filter") == 0)
            must(fntrace_ops_set_filter(ops, "other", "work"), "filter off");
        else
            must(fntrace_ops_unregister(ops), "unregister");
        if (grace)
            usleep(grace);
        atomic_fetch_add(&phase, 1);
        settle();
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(threads[i], NULL);
    struct fntrace_stats st;
    must(fntrace_get_stats(&st), "stats");
    printf("mode=%s cycles=%d calls=%lu checked_on=%lu checked_off=%lu violations=%lu (missed=%lu "
           "unexpected=%lu) bad_results=%lu bad_args=%lu batches=%lu syncs=%lu traps=%lu refused=%lu\n",
           mode, cycles, atomic_load(&calls), atomic_load(&checked_on), atomic_load(&checked_off),
           atomic_load(&violations), atomic_load(&missed), atomic_load(&unexpected),
           atomic_load(&bad_results), atomic_load(&bad_args),
           (unsigned long)st.batches, (unsigned long)st.syncs, (unsigned long)st.traps,
           (unsigned long)st.refused);
    printf("recursions=%lu\n", (unsigned long)st.recursions);
    return atomic_load(&violations) || atomic_load(&bad_results) || atomic_load(&bad_args) || st.refused;
}
