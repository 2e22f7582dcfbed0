//! The common trampoline routines, in assembly: what a trampoline slot jumps
//! to. A slot loads its ops into `r11` and jumps here; the routine saves the
//! registers the callback may clobber (or, for ops with registers, builds the
//! whole [`Regs`] frame), calls the ops' callback directly, restores, and
//! returns into the traced function — or, if a callback changed `regs.ip`,
//! to wherever it points (a redirect).
//!
//! The routines live in the runtime's own text and are never freed, so a
//! thread inside a callback never returns into memory that could go away.
//! One routine per (site role, register frame):
//! - role: `entry` (the parent's return address is at `8(%rbp)` above the
//!   site's), `mcount` (after the prologue: found through the function's
//!   frame pointer), `exit` (calls the exit callback);
//! - vectors: `xmm0-7` are saved, or `ymm0-7` whole where the CPU has AVX
//!   and their upper halves are in use, decided at run time (a callback
//!   that uses AVX, or calls `memcpy`, clobbers the upper halves).

use std::arch::global_asm;
use std::sync::atomic::{AtomicBool, Ordering};

/// The register frame given to callbacks of ops that ask for registers.
/// Changing a field changes the register when the traced code resumes;
/// changing `ip` at an entry site redirects the function.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct Regs {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rax: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    /// Where the traced code resumes: the return address of the site.
    pub ip: u64,
    /// The flags register at the site (not restored: calls clobber it).
    pub flags: u64,
    /// The stack pointer after the site (read only).
    pub sp: u64,
}

/// Where the regs routines keep the vector registers, from the frame's
/// start: `xmm0`-`xmm7` (all sixteen in the bare routine) from
/// [`VECS_OFFSET`], 16 or 32 bytes apart as the flag word says (bit 2:
/// whole `ymm` registers), at [`VECS_FLAG`] or, in the bare routine,
/// [`VECS_FLAG_BARE`].
const VECS_OFFSET: usize = 144;
const VECS_FLAG: usize = 400;
const VECS_FLAG_BARE: usize = 656;
const _: () = assert!(std::mem::size_of::<Regs>() == VECS_OFFSET);

/// The low 8 bytes of vector register `i` (`xmm0`-`xmm7`) as the regs
/// routine that made the frame `regs` saved them: the bare sites' routine
/// (`bare`) or the others'. A `float` is the low 4 of them.
///
/// # Safety
/// `regs` is the frame a regs routine passed to the callback running now
/// (the routine's stack frame, live until the callback returns).
pub unsafe fn saved_vector(regs: *const Regs, bare: bool, i: usize) -> u64 {
    let base = regs.cast::<u8>();
    let flag = if bare { VECS_FLAG_BARE } else { VECS_FLAG };
    // SAFETY: the routine wrote the flag and the vectors at these offsets
    // of its frame (FNTRACE_SAVE_VECS in FNTRACE_REGS_ROUTINE), which the
    // caller guarantees is live; unaligned reads of plain bytes.
    unsafe {
        let wide = base.add(flag).cast::<u32>().read_unaligned() & 4 != 0;
        let stride = if wide { 32 } else { 16 };
        base.add(VECS_OFFSET + (i & 7) * stride)
            .cast::<u64>()
            .read_unaligned()
    }
}

global_asm!(
    r#"
    // Stores (dir 0) or loads (dir 1) the vector argument registers 0-7
    // at rsp + base: ymm with vmovdqu if avx, else xmm with movdqu.
    .macro FNTRACE_VECS dir, base, avx
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7
    .if \avx
    .if \dir
    vmovdqu ymm\i, [rsp + \base + \i * 32]
    .else
    vmovdqu [rsp + \base + \i * 32], ymm\i
    .endif
    .else
    .if \dir
    movdqu xmm\i, [rsp + \base + \i * 16]
    .else
    movdqu [rsp + \base + \i * 16], xmm\i
    .endif
    .endif
    .endr
    .endm

    // FNTRACE_VECS for all sixteen vector registers (bare sites: see
    // FNTRACE_BARE_ENTRY).
    .macro FNTRACE_VECS16 dir, base, avx
    FNTRACE_VECS \dir, \base, \avx
    .irp i, 8, 9, 10, 11, 12, 13, 14, 15
    .if \avx
    .if \dir
    vmovdqu ymm\i, [rsp + \base + \i * 32]
    .else
    vmovdqu [rsp + \base + \i * 32], ymm\i
    .endif
    .else
    .if \dir
    movdqu xmm\i, [rsp + \base + \i * 16]
    .else
    movdqu [rsp + \base + \i * 16], xmm\i
    .endif
    .endif
    .endr
    .endm

    // Saves the vector argument registers at rsp + base: xmm, or, where the
    // CPU has AVX, whole ymm registers only when their upper halves are in
    // use (XGETBV 1, XINUSE bit 2, where the CPU has it; else always):
    // restoring ymm registers makes the upper state dirty, which slows
    // every later SSE instruction of the program; with clean upper halves,
    // xmm is all there is to keep (anything we call that dirties them
    // zeroes them again, `vzeroupper`). The choice is kept at rsp + flag
    // (bit 2: ymm). Clobbers rax, rcx, rdx. The return trampoline
    // (`tracer/asm.rs`) decides the same way from the same two flags.
    .macro FNTRACE_SAVE_VECS base, flag, vecs=FNTRACE_VECS
    mov dword ptr [rsp + \flag], 0
    cmp byte ptr [rip + {avx}], 0
    je 72f
    mov dword ptr [rsp + \flag], 4
    cmp byte ptr [rip + {xinuse}], 0
    je 71f
    mov ecx, 1
    xgetbv
    mov [rsp + \flag], eax
71:
    test byte ptr [rsp + \flag], 4
    jz 72f
    \vecs 0, \base, 1
    jmp 73f
72:
    \vecs 0, \base, 0
73:
    .endm

    // Loads what FNTRACE_SAVE_VECS saved.
    .macro FNTRACE_LOAD_VECS base, flag, vecs=FNTRACE_VECS
    test byte ptr [rsp + \flag], 4
    jz 74f
    \vecs 1, \base, 1
    jmp 75f
74:
    \vecs 1, \base, 0
75:
    .endm

    // rsi = the parent's return address, r8 = where it is on the stack
    // (the traced function's return slot, which a tracer may hijack).
    .macro FNTRACE_PARENT mcount
    .if \mcount
    mov r8, [rbp]
    add r8, 8
    .else
    lea r8, [rbp + 16]
    .endif
    mov rsi, [r8]
    .endm

    // A routine without the register frame: saves the argument and scratch
    // registers the callback may clobber.
    .macro FNTRACE_ROUTINE name, mcount, offset
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    push rbp
    mov rbp, rsp
    sub rsp, 336
    and rsp, -16
    mov [rsp + 0], rdi
    mov [rsp + 8], rsi
    mov [rsp + 16], rdx
    mov [rsp + 24], rcx
    mov [rsp + 32], r8
    mov [rsp + 40], r9
    mov [rsp + 48], rax
    mov [rsp + 56], r10
    FNTRACE_SAVE_VECS 64, 320
    mov rdi, [rbp + 8]
    FNTRACE_PARENT \mcount
    mov rdx, r11
    xor ecx, ecx
    call [r11 + \offset]
    FNTRACE_LOAD_VECS 64, 320
    mov rdi, [rsp + 0]
    mov rsi, [rsp + 8]
    mov rdx, [rsp + 16]
    mov rcx, [rsp + 24]
    mov r8, [rsp + 32]
    mov r9, [rsp + 40]
    mov rax, [rsp + 48]
    mov r10, [rsp + 56]
    leave
    ret
    .size \name, . - \name
    .endm

    // A routine with the whole register frame (`Regs`, 144 bytes). With
    // `bare`, the routine of bare sites (functions no compiler prepared,
    // `bare.rs`): their callers may keep values in any register across the
    // call (gcc's -fipa-ra assumes a callee clobbers only what it uses), so
    // all sixteen vector registers are kept too, not only the argument
    // ones; and there is no slot: the detour's `call *W(%rip)` comes here
    // directly, and the ops is the word after W, found from the call's own
    // displacement, so r11 is the function's, saved like the others (W + 16
    // is a fast path's data).
    .macro FNTRACE_REGS_ROUTINE name, mcount, offset, bare=0
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    push rbp
    mov rbp, rsp
    .if \bare
    sub rsp, 688
    .else
    sub rsp, 416
    .endif
    and rsp, -16
    mov [rsp + 0], r15
    mov [rsp + 8], r14
    mov [rsp + 16], r13
    mov [rsp + 24], r12
    mov [rsp + 80], rax
    mov rax, [rbp]
    mov [rsp + 32], rax
    mov [rsp + 40], rbx
    mov [rsp + 48], r11
    mov [rsp + 56], r10
    mov [rsp + 64], r9
    mov [rsp + 72], r8
    mov [rsp + 88], rcx
    mov [rsp + 96], rdx
    mov [rsp + 104], rsi
    mov [rsp + 112], rdi
    mov rax, [rbp + 8]
    mov [rsp + 120], rax
    pushfq
    pop rax
    mov [rsp + 128], rax
    lea rax, [rbp + 16]
    mov [rsp + 136], rax
    .if \bare
    FNTRACE_SAVE_VECS {vecs}, {vflag_bare}, FNTRACE_VECS16
    // W: the detour's call ends at the return address, its disp32 last.
    mov rax, [rbp + 8]
    movsxd rdx, dword ptr [rax - 4]
    add rax, rdx
    mov rdx, [rax + 8]
    .else
    FNTRACE_SAVE_VECS {vecs}, {vflag}
    mov rdx, r11
    .endif
    mov rdi, [rbp + 8]
    FNTRACE_PARENT \mcount
    mov rcx, rsp
    call [rdx + \offset]
    .if \bare
    FNTRACE_LOAD_VECS {vecs}, {vflag_bare}, FNTRACE_VECS16
    .else
    FNTRACE_LOAD_VECS {vecs}, {vflag}
    .endif
    mov rax, [rsp + 120]
    mov [rbp + 8], rax
    mov rax, [rsp + 32]
    mov [rbp], rax
    mov r15, [rsp + 0]
    mov r14, [rsp + 8]
    mov r13, [rsp + 16]
    mov r12, [rsp + 24]
    mov rbx, [rsp + 40]
    mov r11, [rsp + 48]
    mov r10, [rsp + 56]
    mov r9, [rsp + 64]
    mov r8, [rsp + 72]
    mov rax, [rsp + 80]
    mov rcx, [rsp + 88]
    mov rdx, [rsp + 96]
    mov rsi, [rsp + 104]
    mov rdi, [rsp + 112]
    leave
    ret
    .size \name, . - \name
    .endm

    FNTRACE_ROUTINE fntrace_entry, 0, 8
    FNTRACE_ROUTINE fntrace_mcount, 1, 8
    FNTRACE_ROUTINE fntrace_exit, 0, 16
    FNTRACE_REGS_ROUTINE fntrace_entry_regs, 0, 8
    FNTRACE_REGS_ROUTINE fntrace_mcount_regs, 1, 8
    FNTRACE_REGS_ROUTINE fntrace_exit_regs, 0, 16
    FNTRACE_REGS_ROUTINE fntrace_bare_entry, 0, 8, 1
"#,
    avx = sym AVX,
    xinuse = sym XINUSE,
    vecs = const VECS_OFFSET,
    vflag = const VECS_FLAG,
    vflag_bare = const VECS_FLAG_BARE,
);

/// Whether the CPU has AVX (ymm registers to keep).
pub(crate) static AVX: AtomicBool = AtomicBool::new(false);
/// Whether `XGETBV` with `ECX = 1` (the XINUSE bitmap) works on this CPU.
pub(crate) static XINUSE: AtomicBool = AtomicBool::new(false);

/// Reads the CPU features the routines use.
pub fn setup() {
    let avx = std::arch::is_x86_feature_detected!("avx");
    let xinuse = avx && {
        // cpuid only reads; leaf 0xD exists where AVX does.
        let leaf = std::arch::x86_64::__cpuid_count(0xd, 1);
        leaf.eax & 4 != 0
    };
    AVX.store(avx, Ordering::Relaxed);
    XINUSE.store(xinuse, Ordering::Relaxed);
}

extern "C" {
    /// The routine of bare sites (the fast paths fall back to it).
    pub(crate) fn fntrace_bare_entry();
    fn fntrace_entry();
    fn fntrace_mcount();
    fn fntrace_exit();
    fn fntrace_entry_regs();
    fn fntrace_mcount_regs();
    fn fntrace_exit_regs();
}

/// The routine bare sites' detours call (through their word, without a
/// slot): every register kept, the whole frame built.
pub fn bare_routine() -> usize {
    fntrace_bare_entry as *const () as usize
}

/// The routine for a site of `role`, with the register frame or not.
pub(super) fn routine_of(role: fntrace_core::Role, regs: bool) -> unsafe extern "C" fn() {
    use fntrace_core::Role::*;
    match (role, regs) {
        (Entry, false) => fntrace_entry,
        (Mcount, false) => fntrace_mcount,
        (Exit, false) => fntrace_exit,
        (Entry, true) => fntrace_entry_regs,
        (Mcount, true) => fntrace_mcount_regs,
        (Exit, true) => fntrace_exit_regs,
    }
}
