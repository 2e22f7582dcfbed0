/* throughput: the driver of bench/patch.sh, part 1 (patching throughput).
 *
 * Linked with a generated file of N instrumented functions that also
 * defines `fntab` (their addresses) and `fncount`; this file itself is built
 * without instrumentation, so the only sites are those N functions. Run
 * under LD_PRELOAD=libfntrace_runtime.so (the API is declared weak).
 *
 *   throughput              does nothing (start-up cost: run it with and
 *                           without the runtime preloaded)
 *   throughput patch RUNS   RUNS times: register one RECURSION_SAFE ops
 *                           whose filter selects every function (enables
 *                           every site), call every function once (checks
 *                           that each calls the ops), unregister (disables
 *                           them), call them again (checks that none does).
 *                           One line per run: "run I reg_ms unreg_ms" and
 *                           the fntrace_get_stats deltas of each call.
 *   throughput anchor RUNS  RUNS times: mprotect a private buffer laid out
 *                           as the code (the same offsets), memcpy 5 bytes
 *                           at each site, mprotect back. No safety
 *                           protocol: what writing the bytes alone costs.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fntrace.h"

#pragma weak fntrace_ops_new
#pragma weak fntrace_ops_set_filter
#pragma weak fntrace_ops_register
#pragma weak fntrace_ops_unregister
#pragma weak fntrace_last_error
#pragma weak fntrace_get_stats

extern int (*const fntab[])(int);
extern const int fncount;

static volatile uint64_t hits;

static void on_entry(uintptr_t ip, uintptr_t parent_ip, fntrace_ops *ops, struct fntrace_regs *regs) {
    (void)ip, (void)parent_ip, (void)ops, (void)regs;
    hits++;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void call_all(void) {
    for (int i = 0; i < fncount; i++)
        fntab[i](i);
}

static void get_stats(struct fntrace_stats *s) {
    if (fntrace_get_stats(s) != 0) {
        fprintf(stderr, "throughput: fntrace_get_stats: %s\n", fntrace_last_error());
        exit(1);
    }
}

static void print_delta(const char *what, const struct fntrace_stats *a, const struct fntrace_stats *b) {
    printf(" %s batches %llu written %llu syncs %llu protects %llu refused %llu traps %llu", what,
           (unsigned long long)(b->batches - a->batches), (unsigned long long)(b->written - a->written),
           (unsigned long long)(b->syncs - a->syncs), (unsigned long long)(b->protects - a->protects),
           (unsigned long long)(b->refused - a->refused), (unsigned long long)(b->traps - a->traps));
}

static int patch(int runs) {
    if (!fntrace_ops_new) {
        fprintf(stderr, "throughput: the runtime is not loaded (LD_PRELOAD=libfntrace_runtime.so)\n");
        return 1;
    }
    struct fntrace_stats s0, s1, s2, s3;
    get_stats(&s0);
    printf("start sites %llu converted %llu canonical %llu modules %llu\n", (unsigned long long)s0.sites,
           (unsigned long long)s0.converted, (unsigned long long)s0.canonical, (unsigned long long)s0.modules);
    fntrace_ops *ops = fntrace_ops_new(on_entry, NULL, NULL, FNTRACE_OPS_FL_RECURSION_SAFE);
    if (!ops || fntrace_ops_set_filter(ops, "", NULL) != 0) {
        fprintf(stderr, "throughput: cannot make the ops: %s\n", fntrace_last_error());
        return 1;
    }
    int bad = 0;
    for (int run = 0; run < runs; run++) {
        get_stats(&s0);
        double t0 = now_ms();
        if (fntrace_ops_register(ops) != 0) {
            fprintf(stderr, "throughput: register: %s\n", fntrace_last_error());
            return 1;
        }
        double t1 = now_ms();
        get_stats(&s1);
        uint64_t before = hits;
        call_all();
        uint64_t traced = hits - before;
        get_stats(&s2);
        double t2 = now_ms();
        if (fntrace_ops_unregister(ops) != 0) {
            fprintf(stderr, "throughput: unregister: %s\n", fntrace_last_error());
            return 1;
        }
        double t3 = now_ms();
        get_stats(&s3);
        before = hits;
        call_all();
        uint64_t untraced = hits - before;
        printf("run %d %.4f %.4f calls %llu %llu", run, t1 - t0, t3 - t2, (unsigned long long)traced,
               (unsigned long long)untraced);
        print_delta("reg", &s0, &s1);
        print_delta("unreg", &s2, &s3);
        printf("\n");
        if (traced != (uint64_t)fncount || untraced != 0) {
            fprintf(stderr, "throughput: run %d: %llu of %d functions called the ops while registered, %llu after\n",
                    run, (unsigned long long)traced, fncount, (unsigned long long)untraced);
            bad = 1;
        }
    }
    return bad;
}

static int anchor(int runs) {
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < fncount; i++) {
        uintptr_t a = (uintptr_t)fntab[i];
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    long page = sysconf(_SC_PAGESIZE);
    size_t size = ((hi - lo + 64) + page - 1) / page * page;
    unsigned char *buf = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* Fault every page in first (the runtime's start-up did that for the real code). */
    mprotect(buf, size, PROT_READ | PROT_WRITE);
    memset(buf, 0x90, size);
    mprotect(buf, size, PROT_READ | PROT_EXEC);
    static const unsigned char bytes[2][5] = {{0xe8, 1, 2, 3, 4}, {0x0f, 0x1f, 0x44, 0x00, 0x00}};
    for (int run = 0; run < runs; run++) {
        double t0 = now_ms();
        if (mprotect(buf, size, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
            perror("mprotect");
            return 1;
        }
        for (int i = 0; i < fncount; i++)
            memcpy(buf + ((uintptr_t)fntab[i] - lo), bytes[run & 1], 5);
        mprotect(buf, size, PROT_READ | PROT_EXEC);
        double t1 = now_ms();
        printf("anchor %d %.4f\n", run, t1 - t0);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 0;
    int runs = argc > 2 ? atoi(argv[2]) : 10;
    if (!strcmp(argv[1], "patch"))
        return patch(runs);
    if (!strcmp(argv[1], "anchor"))
        return anchor(runs);
    fprintf(stderr, "usage: %s [patch|anchor RUNS]\n", argv[0]);
    return 2;
}
