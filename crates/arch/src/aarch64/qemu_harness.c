/* The AArch64 trampolines, veneers, stubs and plans, run for real under
 * qemu-aarch64 (see qemu_tests.rs, which builds this statically with the
 * `-pg` function of pg.c and writes the script it runs).
 *
 * The script (argv[1]) is a list of little-endian u64 records:
 *   1 addr len bytes... (padded to 8)  write code (text or mapped pages)
 *   2 which calls regs redirect         call a traced function and check
 *   3 addr len                          map len bytes RWX at addr
 *   0                                   end
 * `which`: 0 the entry-site function, 1 the -pg one; `calls`: how many
 * callbacks to expect, or ~0 for "any" (between two writes of a plan). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

__asm__(".text\n.globl _mcount\n.type _mcount, %function\n_mcount:\n\tret\n");

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

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    FILE *f = fopen(argv[1], "rb");
    static ul script[1 << 16];
    size_t n = f ? fread(script, 8, sizeof script / 8, f) : 0;
    long page = sysconf(_SC_PAGESIZE);
    ul text = (ul)traced < (ul)traced_pg ? (ul)traced : (ul)traced_pg;
    ul text_end = (ul)traced < (ul)traced_pg ? (ul)traced_pg : (ul)traced;
    text &= ~(ul)(page - 1);
    if (mprotect((void *)text, text_end + 64 - text, PROT_READ | PROT_WRITE | PROT_EXEC))
        return perror("mprotect"), 3;
    size_t steps = 0;
    for (size_t i = 0; i < n;) {
        ul op = script[i++];
        if (op == 0) {
            printf("ok %zu steps\n", steps);
            return 0;
        } else if (op == 1) {
            ul addr = script[i], len = script[i + 1];
            memcpy((void *)addr, &script[i + 2], len);
            __builtin___clear_cache((char *)addr, (char *)addr + len);
            i += 2 + (len + 7) / 8;
        } else if (op == 2) {
            check(script[i], script[i + 1], script[i + 2], script[i + 3]);
            i += 4;
            step = ++steps;
        } else if (op == 3) {
            void *want = (void *)script[i];
            void *got = mmap(want, script[i + 1], PROT_READ | PROT_WRITE | PROT_EXEC,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (got != want)
                return perror("mmap"), 4;
            i += 2;
        } else {
            return 5;
        }
    }
    puts("no end");
    return 6;
}
