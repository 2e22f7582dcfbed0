//! The tracer's assembly on AArch64: the return trampoline a hijacked
//! function returns into, and this thread's state word. There are no fast
//! paths yet: every event is recorded by the callbacks, through the common
//! routines (`routines_aarch64.rs`).
//!
//! The return trampoline keeps the return registers (`x0`-`x8`, `q0`-`q7`)
//! and asks `graph_return_at` where to go, with the stack pointer the
//! function returned with: the one it was entered with, which identifies
//! the call (`retslot.rs`).

use std::arch::global_asm;
use std::cell::Cell;

use fntrace_arch::Shape;
use fntrace_core::Role;

use super::graph;

/// Where the trampoline saves `q0`-`q7` in its save area (after
/// `x0`-`x8` and a word of padding), which `graph_return` reads `q0`
/// from.
pub const RETURN_VECS: usize = 80;

global_asm!(
    r#"
    .text
    .p2align 4
    .globl fntrace_returns_start
    .hidden fntrace_returns_start
fntrace_returns_start:
    .rept {entries} - 1
    nop
    .endr
    .globl fntrace_return_to_handler
    .hidden fntrace_return_to_handler
    .type fntrace_return_to_handler, @function
fntrace_return_to_handler:
    sub sp, sp, #224
    stp x0, x1, [sp, #0]
    stp x2, x3, [sp, #16]
    stp x4, x5, [sp, #32]
    stp x6, x7, [sp, #48]
    str x8, [sp, #64]
    stp q0, q1, [sp, #{vecs}]
    stp q2, q3, [sp, #{vecs} + 32]
    stp q4, q5, [sp, #{vecs} + 64]
    stp q6, q7, [sp, #{vecs} + 96]
    add x0, sp, #224
    mov x1, sp
    bl {graph_return}
    mov x30, x0
    ldp q0, q1, [sp, #{vecs}]
    ldp q2, q3, [sp, #{vecs} + 32]
    ldp q4, q5, [sp, #{vecs} + 64]
    ldp q6, q7, [sp, #{vecs} + 96]
    ldp x0, x1, [sp, #0]
    ldp x2, x3, [sp, #16]
    ldp x4, x5, [sp, #32]
    ldp x6, x7, [sp, #48]
    ldr x8, [sp, #64]
    add sp, sp, #224
    ret
    .size fntrace_return_to_handler, . - fntrace_return_to_handler
    .globl fntrace_returns_end
    .hidden fntrace_returns_end
fntrace_returns_end:
"#,
    vecs = const RETURN_VECS,
    entries = const RETURN_ENTRIES,
    graph_return = sym graph::graph_return_at,
);

extern "C" {
    fn fntrace_returns_start();
    fn fntrace_returns_end();
    fn fntrace_return_to_handler();
}

/// How many entries the return trampoline has, 4 bytes apart: it and the
/// NOPs before it, which fall into it. A return address that a function
/// signs itself is given one that differs from itself signed
/// (`retslot::entry_for`).
pub const RETURN_ENTRIES: usize = 8;

/// The return trampoline that `a` enters (`a` itself if it enters none).
pub fn return_entry_of(a: usize) -> usize {
    let t = return_trampoline();
    if a % 4 == 0 && a < t && t - a < 4 * RETURN_ENTRIES {
        t
    } else {
        a
    }
}

/// The return trampoline (the address written into hijacked slots).
pub fn return_trampoline() -> usize {
    fntrace_return_to_handler as *const () as usize
}

/// The return trampoline of functions whose callers may rely on every
/// register: the one trampoline, which keeps what a return may hold.
pub fn return_trampoline_bare() -> usize {
    return_trampoline()
}

/// Where every return trampoline lies, `[start, end)`.
pub fn return_trampolines() -> (usize, usize) {
    (
        fntrace_returns_start as *const () as usize,
        fntrace_returns_end as *const () as usize,
    )
}

/// The return trampoline that keeps every return register.
pub fn return_trampoline_all() -> usize {
    return_trampoline()
}

/// The profiler's return trampoline.
pub fn profile_trampoline() -> usize {
    return_trampoline()
}

/// No fast paths on AArch64 (see the module's comment).
pub const FAST_PATHS: bool = false;

/// See [`FAST_PATHS`].
pub fn fast_graph_bare(_open: bool) -> Option<usize> {
    None
}

/// See [`FAST_PATHS`].
pub fn fast_graph(_role: Role, _shape: Shape, _open: bool) -> Option<usize> {
    None
}

/// See [`FAST_PATHS`]: never asked (`fast_slot` stops first). An
/// address of another routine would run the wrong code, so it has none.
pub fn fast_graph_args(_open: bool) -> usize {
    unreachable!("no fast paths on AArch64 (fast_slot stops first)")
}

/// See [`FAST_PATHS`].
pub fn fast_profile(_role: Role, _shape: Shape, _open: bool) -> Option<usize> {
    None
}

/// See [`FAST_PATHS`].
pub fn fast_caller(_role: Role) -> Option<usize> {
    None
}

/// See [`FAST_PATHS`].
pub fn set_fallback(_ops: usize, _routine: impl Fn(Role) -> usize) {}

/// What a fast entry with arguments would read: none on AArch64.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgWords;

impl ArgWords {
    /// None: no fast paths.
    pub fn new(_frame: u64, _descriptor: u64) -> Option<ArgWords> {
        None
    }
}

thread_local! {
    /// This thread's tracer state (`thread.rs`): a const-initialised
    /// cell, read without a lazy-initialisation check.
    static THREAD: Cell<usize> = const { Cell::new(0) };
}

/// This thread's tracer state.
#[inline(always)]
pub fn tls_get() -> usize {
    THREAD.with(Cell::get)
}

/// Sets this thread's tracer state.
pub fn tls_set(v: usize) {
    THREAD.with(|t| t.set(v));
}
