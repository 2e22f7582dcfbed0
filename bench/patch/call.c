/* call: the driver of bench/patch.sh, part 2 (cost of one traced call).
 *
 *   call CONFIG N
 *
 * calls leaf() (leaf.c, the only patchable site of the program) N times in
 * a tight loop and prints "CONFIG N ns_per_call". Built without
 * instrumentation, run under LD_PRELOAD=libfntrace_runtime.so (the API is
 * declared weak) except for CONFIG "bare". CONFIG:
 *   bare     no runtime: the site is gcc's five one-byte NOPs
 *   nop      runtime, no ops: the canonical 5-byte NOP
 *   ops      one RECURSION_SAFE ops: the site calls its own trampoline,
 *            which calls the callback directly
 *   guarded  one ops without RECURSION_SAFE: the callback runs inside the
 *            recursion guard (and errno save)
 *   list     two RECURSION_SAFE ops on leaf: the site calls the list
 *            trampoline, which looks the site up and walks both ops
 *   regs     one RECURSION_SAFE ops with SAVE_REGS: the trampoline saves
 *            the full register frame
 *   rdtsc    anchor: N times __rdtsc()
 *   clock    anchor: N times clock_gettime(CLOCK_MONOTONIC)
 * Each callback increments its own counter; the program checks that every
 * counter equals N (and, for the traced configurations, that the runtime
 * lists leaf as calling "ops" or "list") and exits 1 otherwise.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "fntrace.h"

#pragma weak fntrace_ops_new
#pragma weak fntrace_ops_set_filter
#pragma weak fntrace_ops_register
#pragma weak fntrace_last_error
#pragma weak fntrace_enabled_functions

unsigned leaf(unsigned x);

static uint64_t counts[2];

static void count0(uintptr_t ip, uintptr_t parent_ip, fntrace_ops *ops, struct fntrace_regs *regs) {
    (void)ip, (void)parent_ip, (void)ops, (void)regs;
    counts[0]++;
}

static void count1(uintptr_t ip, uintptr_t parent_ip, fntrace_ops *ops, struct fntrace_regs *regs) {
    (void)ip, (void)parent_ip, (void)ops, (void)regs;
    counts[1]++;
}

static void count_regs(uintptr_t ip, uintptr_t parent_ip, fntrace_ops *ops, struct fntrace_regs *regs) {
    (void)ip, (void)parent_ip, (void)ops;
    if (regs)
        counts[0]++;
}

static void add(fntrace_func_t cb, unsigned flags) {
    fntrace_ops *ops = fntrace_ops_new(cb, NULL, NULL, flags);
    if (!ops || fntrace_ops_set_filter(ops, "leaf", NULL) != 0 || fntrace_ops_register(ops) != 0) {
        fprintf(stderr, "call: cannot register an ops: %s\n", fntrace_last_error());
        exit(1);
    }
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* "ops" or "list": what leaf calls, from fntrace_enabled_functions. */
static int leaf_calls(const char *what) {
    static char buf[1 << 16];
    char word[16];
    snprintf(word, sizeof word, " %s ", what);
    fntrace_enabled_functions(buf, sizeof buf);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        if (!strncmp(line, "leaf ", 5))
            return strstr(line, word) != NULL;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CONFIG N\n", argv[0]);
        return 2;
    }
    const char *config = argv[1];
    long n = atol(argv[2]);
    int callbacks = 0;
    const char *kind = NULL;
    if (strcmp(config, "bare") && strcmp(config, "rdtsc") && strcmp(config, "clock") && !fntrace_ops_new) {
        fprintf(stderr, "call: the runtime is not loaded (LD_PRELOAD=libfntrace_runtime.so)\n");
        return 1;
    }
    if (!strcmp(config, "ops")) {
        add(count0, FNTRACE_OPS_FL_RECURSION_SAFE);
        callbacks = 1, kind = "ops";
    } else if (!strcmp(config, "guarded")) {
        add(count0, 0);
        callbacks = 1, kind = "ops";
    } else if (!strcmp(config, "list")) {
        add(count0, FNTRACE_OPS_FL_RECURSION_SAFE);
        add(count1, FNTRACE_OPS_FL_RECURSION_SAFE);
        callbacks = 2, kind = "list";
    } else if (!strcmp(config, "regs")) {
        add(count_regs, FNTRACE_OPS_FL_RECURSION_SAFE | FNTRACE_OPS_FL_SAVE_REGS);
        callbacks = 1, kind = "ops";
    } else if (strcmp(config, "bare") && strcmp(config, "nop") && strcmp(config, "rdtsc") &&
               strcmp(config, "clock")) {
        fprintf(stderr, "call: unknown configuration %s\n", config);
        return 2;
    }
    if (kind && !leaf_calls(kind)) {
        fprintf(stderr, "call: %s: leaf is not listed as calling \"%s\"\n", config, kind);
        return 1;
    }

    volatile unsigned sink;
    unsigned s = 1;
    double t0 = now_ns();
    if (!strcmp(config, "rdtsc")) {
        for (long i = 0; i < n; i++)
            s += (unsigned)__rdtsc();
    } else if (!strcmp(config, "clock")) {
        struct timespec ts;
        for (long i = 0; i < n; i++) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            s += (unsigned)ts.tv_nsec;
        }
    } else {
        for (long i = 0; i < n; i++)
            s = leaf(s);
    }
    double t1 = now_ns();
    sink = s;
    (void)sink;

    for (int c = 0; c < callbacks; c++)
        if (counts[c] != (uint64_t)n) {
            fprintf(stderr, "call: %s: callback %d ran %llu times for %ld calls\n", config, c,
                    (unsigned long long)counts[c], n);
            return 1;
        }
    printf("%s %ld %.3f\n", config, n, n ? (t1 - t0) / n : 0.0);
    return 0;
}
