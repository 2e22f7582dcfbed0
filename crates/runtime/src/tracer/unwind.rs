//! The wrappers of the unwinder's entry points, which put every hijacked
//! return address back before an unwinder reads the stack.
//!
//! `_Unwind_RaiseException`, `_Unwind_Resume_or_Rethrow`,
//! `_Unwind_ForcedUnwind` and `pthread_exit` call `restore_all` with the
//! caller's stack pointer, then jump to the real function (found with
//! `dlsym(RTLD_NEXT)`), so the real one sees the original caller and the
//! original stack. `__cxa_begin_catch` is wrapped the same way: at a
//! catch, the surviving frames are hijacked again.
//!
//! Some walks start where no wrapper sees them: glibc's thread
//! cancellation calls `_Unwind_ForcedUnwind` through a pointer it looked up
//! itself, and `backtrace()` calls `_Unwind_Backtrace` so. Every walk of
//! libgcc's unwinder looks up frame descriptions with `_Unwind_Find_FDE`,
//! through libgcc's own PLT: wrapped too, its first call of a walk puts
//! back every return address still hijacked before the walk reaches it
//! (`restore_for_walk`).

use std::ffi::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::graph;

/// Real functions by wrapper index.
static REAL: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];
const NAMES: [&[u8]; 6] = [
    b"_Unwind_RaiseException\0",
    b"_Unwind_Resume_or_Rethrow\0",
    b"_Unwind_ForcedUnwind\0",
    b"pthread_exit\0",
    b"__cxa_begin_catch\0",
    b"_Unwind_Find_FDE\0",
];
/// The names, as text.
pub fn names() -> [&'static str; 6] {
    NAMES.map(|n| std::str::from_utf8(&n[..n.len() - 1]).expect("ASCII names"))
}

extern "C" {
    fn _Unwind_RaiseException_fntrace();
    fn _Unwind_Resume_or_Rethrow_fntrace();
    fn _Unwind_ForcedUnwind_fntrace();
    fn pthread_exit_fntrace();
    fn __cxa_begin_catch_fntrace();
    fn _Unwind_Find_FDE_fntrace();
}

/// The wrappers, by index: their own addresses (through the hidden
/// aliases; the exported names may resolve to the real functions).
pub fn wrappers() -> [usize; 6] {
    [
        _Unwind_RaiseException_fntrace as *const () as usize,
        _Unwind_Resume_or_Rethrow_fntrace as *const () as usize,
        _Unwind_ForcedUnwind_fntrace as *const () as usize,
        pthread_exit_fntrace as *const () as usize,
        __cxa_begin_catch_fntrace as *const () as usize,
        _Unwind_Find_FDE_fntrace as *const () as usize,
    ]
}

/// Sets the real function of wrapper `which` (hooked through the GOT, the
/// wrappers cannot find it with `RTLD_NEXT`).
pub fn set_real(which: usize, addr: usize) {
    REAL[which].store(addr, Ordering::Relaxed);
}

/// The wrapper index of `__cxa_begin_catch`.
const CATCH: usize = 4;
const FORCED_UNWIND: usize = 2;
const PTHREAD_EXIT: usize = 3;
const FIND_FDE: usize = 5;

/// Puts the return addresses back, and gives the real function `which`.
extern "C" fn prepare_unwind(which: usize, sp: usize) -> usize {
    match which {
        CATCH => graph::catch(sp),
        FIND_FDE => graph::restore_for_walk(),
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

/// The body of a wrapper (see [`tail_wrapper`]): saves the argument
/// registers (and `al`, the vector register count of variadic calls),
/// calls `{prepare}` with the index and the caller's stack pointer,
/// restores them and jumps to the function it returned.
#[cfg(target_arch = "x86_64")]
macro_rules! tail_body {
    ($index:literal) => {
        concat!(
            "push rdi\n push rsi\n push rdx\n push rcx\n push r8\n push r9\n push rax\n",
            "mov edi, ",
            $index,
            "\n",
            "lea rsi, [rsp + 64]\n",
            "call {prepare}\n",
            "mov r11, rax\n",
            "pop rax\n pop r9\n pop r8\n pop rcx\n pop rdx\n pop rsi\n pop rdi\n",
            "jmp r11",
        )
    };
}

/// The body of a wrapper on AArch64: `x0`-`x8` and `q0`-`q7` kept, the
/// real function entered with `br x16` (a `bti c` accepts it).
#[cfg(target_arch = "aarch64")]
macro_rules! tail_body {
    ($index:literal) => {
        concat!(
            "stp x29, x30, [sp, #-224]!\n mov x29, sp\n",
            "stp x0, x1, [sp, #16]\n stp x2, x3, [sp, #32]\n stp x4, x5, [sp, #48]\n",
            "stp x6, x7, [sp, #64]\n str x8, [sp, #80]\n",
            "stp q0, q1, [sp, #96]\n stp q2, q3, [sp, #128]\n",
            "stp q4, q5, [sp, #160]\n stp q6, q7, [sp, #192]\n",
            "mov x0, #",
            $index,
            "\n",
            "add x1, sp, #224\n",
            "bl {prepare}\n",
            "mov x16, x0\n",
            "ldp q0, q1, [sp, #96]\n ldp q2, q3, [sp, #128]\n",
            "ldp q4, q5, [sp, #160]\n ldp q6, q7, [sp, #192]\n",
            "ldp x0, x1, [sp, #16]\n ldp x2, x3, [sp, #32]\n ldp x4, x5, [sp, #48]\n",
            "ldp x6, x7, [sp, #64]\n ldr x8, [sp, #80]\n",
            "ldp x29, x30, [sp], #224\n",
            "br x16",
        )
    };
}

/// A wrapper that runs `$prepare(index, caller's sp)` and then jumps to the
/// function it returns, with every argument register as the caller left
/// it and the caller's stack untouched: the real function sees the
/// original call. Exported: it interposes the C library's or the
/// unwinder's symbol.
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
                // A hidden alias: the address of this wrapper, which the
                // exported name does not give in a process where another
                // module defines the same name first (`gothook.rs`).
                concat!(".globl ", stringify!($name), "_fntrace"),
                concat!(".hidden ", stringify!($name), "_fntrace"),
                concat!(stringify!($name), "_fntrace:"),
                $crate::tracer::unwind::tail_body!($index),
                prepare = sym $prepare,
            )
        }
    };
}
pub(crate) use tail_body;
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
tail_wrapper!(
    _Unwind_Find_FDE,
    5,
    prepare_unwind,
    "a walk of the stack that no other wrapper saw begin finds every return address put back."
);
