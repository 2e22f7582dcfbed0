/* fntrace's MIPS trampolines and veneers entered directly, under
 * qemu-user: linked into the emulation harness (harness.c) with the thunks
 * of mips_thunks.S, which enter a trampoline in the state its site leaves;
 * checks what the callback got and every register the trampoline promises
 * to preserve (tests/mips_trampolines.rs loads the code and writes the
 * script). Its commands, beside the harness's map/load:
 *   enter ENTRY VENEER TARGET FLAG REGS NAME
 *        enter the code at TARGET as an entry (1) or -pg (0) site does,
 *        through a veneer (1) or not, with t0 = FLAG (entry sites), the
 *        callback expected to get the register frame (REGS 1) or null
 *   summary   print "ALL OK", or the number of failures and exit 1
 * A failed check prints "FAIL NAME: ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long ul;

/* Offsets known to harness.S. */
struct ctx {
	ul in[32];
	ul out[32];
	double fin[8];
	double fout[8];
	ul target;
};

extern void thunk_mcount(struct ctx *);
extern void thunk_entry(struct ctx *);
extern void clobber_all(void);
extern char ret_mcount[], ret_entry[];

static volatile int calls;
static volatile ul got_ip, got_parent, got_regs_p;
static volatile ul got_regs[33];

void callback(ul ip, ul parent, ul *regs)
{
	calls++;
	got_ip = ip;
	got_parent = parent;
	got_regs_p = (ul)regs;
	if (regs)
		for (int i = 0; i < 33; i++)
			got_regs[i] = regs[i];
	clobber_all();
}

#if __mips64
#define T0 12
static const int keep[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16, 17, 18, 19, 20, 21, 22, 23, 25, 28, 30};
static const int fprs[] = {0, 1, 2, 3, 4, 5, 6, 7};
#else
#define T0 8
static const int keep[] = {2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 18, 19, 20, 21, 22, 23, 25, 28, 30};
static const int fprs[] = {0, 2};
#endif
#define N(a) (int)(sizeof(a) / sizeof(a[0]))

static int fails;
#define CHECK(c, ...)                                                      \
	do {                                                               \
		if (!(c)) {                                                \
			fails++;                                           \
			printf("FAIL %s: ", name);                         \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
		}                                                          \
	} while (0)

static void run(const char *name, int entry, int veneer, ul target, int flag, int want_regs)
{
	struct ctx c;
	memset(&c, 0, sizeof c);
	for (int i = 0; i < 32; i++)
		c.in[i] = (ul)0x5a5a0000u + 0x100u * i + (sizeof(ul) > 4 ? (ul)0x1234567 << (sizeof(ul) * 4) : 0);
	for (int k = 0; k < 8; k++)
		c.fin[k] = 1.25 + k;
	c.target = target;
	if (entry) {
		c.in[1] = target;
		c.in[T0] = flag;
	}
	calls = 0;
	got_regs_p = 0;
	for (int i = 0; i < 33; i++)
		got_regs[i] = 0;
	(entry ? thunk_entry : thunk_mcount)(&c);

	ul ip = entry ? (ul)ret_entry : (ul)ret_mcount;
	ul parent = entry ? c.in[31] : c.in[1];
	CHECK(calls == 1, "%d calls", calls);
	CHECK(got_ip == ip, "ip %#lx, want %#lx", got_ip, ip);
	CHECK(got_parent == parent, "parent_ip %#lx, want %#lx", got_parent, parent);
	CHECK((got_regs_p != 0) == want_regs, "regs %#lx", got_regs_p);
	CHECK(c.out[29] == c.in[29], "sp %#lx, want %#lx", c.out[29], c.in[29]);
	for (int k = 0; k < N(keep); k++) {
		int r = keep[k];
		if ((!entry || veneer) && r == 3)
			continue; /* v1 held the target, or the veneer used it */
		CHECK(c.out[r] == c.in[r], "$%d = %#lx, want %#lx", r, c.out[r], c.in[r]);
	}
	if (entry) {
		CHECK(c.out[1] == ip, "at %#lx, want ip", c.out[1]);
		CHECK(c.out[31] == c.in[31], "ra %#lx, want %#lx", c.out[31], c.in[31]);
	} else {
		CHECK(c.out[1] == parent, "at %#lx, want parent", c.out[1]);
		CHECK(c.out[31] == parent, "ra %#lx, want parent", c.out[31]);
	}
	for (int k = 0; k < N(fprs); k++)
		CHECK(c.fout[fprs[k]] == c.fin[fprs[k]], "$f%d = %g, want %g", 12 + fprs[k], c.fout[fprs[k]],
		      c.fin[fprs[k]]);
	if (!got_regs_p)
		return;
	for (int i = 0; i < 33; i++) {
		ul want = i < 32 ? c.in[i] : ip;
		if (i == 0)
			want = 0;
		if (i == 1)
			want = entry ? ip : parent;
		if (i == 31)
			want = entry ? parent : ip;
		if (i == 26 || i == 27 || ((!entry || veneer) && i == 3))
			continue; /* k0/k1; v1 */
		CHECK(got_regs[i] == want, "regs[%d] = %#lx, want %#lx", i, got_regs[i], want);
	}
}

int fntrace_emu_command(const char *cmd, const char *line)
{
	char name[64];
	int entry, veneer, flag, want_regs;
	ul target;
	if (!strcmp(cmd, "enter")) {
		if (sscanf(line, "enter %d %d %lx %d %d %63[^\n]", &entry, &veneer, &target, &flag, &want_regs,
			   name) != 6)
			return 0;
		run(name, entry, veneer, target, flag, want_regs);
		return 1;
	}
	if (!strcmp(cmd, "summary")) {
		if (fails) {
			printf("%d failures\n", fails);
			exit(1);
		}
		printf("ALL OK\n");
		return 1;
	}
	return 0;
}
