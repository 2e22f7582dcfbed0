//! How a traced process ends, and what it keeps: every way out writes the
//! buffers first, then ends as the program would have.
//!
//! - `exit` (and a return from `main`): the `atexit` handler (`mod.rs`).
//! - A terminating signal the program leaves at its default (`SIGINT`,
//!   `SIGTERM`, `SIGHUP`, `SIGQUIT`: Ctrl-C, `kill`): the writer makes the
//!   final flush, then the signal's default action ends the process.
//! - A fatal signal the program leaves at its default (`SIGSEGV`, `SIGBUS`,
//!   `SIGFPE`, `SIGILL`, `SIGABRT` — `abort()` —, `SIGSYS`): the same, then
//!   the default action; a fault happens again where it happened (the core
//!   dump is the program's), a sent signal is raised again.
//! - `_exit` and `_Exit` (a forked child's usual end): wrapped, the buffers
//!   written first — unless the caller is a `vfork` child, whose memory is
//!   its parent's.
//!
//! A process we attached to keeps its dispositions (`attached`). The flight
//! recorder's signal (`SIGUSR2`) asks the writer for a dump, where the
//! program has no SIGUSR2 handler of its own.

use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use super::{process, writer};

/// The signal that makes the flight recorder write its buffers.
pub const FLIGHT_SIGNAL: c_int = libc::SIGUSR2;

/// Terminating signals whose default the tracer takes over.
const TERMINATING: [c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];
/// Fatal signals whose default the tracer takes over.
const FATAL: [c_int; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
    libc::SIGSYS,
];

/// The dispositions the tracer installed, with those they replaced.
static INSTALLED: Mutex<Vec<(c_int, usize, libc::sigaction)>> = Mutex::new(Vec::new());

/// Installs the handlers: the terminating and fatal signals' (where the
/// program left them at their default, and unless `attached`), and the
/// flight recorder's.
pub fn install(flight: bool, attached: bool) {
    if !attached {
        for sig in TERMINATING {
            set_handler(sig, on_terminate as *const () as usize, 0, true);
        }
        for sig in FATAL {
            // SA_NODEFER is not set: a second fault in the handler waits,
            // and dies by the default action once the handler reset it.
            set_handler(sig, on_fatal as *const () as usize, libc::SA_SIGINFO, true);
        }
    }
    if flight {
        // Only where the program left SIGUSR2 at its default: a program
        // with its own handler keeps it (it would otherwise stop running
        // once attached, and each of its signals would dump), and its
        // flight recorder is written at exit only.
        set_handler(
            FLIGHT_SIGNAL,
            on_flight_signal as *const () as usize,
            libc::SA_RESTART,
            true,
        );
    }
}

/// Installs `handler` for `sig` (only where the disposition is the default,
/// if `only_default`) and remembers what it replaced.
fn set_handler(sig: c_int, handler: usize, flags: c_int, only_default: bool) {
    // SAFETY: a query of the disposition, then a zeroed sigaction (a valid
    // "empty mask" value) with a handler that stays loaded.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
            || (only_default && old.sa_sigaction != libc::SIG_DFL)
            || old.sa_sigaction == handler
        {
            return;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = flags;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(sig, &sa, std::ptr::null_mut()) == 0 {
            INSTALLED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((sig, handler, old));
        }
    }
}

/// Puts back the dispositions `install` replaced, where ours is still in
/// place (the program may have set its own since).
pub fn uninstall() {
    for (sig, handler, old) in INSTALLED.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        // SAFETY: a query, then the saved disposition put back as it was.
        unsafe {
            let mut now: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut now) == 0 && now.sa_sigaction == handler {
                libc::sigaction(sig, &old, std::ptr::null_mut());
            }
        }
    }
}

/// Has the writer make the final flush, and waits for it up to 2 s
/// (async-signal-safe: atomics and nanosleep).
fn final_flush() {
    if !writer::request_final() {
        return;
    }
    for _ in 0..400 {
        if writer::final_done() {
            break;
        }
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 5_000_000,
        };
        // SAFETY: a valid timespec; no remainder wanted.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }
}

extern "C" fn on_terminate(sig: c_int) {
    let _errno = crate::sys::ErrnoGuard::new();
    final_flush();
    // SAFETY: back to the default disposition; the signal, blocked while
    // this handler runs, is delivered when it returns.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

extern "C" fn on_fatal(sig: c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let _errno = crate::sys::ErrnoGuard::new();
    final_flush();
    // SAFETY: `info` is the kernel's siginfo for this signal; then back to
    // the default disposition.
    unsafe {
        let sent = info.is_null() || (*info).si_code <= 0;
        libc::signal(sig, libc::SIG_DFL);
        // A fault happens again at the instruction that faulted, now with
        // the default action; a signal some process sent (or abort's
        // raise) is raised again.
        if sent || sig == libc::SIGABRT {
            libc::raise(sig);
        }
    }
}

extern "C" fn on_flight_signal(_: c_int) {
    writer::DUMP.store(true, Ordering::Relaxed);
}

/// Writes the buffers before `_exit`, unless this is a `vfork` child.
fn before_exit() {
    let _errno = crate::sys::ErrnoGuard::new();
    crate::no_unwind("_exit", || {
        if super::configured().is_some()
            && !super::thread::FINISHED.load(Ordering::Relaxed)
            && !process::in_shared_child()
        {
            super::flush_all(true);
        }
    });
}

type ExitFn = unsafe extern "C" fn(c_int) -> !;

fn real_exit(name: &[u8]) -> Option<ExitFn> {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name; the symbol,
    // if found, is the C library's function of this type.
    unsafe {
        let f = libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const std::ffi::c_char);
        (!f.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, ExitFn>(f))
    }
}

macro_rules! exit_wrapper {
    ($name:ident) => {
        #[doc = concat!("`", stringify!($name), "`, after writing the trace buffers.")]
        ///
        /// # Safety
        /// As the C library's.
        #[no_mangle]
        pub unsafe extern "C" fn $name(status: c_int) -> ! {
            before_exit();
            match real_exit(concat!(stringify!($name), "\0").as_bytes()) {
                // SAFETY: the C library's function, called as given.
                Some(f) => unsafe { f(status) },
                // SAFETY: the exit_group system call ends the process.
                None => unsafe {
                    libc::syscall(libc::SYS_exit_group, status);
                    std::process::abort()
                },
            }
        }
    };
}

exit_wrapper!(_exit);
exit_wrapper!(_Exit);
