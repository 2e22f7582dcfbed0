//! Keeps SIGTRAP the runtime's (design 4.8 of issue 19): a bare site that is
//! on holds `int3` at its interior boundaries, and a thread that meets one
//! must reach our handler. The kernel kills a process whose thread traps
//! with SIGTRAP blocked or ignored, and a handler the program installs
//! would replace ours. So, preloaded, the runtime interposes the program's
//! calls (glibc does the same for its own SIGCANCEL):
//! - `sigaction` and `signal` for SIGTRAP, once our handler is in: the
//!   program's disposition is recorded, not installed; ours hands the traps
//!   that are not ours to it (`trap::chain`), and the program reads back
//!   what it set;
//! - `sigprocmask` and `pthread_sigmask`: SIGTRAP is never blocked (a trap
//!   sent to the program with `kill` then reaches its handler even while it
//!   asked to block it: the price of never dying on a boundary).
//!
//! The runtime's own calls go to the real functions (`real_*`). Attached
//! (the runtime `dlopen`ed), nothing is interposed: a program that blocks
//! SIGTRAP or installs its own handler after the attach can die on a
//! boundary trap (`docs/RUNTIME.md`, "Known limits").

use std::ffi::{c_int, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

type SigactionFn = unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type SigmaskFn = unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;

static REAL_SIGACTION: AtomicUsize = AtomicUsize::new(0);
static REAL_SIGPROCMASK: AtomicUsize = AtomicUsize::new(0);
static REAL_PTHREAD_SIGMASK: AtomicUsize = AtomicUsize::new(0);

/// The next definition of `name` after this library (libc's).
fn next(cache: &AtomicUsize, name: &CStr) -> usize {
    let f = cache.load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name only looks a
    // symbol up.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    cache.store(f, Ordering::Release);
    f
}

/// libc's `sigaction`.
///
/// # Safety
/// As `sigaction(2)`.
pub unsafe fn real_sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    match next(&REAL_SIGACTION, c"sigaction") {
        0 => -1,
        // SAFETY: the address of libc's `sigaction`, of this type; the
        // caller's arguments are as it requires.
        f => unsafe { std::mem::transmute::<usize, SigactionFn>(f)(sig, act, old) },
    }
}

/// libc's `pthread_sigmask`.
///
/// # Safety
/// As `pthread_sigmask(3)`.
pub unsafe fn real_pthread_sigmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    match next(&REAL_PTHREAD_SIGMASK, c"pthread_sigmask") {
        0 => libc::EINVAL,
        // SAFETY: libc's `pthread_sigmask`, of this type.
        f => unsafe { std::mem::transmute::<usize, SigmaskFn>(f)(how, set, old) },
    }
}

/// The program's `sigaction`.
///
/// # Safety
/// As `sigaction(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if sig == libc::SIGTRAP && crate::trap::installed() {
        // SAFETY: the program's pointers, as sigaction(2) takes them.
        unsafe {
            let new = (!act.is_null()).then(|| *act);
            let was = crate::trap::swap_program_disposition(new);
            if !old.is_null() {
                *old = was;
            }
        }
        return 0;
    }
    // SAFETY: forwarded as given.
    unsafe { real_sigaction(sig, act, old) }
}

/// The program's `signal` (glibc's: BSD semantics, `SA_RESTART`).
///
/// # Safety
/// As `signal(2)`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: a zeroed sigaction is a valid empty value, filled in here.
    unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler;
        new.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut new.sa_mask);
        libc::sigaddset(&mut new.sa_mask, sig);
        let mut old: libc::sigaction = std::mem::zeroed();
        if sigaction(sig, &new, &mut old) != 0 {
            return libc::SIG_ERR;
        }
        old.sa_sigaction
    }
}

/// Calls libc's mask function `name` (cached in `cache`; `failed` if it
/// cannot be found) with `set` without SIGTRAP when the program would
/// block it.
///
/// # Safety
/// As `sigprocmask(2)`.
unsafe fn forward_mask(
    cache: &AtomicUsize,
    name: &CStr,
    failed: c_int,
    (how, set, old): (c_int, *const libc::sigset_t, *mut libc::sigset_t),
) -> c_int {
    let mut copy: libc::sigset_t;
    let mut set = set;
    if !set.is_null() && how != libc::SIG_UNBLOCK && crate::trap::installed() {
        // SAFETY: the program's valid sigset_t, copied; a valid signal.
        unsafe {
            copy = *set;
            libc::sigdelset(&mut copy, libc::SIGTRAP);
        }
        set = &copy;
    }
    match next(cache, name) {
        0 => failed,
        // SAFETY: libc's function of this type; forwarded.
        f => unsafe { std::mem::transmute::<usize, SigmaskFn>(f)(how, set, old) },
    }
}

/// The program's `pthread_sigmask`.
///
/// # Safety
/// As `pthread_sigmask(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    // SAFETY: as the caller's.
    unsafe {
        forward_mask(
            &REAL_PTHREAD_SIGMASK,
            c"pthread_sigmask",
            libc::EINVAL,
            (how, set, old),
        )
    }
}

/// The program's `sigprocmask`.
///
/// # Safety
/// As `sigprocmask(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    // SAFETY: as the caller's.
    unsafe { forward_mask(&REAL_SIGPROCMASK, c"sigprocmask", -1, (how, set, old)) }
}
