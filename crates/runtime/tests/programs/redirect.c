/* Redirecting a function (the livepatch use of WITH_REGS/IPMODIFY): an ops
 * sets regs->ip to price_v2 at price_v1's entry, so price_v2 runs with the
 * original arguments and returns to price_v1's caller. Worker threads call
 * price_v1 all along; the main thread switches the redirect on and off.
 * Phases as in stress.c: 4k surely off (v1 answers), 4k+2 surely on (v2).
 *
 * usage: redirect CYCLES */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>

#include "phases.h"


NOINLINE long price_v1(long qty, long unit, long discount) { return qty * unit - discount; }
NOINLINE long price_v2(long qty, long unit, long discount) { return qty * unit - 2 * discount + 1000000; }

static atomic_ulong checked_v1, checked_v2;

static void redirect(uintptr_t ip, uintptr_t parent, fntrace_ops *ops, struct fntrace_regs *regs) {
    (void)ip, (void)parent, (void)ops;
    regs->ip = (uint64_t)(uintptr_t)price_v2;
}

static void *worker(void *arg) {
    long q = (long)(intptr_t)arg;
    while (!atomic_load(&stop)) {
        q = (q + 3) % 1000;
        unsigned long p1 = atomic_load(&phase);
        long r = price_v1(q, 7, 11);
        unsigned long p2 = atomic_load(&phase);
        long v1 = q * 7 - 11, v2 = q * 7 - 22 + 1000000;
        atomic_fetch_add(&calls, 1);
        if (r != v1 && r != v2)
            atomic_fetch_add(&violations, 1);
        int on;
        if (!checkable(p1, p2, &on))
            continue;
        atomic_fetch_add(on ? &checked_v2 : &checked_v1, 1);
        if (r != (on ? v2 : v1))
            atomic_fetch_add(&violations, 1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int cycles = argc > 1 ? atoi(argv[1]) : 100;
    fntrace_ops *ops = fntrace_ops_new(redirect, NULL, NULL, FNTRACE_OPS_FL_IPMODIFY);
    must(!ops, "ops");
    must(fntrace_ops_set_filter(ops, "price_v1", NULL), "filter");
    /* A second redirecting ops on the same function must be refused. */
    fntrace_ops *rival = fntrace_ops_new(redirect, NULL, NULL, FNTRACE_OPS_FL_IPMODIFY);
    must(fntrace_ops_set_filter(rival, "price_*", NULL), "filter");
    pthread_t threads[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)(i * 100));
    int refused = 0;
    for (int c = 0; c < cycles; c++) {
        atomic_fetch_add(&phase, 1);
        must(fntrace_ops_register(ops), "register");
        atomic_fetch_add(&phase, 1);
        settle();
        if (c == 0 && fntrace_ops_register(rival) != 0)
            refused = 1;
        atomic_fetch_add(&phase, 1);
        must(fntrace_ops_unregister(ops), "unregister");
        atomic_fetch_add(&phase, 1);
        settle();
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(threads[i], NULL);
    printf("cycles=%d calls=%lu checked_v1=%lu checked_v2=%lu violations=%lu rival_refused=%d (%s)\n", cycles,
           atomic_load(&calls), atomic_load(&checked_v1), atomic_load(&checked_v2), atomic_load(&violations),
           refused, fntrace_last_error());
    printf("after: %ld\n", price_v1(10, 7, 11));
    return atomic_load(&violations) || !refused;
}
