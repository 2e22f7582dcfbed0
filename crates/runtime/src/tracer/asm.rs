//! The tracer's assembly: the fast paths that record an event without
//! leaving assembly (entry with return hijacking, entry of functions with
//! exit sleds, exit at a return sled, the `function` tracer's entry), and
//! the return trampoline a hijacked function returns into.
//!
//! The return trampoline keeps the return registers (`rax`, `rdx`, `xmm0`,
//! `xmm1` — whole `ymm0`/`ymm1` where the CPU has AVX) and asks
//! `graph_return` where to go; it leaves by `jmp`, so no frame of ours stays
//! on the stack.

use std::arch::global_asm;
use std::sync::atomic::{AtomicUsize, Ordering};

use fntrace_arch::Shape;
use fntrace_core::Role;

use super::graph;
use super::thread::{off, SHADOW};

/// The largest delta an event holds, for the fast paths' comparison.
static MAX_DELTA: u64 = fntrace_format::event::MAX_DELTA;
// The fast paths derive the ENTRY and EXIT words from the function id.
const _: () = assert!(fntrace_format::event::word_of(fntrace_format::event::Kind::Entry, 5) == 5 << 3);
const _: () = assert!(fntrace_format::event::word_of(fntrace_format::event::Kind::Exit, 5) == 5 << 3 | 1);

/// The return trampoline (the address written into hijacked slots).
pub fn return_trampoline() -> usize {
    fntrace_return_to_handler as *const () as usize
}

/// The fast routine of `function_graph` for a site of `role` and `shape`,
/// if it has one: entries hijack the return unless the function has exit
/// sites (`open`); exits are served at return sleds only (a tail exit
/// site is followed by a jump, not a return).
pub fn fast_graph(role: Role, shape: Shape, open: bool) -> Option<usize> {
    let f: unsafe extern "C" fn() = match (role, shape, open) {
        (Role::Entry, _, false) => fntrace_fast_entry,
        (Role::Mcount, _, false) => fntrace_fast_entry_mcount,
        (Role::Entry, _, true) => fntrace_fast_open,
        (Role::Exit, Shape::ReturnSled, true) => fntrace_fast_exit,
        _ => return None,
    };
    Some(f as usize)
}

/// The fast entry routine of the `function` tracer for a site of `role`.
pub fn fast_caller(role: Role) -> Option<usize> {
    match role {
        Role::Entry => Some(fntrace_fast_caller as *const () as usize),
        Role::Mcount => Some(fntrace_fast_caller_mcount as *const () as usize),
        Role::Exit => None,
    }
}

/// Where the fast paths go when they cannot record: the tracer's ops and
/// the generic routine of the site's role.
static FALLBACK_OPS: AtomicUsize = AtomicUsize::new(0);
static FALLBACK_ENTRY: AtomicUsize = AtomicUsize::new(0);
static FALLBACK_MCOUNT: AtomicUsize = AtomicUsize::new(0);
static FALLBACK_EXIT: AtomicUsize = AtomicUsize::new(0);

/// Sets the fast paths' fallback: the ops and its generic routine for
/// each site role.
pub fn set_fallback(ops: usize, routine: impl Fn(Role) -> usize) {
    FALLBACK_OPS.store(ops, Ordering::Relaxed);
    FALLBACK_ENTRY.store(routine(Role::Entry), Ordering::Release);
    FALLBACK_MCOUNT.store(routine(Role::Mcount), Ordering::Release);
    FALLBACK_EXIT.store(routine(Role::Exit), Ordering::Release);
}

/// This thread's tracer state (the initial-exec TLS word the fast paths read).
#[inline(always)]
pub fn tls_get() -> usize {
    let p: usize;
    // SAFETY: reads this thread's TLS word `fntrace_tls_thread`.
    unsafe {
        std::arch::asm!(
            "mov {p}, qword ptr [rip + fntrace_tls_thread@GOTTPOFF]",
            "mov {p}, qword ptr fs:[{p}]",
            p = out(reg) p,
            options(nostack, readonly, preserves_flags),
        );
    }
    p
}

/// Sets this thread's tracer state.
pub fn tls_set(v: usize) {
    // SAFETY: writes this thread's TLS word `fntrace_tls_thread`.
    unsafe {
        std::arch::asm!(
            "mov {t}, qword ptr [rip + fntrace_tls_thread@GOTTPOFF]",
            "mov qword ptr fs:[{t}], {v}",
            t = out(reg) _,
            v = in(reg) v,
            options(nostack, preserves_flags),
        );
    }
}

extern "C" {
    fn fntrace_return_to_handler();
    fn fntrace_fast_entry();
    fn fntrace_fast_entry_mcount();
    fn fntrace_fast_open();
    fn fntrace_fast_exit();
    fn fntrace_fast_caller();
    fn fntrace_fast_caller_mcount();
}

global_asm!(
    r#"
    // This thread's `Thread` (initial-exec TLS: one load through fs).
    .section .tbss,"awT",@nobits
    .p2align 3
    .globl fntrace_tls_thread
    .hidden fntrace_tls_thread
    .type fntrace_tls_thread, @object
    .size fntrace_tls_thread, 8
fntrace_tls_thread:
    .zero 8

    // rcx = this thread's state, \wptr = where its next event goes; to
    // `fail` unless the fast paths may run and the chunk has room (`fend`
    // is 0 while they may not).
    .macro FNTRACE_THREAD fail, wptr
    mov rcx, qword ptr [rip + fntrace_tls_thread@GOTTPOFF]
    mov rcx, qword ptr fs:[rcx]
    test rcx, rcx
    jz \fail
    mov \wptr, [rcx + {wptr}]
    cmp \wptr, [rcx + {fend}]
    jae \fail
    .endm

    // Writes the EXIT event of function \fid (a register holding its id,
    // zero above bit 31; rdx = the delta) at r9, the thread's wptr, and
    // pops the frame; puts the function's return value back into rax and
    // rdx from r8 and rdi.
    .macro FNTRACE_EXIT_EVENT fid
    shl rdx, 27
    lea rax, [\fid * 8 + 1]
    or rdx, rax
    mov [r9], rdx
    add r9, 8
    mov [rcx + {wptr}], r9
    dec qword ptr [rcx + {depth}]
    mov rax, r8
    mov rdx, rdi
    .endm

    // rdx = ticks since the thread's last event (which becomes now); to
    // `fail` if that does not fit an event's delta. Clobbers rax.
    .macro FNTRACE_DELTA fail
    rdtsc
    shl rdx, 32
    or rax, rdx
    mov rdx, rax
    sub rdx, [rcx + {last}]
    cmp rdx, [rip + {max_delta}]
    ja \fail
    mov [rcx + {last}], rax
    .endm

    // The fast entry paths (function_graph: FNTRACE_FAST_ENTRY; function:
    // FNTRACE_FAST_CALLER), one per role: `entry` sites (fentry, patchable
    // entries: the function's return slot is [rsp + 8] on entry) and
    // `mcount` sites (after the prologue `push rbp; mov rbp, rsp`: the
    // slot is [rbp + 8]). `\slot` is that slot's address once `\saved`
    // registers are pushed. r11 is the site slot's data word: the event
    // word of the function.
    //
    // function_graph records the ENTRY event, pushes the frame and hijacks
    // the return, saving only what it uses. Anything unusual (no thread
    // state yet, busy, a chunk full, a frame gone or a tail call, a long
    // delta) goes to the generic routine of the role with the tracer's
    // ops, which handles it in Rust.
    .macro FNTRACE_FAST_ENTRY name, slot, fallback, hijack
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    push rax
    push rdx
    push rcx
    push rsi
    FNTRACE_THREAD 9f, rax
    mov rsi, [rcx + {depth}]
    cmp rsi, {shadow}
    jae 9f
    shl rsi, 6
    add rsi, [rcx + {frames}]
    // The frame below (the sentinel if none) must be an outer call: a slot
    // at or below ours means it is gone (longjmp) or a tail call.
    lea rdx, \slot
    cmp [rsi - 64], rdx
    jbe 9f
    FNTRACE_DELTA 9f
    shl rdx, 27
    lea eax, [r11 * 8]
    or rdx, rax
    mov rax, [rcx + {wptr}]
    mov [rax], rdx
    add rax, 8
    mov [rcx + {wptr}], rax
    lea rax, \slot
    mov [rsi], rax
    mov [rsi + 32], r11
    .if \hijack
    mov rdx, [rax]
    mov [rsi + 8], rdx
    lea rdx, [rip + fntrace_return_to_handler]
    mov [rax], rdx
    .endif
    inc qword ptr [rcx + {depth}]
    pop rsi
    pop rcx
    pop rdx
    pop rax
    ret
9:
    pop rsi
    pop rcx
    pop rdx
    pop rax
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + \fallback]
    .size \name, . - \name
    .endm

    // The `function` tracer: r11 is the ENTRY_CALLER word of the site's
    // function; the event's payload is the caller's address (the
    // function's return address, in its return slot).
    .macro FNTRACE_FAST_CALLER name, slot, fallback
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    push rax
    push rdx
    push rcx
    push rsi
    FNTRACE_THREAD 9f, rsi
    FNTRACE_DELTA 9f
    shl rdx, 27
    or rdx, r11
    mov [rsi], rdx
    mov rdx, \slot
    mov [rsi + 8], rdx
    add rsi, 16
    mov [rcx + {wptr}], rsi
    pop rsi
    pop rcx
    pop rdx
    pop rax
    ret
9:
    pop rsi
    pop rcx
    pop rdx
    pop rax
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + \fallback]
    .size \name, . - \name
    .endm

    FNTRACE_FAST_ENTRY fntrace_fast_entry, "[rsp + 40]", {fallback_entry}, 1
    FNTRACE_FAST_ENTRY fntrace_fast_entry_mcount, "[rbp + 8]", {fallback_mcount}, 1
    // Functions with exit sleds (XRay): the frame is pushed, the return
    // is not hijacked; fntrace_fast_exit closes it.
    FNTRACE_FAST_ENTRY fntrace_fast_open, "[rsp + 40]", {fallback_entry}, 0

    // The fast exit path (function_graph, XRay return sleds, patched as
    // `call slot; ret`): r11 is the slot's data word, the function's frame
    // word (its id, flags 0); [rsp + 8] is the function's return slot. The
    // function is returning: rax and rdx hold its value, rcx, rsi, rdi and
    // r8-r11 are free. Pops the frame and records the EXIT if the top frame
    // is this function's, not hijacked; anything else goes to the generic
    // exit routine.
    .text
    .p2align 4
    .globl fntrace_fast_exit
    .hidden fntrace_fast_exit
    .type fntrace_fast_exit, @function
fntrace_fast_exit:
    FNTRACE_THREAD 9f, r9
    mov rsi, [rcx + {depth}]
    shl rsi, 6
    add rsi, [rcx + {frames}]
    lea rdi, [rsp + 8]
    cmp [rsi - 64], rdi
    jne 9f
    cmp [rsi - 32], r11
    jne 9f
    mov r8, rax
    mov rdi, rdx
    FNTRACE_DELTA 8f
    FNTRACE_EXIT_EVENT r11
    ret
8:
    mov rax, r8
    mov rdx, rdi
9:
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + {fallback_exit}]
    .size fntrace_fast_exit, . - fntrace_fast_exit
    FNTRACE_FAST_CALLER fntrace_fast_caller, "[rsp + 40]", {fallback_entry}
    FNTRACE_FAST_CALLER fntrace_fast_caller_mcount, "[rbp + 8]", {fallback_mcount}

    // The fast return path: a hijacked function returned here; rax and
    // rdx hold its return value (xmm0/xmm1 are not touched), every other
    // caller-saved register is free. Pops the frame, records the EXIT and
    // jumps to the real return address; anything unusual goes to the slow
    // trampoline below.
    .text
    .p2align 4
    .globl fntrace_return_to_handler
    .hidden fntrace_return_to_handler
    .type fntrace_return_to_handler, @function
    nop
fntrace_return_to_handler:
    FNTRACE_THREAD 8f, r9
    mov rsi, [rcx + {depth}]
    shl rsi, 6
    add rsi, [rcx + {frames}]
    // The top frame (the sentinel if none) must be this return's.
    lea rdi, [rsp - 8]
    cmp [rsi - 64], rdi
    jne 8f
    mov r10, [rsi - 56]
    lea r8, [rip + fntrace_return_to_handler]
    cmp r10, r8
    je 8f
    mov r8, rax
    mov rdi, rdx
    FNTRACE_DELTA 7f
    mov eax, dword ptr [rsi - 32]
    FNTRACE_EXIT_EVENT rax
    jmp r10
7:
    mov rax, r8
    mov rdx, rdi
8:
    jmp fntrace_return_slow
    .size fntrace_return_to_handler, . - fntrace_return_to_handler

    .text
    .p2align 4
    .globl fntrace_return_slow
    .hidden fntrace_return_slow
    .type fntrace_return_slow, @function
    nop
fntrace_return_slow:
    // The stack need not be aligned here (the ABI aligns it at calls, not
    // after returns): align it, keeping the old one in rbp.
    push rbp
    mov rbp, rsp
    and rsp, -16
    sub rsp, 96
    mov [rsp], rax
    mov [rsp + 8], rdx
    // ymm only if the CPU has AVX and (where XINUSE can be read) the
    // upper halves are in use: see FNTRACE_SAVE_VECS in routines.rs.
    mov dword ptr [rsp + 80], 0
    cmp byte ptr [rip + {avx}], 0
    je 1f
    mov dword ptr [rsp + 80], 4
    cmp byte ptr [rip + {xinuse}], 0
    je 5f
    mov ecx, 1
    xgetbv
    mov [rsp + 80], eax
5:
    test byte ptr [rsp + 80], 4
    jz 1f
    vmovdqu [rsp + 16], ymm0
    vmovdqu [rsp + 48], ymm1
    jmp 2f
1:
    movdqu [rsp + 16], xmm0
    movdqu [rsp + 48], xmm1
2:
    // The slot the function returned from: just below the stack on entry.
    mov rdi, rbp
    call {ret}
    mov r11, rax
    test byte ptr [rsp + 80], 4
    jz 3f
    vmovdqu ymm0, [rsp + 16]
    vmovdqu ymm1, [rsp + 48]
    jmp 4f
3:
    movdqu xmm0, [rsp + 16]
    movdqu xmm1, [rsp + 48]
4:
    mov rax, [rsp]
    mov rdx, [rsp + 8]
    mov rsp, rbp
    pop rbp
    jmp r11
    .size fntrace_return_slow, . - fntrace_return_slow

"#,
    avx = sym crate::routines::AVX,
    xinuse = sym crate::routines::XINUSE,
    fend = const off::FEND,
    max_delta = sym MAX_DELTA,
    depth = const off::DEPTH,
    frames = const off::FRAMES,
    wptr = const off::WPTR,
    last = const off::LAST,
    shadow = const SHADOW,
    fallback_ops = sym FALLBACK_OPS,
    fallback_entry = sym FALLBACK_ENTRY,
    fallback_mcount = sym FALLBACK_MCOUNT,
    fallback_exit = sym FALLBACK_EXIT,
    ret = sym graph::graph_return,
);
