/* Shared by the live tests (stress.c, redirect.c): the phase counter that
 * tells workers when a state is sure, and the main thread's helpers.
 *
 * phase % 4 == 0: surely off; == 2: surely on; odd: changing. A worker reads
 * the phase before and after a call; only when both reads agree and are
 * even is the call checked. */
#ifndef PHASES_H
#define PHASES_H

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "fntrace.h"

#define NOINLINE __attribute__((noinline, noipa))
#define WORKERS 3

static atomic_ulong phase;
static atomic_int stop;
static atomic_ulong calls, violations;

/* Exits with the runtime's message if a call failed. */
static void must(int r, const char *what) {
    if (r != 0) {
        fprintf(stderr, "%s: %s\n", what, fntrace_last_error());
        exit(2);
    }
}

/* Lets the workers run a little in each phase. */
static void settle(void) {
    unsigned long c = atomic_load(&calls);
    for (int spin = 0; atomic_load(&calls) < c + 20 && spin < 1000000; spin++)
        sched_yield();
}

/* Whether a call between phase reads p1 and p2 can be checked, and if so
 * whether the state was on. */
static int checkable(unsigned long p1, unsigned long p2, int *on) {
    *on = p1 % 4 == 2;
    return p1 == p2 && p1 % 2 == 0;
}

#endif
