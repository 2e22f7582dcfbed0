/* The emulation harness: a static program, cross-compiled and run under
 * qemu-user, that applies an arch layer's patch plan to its own code write
 * by write and runs the patched functions after every write.
 *
 * It reads a script (argv[1]), one command per line, and prints one line
 * per `run`:
 *   map ADDR SIZE          mmap RWX memory at a fixed address
 *   unprotect ADDR SIZE    make code writable (and still executable)
 *   load ADDR HEX          copy bytes (trampolines, veneers): not a step
 *   write ADDR HEX         one instruction write: a step of a plan
 *   run ADDR ARG           call int f(int) at ADDR, print what happened
 *   dump ADDR LEN          print the bytes there: "B ADDR HEX"
 *   note TEXT              echo a line (to find one's way in the output)
 * A `run` prints:
 *   R ADDR ARG RESULT SP_OK NHITS [CB:IP:PARENT:A0]...
 * where each hit is one call of a callback (CB 1 or 2), and A0 the first
 * argument from the register frame the callback got (or "-" without one).
 *
 * A test may link a file of its own that defines fntrace_emu_command():
 * its commands, in the same script, with their own checks (the AArch64
 * plans with eight arguments, aarch64_plans.c; the MIPS trampolines
 * entered with every register set, mips_trampolines.c). The harness ends
 * with "D" only when every command succeeded.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_HITS 64

struct hit {
	int cb;
	unsigned long ip, parent, a0;
	int has_regs;
};

static struct hit hits[MAX_HITS];
static int nhits;

#if defined(__mips__)
#define A0_INDEX 4
#define READ_SP(v) __asm__ volatile("move %0, $sp" : "=r"(v))
#elif defined(__aarch64__)
#define A0_INDEX 0
#define READ_SP(v) __asm__ volatile("mov %0, sp" : "=r"(v))
#else
#error "the harness runs on MIPS and AArch64"
#endif

static void record(int cb, unsigned long ip, unsigned long parent, unsigned long *regs)
{
	if (nhits < MAX_HITS) {
		hits[nhits].cb = cb;
		hits[nhits].ip = ip;
		hits[nhits].parent = parent;
		hits[nhits].has_regs = regs != 0;
		hits[nhits].a0 = regs ? regs[A0_INDEX] : 0;
	}
	nhits++;
}

/* The callbacks the generated trampolines call. Not static: the test
 * finds their addresses in the symbol table. */
__attribute__((noinline, used)) void fntrace_emu_cb1(unsigned long ip, unsigned long parent,
						      unsigned long *regs)
{
	record(1, ip, parent, regs);
}

__attribute__((noinline, used)) void fntrace_emu_cb2(unsigned long ip, unsigned long parent,
						      unsigned long *regs)
{
	record(2, ip, parent, regs);
}

/* `_mcount` as the kernel's 004 design has it when tracing is off: it
 * returns at once (restoring ra from at, and on o32 the 8 bytes the
 * caller's delay slot took from sp). Defined here so that the static link
 * takes no profiling code from libc. */
#if defined(__mips__)
__asm__(".text\n.globl _mcount\n.type _mcount, @function\n.set push\n.set noreorder\n.set noat\n"
	"_mcount:\n"
#if _MIPS_SIM == _ABIO32
	"  addiu $sp, $sp, 8\n"
#endif
	"  jr $ra\n  move $ra, $at\n.set pop\n.size _mcount, .-_mcount\n");
#elif defined(__aarch64__)
__asm__(".text\n.globl _mcount\n.type _mcount, %function\n_mcount:\n  ret\n.size _mcount, .-_mcount\n");
#endif

static unsigned long num(const char *s);

/* A test's own commands (see above): returns 0 if it does not know `cmd`,
 * 1 if it ran it; `line` is the whole line. Exits non-zero on a failure. */
__attribute__((weak)) int fntrace_emu_command(const char *cmd, const char *line);

/* Whether any of [start, start + len) is in use, from /proc/self/maps. */
static int mapped(unsigned long start, unsigned long len)
{
	char line[512];
	int found = 0;
	FILE *maps = fopen("/proc/self/maps", "r");
	if (!maps)
		return 1;
	while (!found && fgets(line, sizeof line, maps)) {
		unsigned long lo, hi;
		char perms[8];
		/* qemu-user reserves the gap between an executable's segments
		 * (here, up to the far "module") as inaccessible memory: a hole
		 * that may be mapped over. */
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && lo < start + len && start < hi &&
		    strcmp(perms, "---p"))
			found = 1;
	}
	fclose(maps);
	return found;
}

static unsigned long num(const char *s)
{
	return strtoul(s, 0, 0);
}

static size_t hex(const char *s, unsigned char *out, size_t max)
{
	size_t n = 0;
	while (s[0] && s[1] && n < max) {
		unsigned int b;
		if (sscanf(s, "%2x", &b) != 1)
			break;
		out[n++] = (unsigned char)b;
		s += 2;
	}
	return n;
}

__attribute__((noinline)) static void run(unsigned long addr, long arg)
{
	int (*f)(int) = (int (*)(int))addr;
	unsigned long before, after;
	int result;
	nhits = 0;
	READ_SP(before);
	result = f((int)arg);
	READ_SP(after);
	printf("R %#lx %ld %d %d %d", addr, arg, result, before == after, nhits);
	for (int i = 0; i < nhits && i < MAX_HITS; i++) {
		if (hits[i].has_regs)
			printf(" %d:%#lx:%#lx:%ld", hits[i].cb, hits[i].ip, hits[i].parent, (long)hits[i].a0);
		else
			printf(" %d:%#lx:%#lx:-", hits[i].cb, hits[i].ip, hits[i].parent);
	}
	printf("\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static char line[1 << 16];
	static unsigned char bytes[1 << 15];
	FILE *script;
	if (argc != 2 || !(script = fopen(argv[1], "r"))) {
		fprintf(stderr, "usage: harness SCRIPT\n");
		return 2;
	}
	while (fgets(line, sizeof line, script)) {
		char cmd[16], a[64], b[sizeof line];
		int n = sscanf(line, "%15s %63s %s", cmd, a, b);
		if (n < 1)
			continue;
		if (!strcmp(cmd, "note")) {
			printf("N %s", line + 5);
		} else if (!strcmp(cmd, "map") && n == 3) {
			void *want = (void *)num(a);
			void *got = MAP_FAILED;
			/* Only where nothing is mapped: qemu-user 7.2 knows
			 * neither MAP_FIXED_NOREPLACE nor msync's ENOMEM. */
			if (!mapped(num(a), num(b)))
				got = mmap(want, num(b), PROT_READ | PROT_WRITE | PROT_EXEC,
					   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (got != want) {
				printf("E map %s failed\n", a);
				return 1;
			}
		} else if (!strcmp(cmd, "unprotect") && n == 3) {
			unsigned long start = num(a) & ~4095UL, end = (num(a) + num(b) + 4095) & ~4095UL;
			if (mprotect((void *)start, end - start, PROT_READ | PROT_WRITE | PROT_EXEC)) {
				printf("E unprotect %s failed\n", a);
				return 1;
			}
		} else if ((!strcmp(cmd, "load") || !strcmp(cmd, "write")) && n == 3) {
			size_t len = hex(b, bytes, sizeof bytes);
			char *to = (char *)num(a);
			if (!strcmp(cmd, "write") && len == 4 && num(a) % 4 == 0)
				/* One aligned word, as a running thread sees it: whole. */
				*(volatile uint32_t *)to = *(uint32_t *)(void *)bytes;
			else
				memcpy(to, bytes, len);
			__builtin___clear_cache(to, to + len);
		} else if (!strcmp(cmd, "dump") && n == 3) {
			const unsigned char *p = (const unsigned char *)num(a);
			printf("B %s ", a);
			for (unsigned long i = 0; i < num(b); i++)
				printf("%02x", p[i]);
			printf("\n");
		} else if (!strcmp(cmd, "run") && n == 3) {
			run(num(a), (long)num(b));
		} else if (fntrace_emu_command && fntrace_emu_command(cmd, line)) {
			fflush(stdout);
		} else {
			printf("E bad command: %s", line);
			return 1;
		}
	}
	printf("D\n");
	return 0;
}
