/* The AArch64 trampolines, veneers, stubs and plans with eight arguments
 * and the register frame checked, run for real under qemu-aarch64: linked
 * into the emulation harness (harness.c) with the `-pg` function of pg.c
 * (tests/aarch64_trampolines.rs builds both and writes the script). Its
 * commands, beside the harness's map/unprotect/load/write:
 *   check WHICH CALLS REGS REDIRECT   call a traced function and check
 *   steps                             print "ok N steps" (N checks made)
 * `which`: 0 the entry-site function, 1 the -pg one; `calls`: how many
 * callbacks to expect, or "any" (between two writes of a plan). A failed
 * check prints "FAIL: step N: ..." and exits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef unsigned long ul;
#define ARGS long a, long b, long c, long d, long e, long f, long g, long h
#define FORMULA (a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h)

static ul calls, last_ip, last_parent, regs_seen[33], step;
static int had_regs;

void callback(ul ip, ul parent_ip, ul *regs)
{
    calls++;
    last_ip = ip;
    last_parent = parent_ip;
    had_regs = regs != 0;
    if (regs)
        memcpy(regs_seen, regs, sizeof regs_seen);
}

__attribute__((noinline, patchable_function_entry(2, 0))) long traced(ARGS)
{
    return FORMULA;
}

__attribute__((noinline)) long replacement(ARGS)
{
    return FORMULA * 1000 + 7;
}

long traced_pg(ARGS); /* pg.c, built with -pg: FORMULA + 1 */

/* _mcount: harness.c's, which returns at once. */

static void fail(const char *what, ul got, ul want)
{
    printf("FAIL: step %lu: %s: got %#lx, want %#lx\n", step, what, got, want);
    exit(1);
}

/* Calls the function three times, with values live in callee-saved
 * registers across the calls; returns the sum. */
__attribute__((noinline)) static long outer(int which, volatile long *seed)
{
    long sum = 0;
    for (long i = *seed; i < *seed + 3; i++) {
        long r = which ? traced_pg(i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6, i + 7)
                       : traced(i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6, i + 7);
        sum = sum * 3 + r;
    }
    return sum;
}

static long expected(int which, int redirect, long seed)
{
    long sum = 0;
    for (long i = seed; i < seed + 3; i++) {
        long a = i, b = i + 1, c = i + 2, d = i + 3, e = i + 4, f = i + 5, g = i + 6, h = i + 7;
        long r = redirect ? FORMULA * 1000 + 7 : FORMULA + which;
        sum = sum * 3 + r;
    }
    return sum;
}

static void check(ul which, ul want_calls, ul regs, ul redirect)
{
    static volatile long seed = 5;
    calls = 0;
    had_regs = -1;
    long got = outer((int)which, &seed);
    /* Between two writes, the old behaviour or the new one. */
    int any = want_calls == ~0UL && got == expected((int)which, !redirect, seed);
    if (got != expected((int)which, (int)redirect, seed) && !any)
        fail("result", got, expected((int)which, (int)redirect, seed));
    if (want_calls != ~0UL && calls != want_calls)
        fail("callbacks", calls, want_calls);
    if (calls && want_calls != ~0UL) {
        ul fn = which ? (ul)traced_pg : (ul)traced;
        ul site_len = which ? 4 : 8;
        if (which ? last_ip - fn > 256 : last_ip != fn + 8)
            fail("ip", last_ip, fn + 8);
        if (which && *(uint32_t *)(last_ip - 4) >> 26 != 0x25)
            fail("ip after a bl", last_ip, 0);
        if (last_parent - (ul)outer > 256)
            fail("parent_ip in outer", last_parent, (ul)outer);
        if (had_regs != (int)regs)
            fail("regs given", had_regs, regs);
        if (regs) {
            long i = seed + 2;
            for (int r = 0; r < 8 && !which; r++)
                if (regs_seen[r] != (ul)(i + r))
                    fail("regs x0..x7", regs_seen[r], i + r);
            if (regs_seen[30] != last_parent)
                fail("regs x30", regs_seen[30], last_parent);
            if (regs_seen[31] & 15)
                fail("regs sp aligned", regs_seen[31], 0);
            if (regs_seen[32] != last_ip - site_len)
                fail("regs pc", regs_seen[32], last_ip - site_len);
        }
    }
    seed = seed + 1;
}

static size_t steps;

int fntrace_emu_command(const char *cmd, const char *line)
{
    char calls[32];
    ul which, regs, redirect;
    if (!strcmp(cmd, "check")) {
        if (sscanf(line, "check %lu %31s %lu %lu", &which, calls, &regs, &redirect) != 4)
            return 0;
        check(which, strcmp(calls, "any") ? strtoul(calls, 0, 0) : ~0UL, regs, redirect);
        step = ++steps;
        return 1;
    }
    if (!strcmp(cmd, "steps")) {
        printf("ok %zu steps\n", steps);
        return 1;
    }
    return 0;
}
