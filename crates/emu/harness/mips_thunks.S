/* Thunks that enter a trampoline in the state its site leaves (see
 * mips_trampolines.c). Registers numbered; cpp comments only. */
#if __mips64
#define L ld
#define S sd
#define W 8
#define PADD daddiu
#else
#define L lw
#define S sw
#define W 4
#define PADD addiu
#endif
#define OUT (32 * W)
#define FIN (64 * W)
#define FOUT (64 * W + 64)
#define TARGET (64 * W + 128)
/* The thunk's frame: out[32] at 0, s0..ra at SAV + (r - 16) * W, ctx. */
#define SAV (32 * W)
#define CTX (48 * W)
#define FR (52 * W)

	.set noreorder
	.set noat
	.text

	.macro enter
	PADD $29, $29, -FR
	.irp r, 16, 17, 18, 19, 20, 21, 22, 23, 28, 30, 31
	S $\r, SAV + (\r - 16) * W($29)
	.endr
	S $4, CTX($29)
	S $29, 29 * W($4)
	.endm

	.macro fload
#if __mips64
	.irp f, 12, 13, 14, 15, 16, 17, 18, 19
	ldc1 $f\f, FIN + (\f - 12) * 8($4)
	.endr
#else
	ldc1 $f12, FIN($4)
	ldc1 $f14, FIN + 16($4)
#endif
	.endm

	/* Every register into out[] of the frame, then into ctx->out. */
	.macro leave
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
	S $\r, \r * W($29)
	.endr
	L $4, CTX($29)
#if __mips64
	.irp f, 12, 13, 14, 15, 16, 17, 18, 19
	sdc1 $f\f, FOUT + (\f - 12) * 8($4)
	.endr
#else
	sdc1 $f12, FOUT($4)
	sdc1 $f14, FOUT + 16($4)
#endif
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
	L $5, \r * W($29)
	S $5, OUT + \r * W($4)
	.endr
	.irp r, 16, 17, 18, 19, 20, 21, 22, 23, 28, 30, 31
	L $\r, SAV + (\r - 16) * W($29)
	.endr
	jr $31
	PADD $29, $29, FR
	.endm

	/* A -pg site: at = parent_ip (in[1]), `jalr v1` to the target,
	   o32 `addiu sp, sp, -8` in the delay slot. */
	.globl thunk_mcount
	.type thunk_mcount, @function
thunk_mcount:
	enter
	L $3, TARGET($4)
	.irp r, 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 28, 30
	L $\r, \r * W($4)
	.endr
	fload
	L $4, 4 * W($4)
	jalr $3
#if __mips64
	nop
#else
	addiu $29, $29, -8
#endif
	.globl ret_mcount
ret_mcount:
	leave
	.size thunk_mcount, . - thunk_mcount

	/* An entry site: `jalr at, at` with at = the target (in[1]), t0 =
	   the flag (in[T0]), ra = parent_ip (in[31]). */
	.globl thunk_entry
	.type thunk_entry, @function
thunk_entry:
	enter
	.irp r, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 28, 30, 31
	L $\r, \r * W($4)
	.endr
	fload
	L $4, 4 * W($4)
	/* `jalr at, at`, which gas refuses (rd == rs is UNPREDICTABLE in
	   the ISA when an exception hits the delay slot and the jalr is
	   re-executed); the site design uses it all the same. */
	.word 0x00200809
	nop
	.globl ret_entry
ret_entry:
	leave
	.size thunk_entry, . - thunk_entry

	/* What a C callback may do to the caller-saved registers. */
	.globl clobber_all
	.type clobber_all, @function
clobber_all:
	.irp r, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 28
	lui $\r, 0xdead
	.endr
#if __mips64
	.irp f, 12, 13, 14, 15, 16, 17, 18, 19
	dmtc1 $2, $f\f
	.endr
#else
	mtc1 $2, $f12
	mthc1 $2, $f12
	mtc1 $2, $f14
	mthc1 $2, $f14
#endif
	jr $31
	nop
	.size clobber_all, . - clobber_all
