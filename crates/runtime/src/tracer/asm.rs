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
//! original caller and the original stack.

use std::arch::global_asm;
use std::ffi::c_char;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::graph;

/// Whether to save whole `ymm` registers (read by the trampoline).
static FNTRACE_HAS_AVX: AtomicBool = AtomicBool::new(false);

/// Real functions by wrapper index.
static REAL: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];
const NAMES: [&[u8]; 4] = [
    b"_Unwind_RaiseException\0",
    b"_Unwind_Resume_or_Rethrow\0",
    b"_Unwind_ForcedUnwind\0",
    b"pthread_exit\0",
];

/// Reads the CPU features the trampoline needs.
pub fn setup() {
    FNTRACE_HAS_AVX.store(std::arch::is_x86_feature_detected!("avx"), Ordering::Relaxed);
}

/// The return trampoline.
pub fn return_trampoline() -> usize {
    fntrace_return_to_handler as *const () as usize
}

/// Puts the return addresses back, and gives the real function `which`.
extern "C" fn prepare_unwind(which: usize, sp: usize) -> usize {
    graph::restore_all(sp);
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
}

global_asm!(
    r#"
    .text
    .p2align 4
    .globl fntrace_return_to_handler
    .hidden fntrace_return_to_handler
    .type fntrace_return_to_handler, @function
    nop
fntrace_return_to_handler:
    // The stack need not be aligned here (the ABI aligns it at calls, not
    // after returns): align it, keeping the old one in rbp.
    push rbp
    mov rbp, rsp
    and rsp, -16
    sub rsp, 80
    mov [rsp], rax
    mov [rsp + 8], rdx
    cmp byte ptr [rip + {avx}], 0
    je 1f
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
    cmp byte ptr [rip + {avx}], 0
    je 3f
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
    .size fntrace_return_to_handler, . - fntrace_return_to_handler

"#,
    avx = sym FNTRACE_HAS_AVX,
    ret = sym graph::graph_return,
);

/// A wrapper: keeps the argument registers, restores the return
/// addresses, and jumps to the real function (exported: it interposes).
macro_rules! unwind_wrapper {
    ($name:ident, $index:literal) => {
        #[doc = concat!("Wraps `", stringify!($name), "`: every hijacked return address is put back first.")]
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
                concat!("mov edi, ", $index),
                "lea rsi, [rsp + 40]",
                "sub rsp, 8",
                "call {prepare}",
                "add rsp, 8",
                "pop rcx",
                "pop rdx",
                "pop rsi",
                "pop rdi",
                "jmp rax",
                prepare = sym prepare_unwind,
            )
        }
    };
}

unwind_wrapper!(_Unwind_RaiseException, 0);
unwind_wrapper!(_Unwind_Resume_or_Rethrow, 1);
unwind_wrapper!(_Unwind_ForcedUnwind, 2);
unwind_wrapper!(pthread_exit, 3);
