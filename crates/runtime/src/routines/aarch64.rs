//! The common trampoline routines of AArch64, in assembly: what a
//! trampoline slot jumps to (`fntrace_arch`'s AArch64 slot: `ldr x16,
//! data; ldr x17, target; br x17`), with the ops in `x16`.
//!
//! - `entry`: reached from an entry site's `mov x9, x30; bl slot`, so `x30`
//!   is the return into the traced function and `x9` its own return
//!   address (the kernel's arm64 `ftrace_caller` convention). The routine
//!   leaves with `x30 = x9` and returns to the site: a callback that
//!   changed the saved `x9` (the return slot it is given) changes where
//!   the function returns. That slot lives only while the routine runs,
//!   so it is given tagged with [`IN_REGISTER`], and it lies
//!   [`SLOT_BELOW_SP`] bytes below the stack pointer the function was
//!   entered with (which its return restores): the call's identity.
//! - `mcount`: reached from a `-pg` site's `bl _mcount` after the
//!   prologue; the function's return address is in its frame record,
//!   `[x29, #8]`, which is the return slot.
//! - `exit`: AArch64 compilers leave no exit sites; the role's routine is
//!   the entry one, never reached.
//!
//! Kept: `x0`-`x9` (arguments, the indirect result register, `x9`) and
//! `q0`-`q7`, what a function's entry may hold; `x16` and `x17` are the
//! veneers' and are free there. With registers, the whole [`Regs`] frame
//! is built and `x0`-`x15`, `x30` and `ip` are taken back from it.

use std::arch::global_asm;

/// The register frame given to callbacks of ops that ask for registers.
/// Changing `x[0]`..`x[15]` changes the register when the traced code
/// resumes; changing `ip` at an entry site redirects the function.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(missing_docs)]
pub struct Regs {
    /// `x0`-`x30` at the site; `x[30]` is the function's return address.
    pub x: [u64; 31],
    /// The stack pointer at the site (read only).
    pub sp: u64,
    /// Where the traced code resumes: the return address of the site.
    pub ip: u64,
    /// Padding (keeps the frame 16-byte aligned).
    pub pad: u64,
}

/// The tag of a return slot that holds the function's return address only
/// while the routine runs (entry sites: the function has it in `x30`).
pub const IN_REGISTER: usize = 1;

/// How far below the stack pointer at a function's entry the entry routine
/// keeps its return address (`x9`, at 88 in its 416-byte frame).
pub const SLOT_BELOW_SP: usize = 416 - 88;

/// Where the routines keep `q0`-`q7`, from the frame's start.
const VECS_OFFSET: usize = 16 + std::mem::size_of::<Regs>();
const _: () = assert!(std::mem::size_of::<Regs>() == 272);

global_asm!(
    r#"
    // The routines' frame: x29/x30 at 0, then a Regs (x0..x30, sp, ip,
    // pad) at 16, then q0-q7 at {vecs}: 16 + 272 + 128 = 416 bytes.
    .macro FNTRACE_A64_ROUTINE name, mcount, offset, regs
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    stp x29, x30, [sp, #-416]!
    mov x29, sp
    stp x0, x1, [sp, #16]
    stp x2, x3, [sp, #32]
    stp x4, x5, [sp, #48]
    stp x6, x7, [sp, #64]
    stp x8, x9, [sp, #80]
    stp q0, q1, [sp, #{vecs}]
    stp q2, q3, [sp, #{vecs} + 32]
    stp q4, q5, [sp, #{vecs} + 64]
    stp q6, q7, [sp, #{vecs} + 96]
    // x0 = ip, x1 = parent, x4 = the return slot
    mov x0, x30
    .if \mcount
    ldr x4, [sp]
    add x4, x4, #8
    ldr x1, [x4]
    // Without its pointer authentication code, if signed (XPACLRI, a
    // hint: a NOP on CPUs without it); x30 is the ip's copy, kept in x0.
    mov x30, x1
    hint #7
    mov x1, x30
    .else
    mov x1, x9
    add x4, sp, #88 + {in_register}
    .endif
    .if \regs
    stp x10, x11, [sp, #96]
    stp x12, x13, [sp, #112]
    stp x14, x15, [sp, #128]
    stp x16, x17, [sp, #144]
    stp x18, x19, [sp, #160]
    stp x20, x21, [sp, #176]
    stp x22, x23, [sp, #192]
    stp x24, x25, [sp, #208]
    stp x26, x27, [sp, #224]
    ldr x17, [sp]
    stp x28, x17, [sp, #240]
    str x1, [sp, #256]
    add x17, sp, #416
    stp x17, x0, [sp, #264]
    add x3, sp, #16
    .else
    mov x3, xzr
    .endif
    mov x2, x16
    ldr x16, [x16, #\offset]
    blr x16
    ldp q0, q1, [sp, #{vecs}]
    ldp q2, q3, [sp, #{vecs} + 32]
    ldp q4, q5, [sp, #{vecs} + 64]
    ldp q6, q7, [sp, #{vecs} + 96]
    .if \regs
    ldp x10, x11, [sp, #96]
    ldp x12, x13, [sp, #112]
    ldp x14, x15, [sp, #128]
    ldr x16, [sp, #272]
    .else
    ldr x16, [sp, #8]
    .endif
    ldp x0, x1, [sp, #16]
    ldp x2, x3, [sp, #32]
    ldp x4, x5, [sp, #48]
    ldp x6, x7, [sp, #64]
    ldp x8, x9, [sp, #80]
    // No copy of a hijacked return address stays in the dead frame (an
    // unwinder's restore looks for them on the stack).
    str xzr, [sp, #88]
    ldr x29, [sp]
    add sp, sp, #416
    .if \mcount
    mov x30, x16
    ret
    .else
    mov x30, x9
    ret x16
    .endif
    .size \name, . - \name
    .endm

    FNTRACE_A64_ROUTINE fntrace_entry, 0, 8, 0
    FNTRACE_A64_ROUTINE fntrace_mcount, 1, 8, 0
    FNTRACE_A64_ROUTINE fntrace_entry_regs, 0, 8, 1
    FNTRACE_A64_ROUTINE fntrace_mcount_regs, 1, 8, 1
"#,
    vecs = const VECS_OFFSET,
    in_register = const IN_REGISTER,
);

/// Nothing to detect: every AArch64 CPU has the registers kept.
pub fn setup() {}

extern "C" {
    fn fntrace_entry();
    fn fntrace_mcount();
    fn fntrace_entry_regs();
    fn fntrace_mcount_regs();
}

/// The routine of bare sites: AArch64 has none (every function a compiler
/// did not prepare stays untraced), so no slot or detour ever asks.
pub fn bare_routine() -> usize {
    routine_of(fntrace_core::Role::Entry, true) as usize
}

/// The routine for a site of `role`, with the register frame or not.
pub(super) fn routine_of(role: fntrace_core::Role, regs: bool) -> unsafe extern "C" fn() {
    use fntrace_core::Role::*;
    match (role, regs) {
        (Entry | Exit, false) => fntrace_entry,
        (Mcount, false) => fntrace_mcount,
        (Entry | Exit, true) => fntrace_entry_regs,
        (Mcount, true) => fntrace_mcount_regs,
    }
}
