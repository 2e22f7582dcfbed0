//! The tracer's assembly: the return trampoline a hijacked function returns
//! into, and the wrappers of the unwinder's entry points that put every
//! hijacked return address back before an unwinder reads the stack.
//!
//! The return trampoline keeps the return registers (`rax`, `rdx`, `xmm0`,
//! `xmm1` — whole `ymm0`/`ymm1` where the CPU has AVX) and asks
//! `graph_return` where to go; it leaves by `jmp`, so no frame of ours stays
//! on the stack.
//!
//! The unwinder wrappers (`_Unwind_RaiseException`,
//! `_Unwind_Resume_or_Rethrow`, `_Unwind_ForcedUnwind`, `pthread_exit`)
//! call `restore_all` with the caller's stack pointer, then jump to the
//! real function (found with `dlsym(RTLD_NEXT)`), so the real one sees the
//! original caller and the original stack. `__cxa_begin_catch` is wrapped
//! the same way: at a catch, the surviving frames are hijacked again.

use std::arch::global_asm;
use std::ffi::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::graph;
use super::thread::{off, SHADOW};

/// Real functions by wrapper index.
static REAL: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];
const NAMES: [&[u8]; 5] = [
    b"_Unwind_RaiseException\0",
    b"_Unwind_Resume_or_Rethrow\0",
    b"_Unwind_ForcedUnwind\0",
    b"pthread_exit\0",
    b"__cxa_begin_catch\0",
];
/// The wrapper index of `__cxa_begin_catch`.
const CATCH: usize = 4;
const FORCED_UNWIND: usize = 2;
const PTHREAD_EXIT: usize = 3;

/// The return trampoline (the address written into hijacked slots).
pub fn return_trampoline() -> usize {
    fntrace_return_to_handler as *const () as usize
}

/// The fast entry routine (per-site slots).
pub fn fast_entry() -> usize {
    fntrace_fast_entry as *const () as usize
}

/// The fast entry routine of the `function` tracer (per-site slots).
pub fn fast_caller() -> usize {
    fntrace_fast_caller as *const () as usize
}

/// Where the fast entry path goes when it cannot record: the tracer's ops
/// and the generic entry routine.
static FALLBACK_OPS: AtomicUsize = AtomicUsize::new(0);
static FALLBACK_ROUTINE: AtomicUsize = AtomicUsize::new(0);

/// Sets the fast entry path's fallback.
pub fn set_fallback(ops: usize, routine: usize) {
    FALLBACK_OPS.store(ops, Ordering::Relaxed);
    FALLBACK_ROUTINE.store(routine, Ordering::Release);
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

/// Puts the return addresses back, and gives the real function `which`.
extern "C" fn prepare_unwind(which: usize, sp: usize) -> usize {
    match which {
        CATCH => graph::catch(sp),
        FORCED_UNWIND | PTHREAD_EXIT => graph::restore_all(sp, true),
        _ => graph::restore_all(sp, false),
    }
    let which = which.min(NAMES.len() - 1);
    let mut real = REAL[which].load(Ordering::Relaxed);
    if real == 0 {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
        real = unsafe { libc::dlsym(libc::RTLD_NEXT, NAMES[which].as_ptr() as *const c_char) as usize };
        REAL[which].store(real, Ordering::Relaxed);
    }
    if real == 0 {
        crate::sys::write_stderr(b"fntrace: the unwinder's real entry point is missing; aborting\n");
        std::process::abort();
    }
    real
}

extern "C" {
    fn fntrace_return_to_handler();
    fn fntrace_fast_entry();
    fn fntrace_fast_caller();
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

    // rcx = this thread's state; to `fail` unless the fast paths may run.
    .macro FNTRACE_THREAD fail
    mov rcx, qword ptr [rip + fntrace_tls_thread@GOTTPOFF]
    mov rcx, qword ptr fs:[rcx]
    test rcx, rcx
    jz \fail
    cmp byte ptr [rcx + {fast}], 1
    jne \fail
    .endm

    // The fast entry path (function_graph, entry sites): r11 is the site
    // slot's data word, the ENTRY event word of the function; [rsp] the
    // return into the function, [rsp + 8] the function's return address.
    // Records the event, pushes the frame and hijacks the return, saving
    // only what it uses. Anything unusual (no thread state yet, busy, a
    // chunk full, a frame gone or a tail call, a long delta) goes to the
    // generic routine with the tracer's ops, which handles it in Rust.
    .text
    .p2align 4
    .globl fntrace_fast_entry
    .hidden fntrace_fast_entry
    .type fntrace_fast_entry, @function
fntrace_fast_entry:
    push rax
    push rdx
    push rcx
    push rsi
    FNTRACE_THREAD 9f
    mov rsi, [rcx + {depth}]
    cmp rsi, {shadow}
    jae 9f
    shl rsi, 6
    add rsi, [rcx + {frames}]
    cmp rsi, [rcx + {frames}]
    je 1f
    lea rax, [rsp + 40]
    cmp [rsi - 64], rax
    jbe 9f
1:
    mov rax, [rcx + {wptr}]
    cmp rax, [rcx + {wend}]
    jae 9f
    rdtsc
    shl rdx, 32
    or rax, rdx
    mov [rsi + 16], rax
    mov rdx, rax
    sub rdx, [rcx + {last}]
    mov rax, rdx
    shr rax, 37
    jnz 9f
    mov rax, [rsi + 16]
    mov [rcx + {last}], rax
    shl rdx, 27
    or rdx, r11
    mov rax, [rcx + {wptr}]
    mov [rax], rdx
    add rax, 8
    mov [rcx + {wptr}], rax
    lea rax, [rsp + 40]
    mov [rsi], rax
    mov rdx, [rax]
    mov [rsi + 8], rdx
    mov rdx, r11
    shr rdx, 3
    bts rdx, 32
    mov [rsi + 32], rdx
    lea rdx, [rip + fntrace_return_to_handler]
    mov [rax], rdx
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
    jmp qword ptr [rip + {fallback_routine}]
    .size fntrace_fast_entry, . - fntrace_fast_entry

    // The fast path of the `function` tracer: r11 is the ENTRY_CALLER
    // word of the site's function; the event's payload is the caller's
    // address (the function's return address, [rsp + 8] on entry).
    .text
    .p2align 4
    .globl fntrace_fast_caller
    .hidden fntrace_fast_caller
    .type fntrace_fast_caller, @function
fntrace_fast_caller:
    push rax
    push rdx
    push rcx
    push rsi
    push rdi
    FNTRACE_THREAD 9f
    mov rsi, [rcx + {wptr}]
    cmp rsi, [rcx + {wend}]
    jae 9f
    rdtsc
    shl rdx, 32
    or rax, rdx
    mov rdx, rax
    sub rdx, [rcx + {last}]
    mov rdi, rdx
    shr rdi, 37
    jnz 9f
    mov [rcx + {last}], rax
    shl rdx, 27
    or rdx, r11
    mov [rsi], rdx
    mov rdx, [rsp + 48]
    mov [rsi + 8], rdx
    add rsi, 16
    mov [rcx + {wptr}], rsi
    pop rdi
    pop rsi
    pop rcx
    pop rdx
    pop rax
    ret
9:
    pop rdi
    pop rsi
    pop rcx
    pop rdx
    pop rax
    mov r11, [rip + {fallback_ops}]
    jmp qword ptr [rip + {fallback_routine}]
    .size fntrace_fast_caller, . - fntrace_fast_caller

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
    FNTRACE_THREAD 8f
    mov rsi, [rcx + {depth}]
    test rsi, rsi
    jz 8f
    shl rsi, 6
    add rsi, [rcx + {frames}]
    sub rsi, 64
    lea rdi, [rsp - 8]
    cmp [rsi], rdi
    jne 8f
    mov r10, [rsi + 8]
    lea r8, [rip + fntrace_return_to_handler]
    cmp r10, r8
    je 8f
    mov r9, [rcx + {wptr}]
    cmp r9, [rcx + {wend}]
    jae 8f
    mov r8, rax
    mov rdi, rdx
    rdtsc
    shl rdx, 32
    or rax, rdx
    mov rdx, rax
    sub rdx, [rcx + {last}]
    mov r11, rdx
    shr r11, 37
    jnz 7f
    mov [rcx + {last}], rax
    shl rdx, 27
    mov eax, dword ptr [rsi + 32]
    shl rax, 3
    or rax, 1
    or rdx, rax
    mov [r9], rdx
    add r9, 8
    mov [rcx + {wptr}], r9
    dec qword ptr [rcx + {depth}]
    mov rax, r8
    mov rdx, rdi
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
    fast = const off::FAST,
    depth = const off::DEPTH,
    frames = const off::FRAMES,
    wptr = const off::WPTR,
    wend = const off::WEND,
    last = const off::LAST,
    shadow = const SHADOW,
    fallback_ops = sym FALLBACK_OPS,
    fallback_routine = sym FALLBACK_ROUTINE,
    ret = sym graph::graph_return,
);

/// A wrapper that runs `$prepare(index, caller's sp)` and then jumps to the
/// function it returns, with every argument register as the caller left
/// it (and `al`, the vector register count of variadic calls) and the
/// caller's stack untouched: the real function sees the original call.
/// Exported: it interposes the C library's or the unwinder's symbol.
macro_rules! tail_wrapper {
    ($name:ident, $index:literal, $prepare:path, $doc:literal) => {
        #[doc = concat!("Wraps `", stringify!($name), "`: ", $doc)]
        ///
        /// # Safety
        /// As the real function's.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name() {
            std::arch::naked_asm!(
                "push rdi",
                "push rsi",
                "push rdx",
                "push rcx",
                "push r8",
                "push r9",
                "push rax",
                concat!("mov edi, ", $index),
                "lea rsi, [rsp + 64]",
                "call {prepare}",
                "mov r11, rax",
                "pop rax",
                "pop r9",
                "pop r8",
                "pop rcx",
                "pop rdx",
                "pop rsi",
                "pop rdi",
                "jmp r11",
                prepare = sym $prepare,
            )
        }
    };
}
pub(crate) use tail_wrapper;

tail_wrapper!(
    _Unwind_RaiseException,
    0,
    prepare_unwind,
    "every hijacked return address is put back first."
);
tail_wrapper!(
    _Unwind_Resume_or_Rethrow,
    1,
    prepare_unwind,
    "every hijacked return address is put back first."
);
tail_wrapper!(
    _Unwind_ForcedUnwind,
    2,
    prepare_unwind,
    "every hijacked return address is put back first."
);
tail_wrapper!(
    pthread_exit,
    3,
    prepare_unwind,
    "every hijacked return address is put back first."
);
tail_wrapper!(
    __cxa_begin_catch,
    4,
    prepare_unwind,
    "the frames surviving the catch are hijacked again."
);
