//! The process around the tracer: threads ending (a key destructor hands
//! their last chunk to the writer), `fork` (the child gets its own
//! directory, its own writer, and keeps its shadow stack), `exec` (the
//! buffers are written first; the new program is traced by its own copy of
//! the runtime), and the flight recorder's signal.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, Once, OnceLock};

use super::session::{self, Session};
use super::thread;
use super::writer::{self, Files};
use crate::state::State;

static KEY: OnceLock<libc::pthread_key_t> = OnceLock::new();

type Guards = (
    MutexGuard<'static, Option<State>>,
    MutexGuard<'static, Option<Session>>,
    MutexGuard<'static, Files>,
);

thread_local! {
    static FORK_GUARDS: RefCell<Option<Guards>> = const { RefCell::new(None) };
}

/// The process the tracer records: set at start and in a forked child. A
/// `vfork` child runs no fork handler: its pid differs from this one
/// while it shares the parent's memory, until it execs or exits.
static PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Whether this is a child that shares the traced process's memory (made
/// by `vfork`, or `clone` with `CLONE_VM`): it must not touch the tracer's
/// state, which is its parent's.
pub(super) fn in_shared_child() -> bool {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() } as u32;
    let traced = PID.load(Ordering::Relaxed);
    traced != 0 && pid != traced
}

/// Sets up the key destructor and the fork handlers (once), and the
/// signal handlers of the process's end (`ending.rs`).
pub fn install(flight: bool, attached: bool) {
    // SAFETY: getpid cannot fail.
    PID.store(unsafe { libc::getpid() } as u32, Ordering::Relaxed);
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: `thread_end` is a plain function that stays loaded.
        if unsafe { libc::pthread_key_create(&mut key, Some(thread_end)) } == 0 {
            let _ = KEY.set(key);
        }
        // SAFETY: the handlers are plain functions that stay loaded.
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    });
    super::ending::install(flight, attached);
}

/// A thread's first traced call: its key makes the destructor run.
pub fn on_thread_start() {
    if let Some(&key) = KEY.get() {
        // SAFETY: a key we created; the value only needs to be non-null.
        unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<c_void>()) };
    }
}

unsafe extern "C" fn thread_end(_: *mut c_void) {
    let t = thread::current_raw();
    if !t.is_null() {
        // SAFETY: this thread's own state, not in use (the thread is
        // ending, outside the tracer): no other `Owner` of it is live.
        let mut t = unsafe { thread::Owner::new(t) };
        super::graph::thread_end(&mut t);
        t.end();
    }
}

extern "C" fn prepare() {
    writer::FORKING.store(true, Ordering::Release);
    let state = crate::api::lock();
    let session = session::lock();
    let files = writer::files();
    FORK_GUARDS.with(|g| *g.borrow_mut() = Some((state, session, files)));
}

extern "C" fn parent() {
    FORK_GUARDS.with(|g| drop(g.borrow_mut().take()));
    writer::FORKING.store(false, Ordering::Release);
}

/// `--no-follow`: the children this process forks record nothing.
static NO_FOLLOW: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says that this process's children are not traced (`--no-follow`).
pub fn no_follow() {
    NO_FOLLOW.store(true, Ordering::Relaxed);
}

extern "C" fn child() {
    let _errno = crate::sys::ErrnoGuard::new();
    crate::no_unwind("fork", || {
        writer::FORKING.store(false, Ordering::Release);
        writer::forget_in_child();
        let Some((state, mut session, mut files)) = FORK_GUARDS.with(|g| g.borrow_mut().take()) else {
            return;
        };
        // SAFETY: getpid cannot fail.
        PID.store(unsafe { libc::getpid() } as u32, Ordering::Relaxed);
        if crate::presence::attached() || NO_FOLLOW.load(Ordering::Relaxed) {
            // A child of a process we attached to (no one can detach it),
            // or under `--no-follow`: it records nothing (its sites stay as
            // they are: every trampoline is in its copy of memory; an
            // `exec` ends that).
            thread::FINISHED.store(true, Ordering::Relaxed);
            for t in thread::all() {
                t.fend.store(0, Ordering::Relaxed);
            }
            return;
        }
        // Only this thread lives on; its buffered events are the parent's.
        thread::keep_only(thread::current_raw());
        let old = session.as_ref().map(|s| (s.root.clone(), s.name.clone()));
        if let Some((root, name)) = old {
            let tracer = super::config().kind.name();
            match session::open(&root, tracer, Some(name), true) {
                Ok(mut s) => {
                    if let Some(state) = state.as_ref() {
                        s.take_modules(state);
                    }
                    writer::reset_in_child(&mut files, s.dir.clone());
                    *session = Some(s);
                }
                Err(e) => {
                    eprintln!("fntrace: the forked child cannot write its trace: {e}");
                    thread::FINISHED.store(true, Ordering::Relaxed);
                }
            }
        }
        drop(files);
        drop(session);
        drop(state);
        writer::start();
    });
}

type ExecFn = unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
type ExecvFn = unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;

fn real(name: &[u8]) -> usize {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const c_char) as usize }
}

/// Writes the buffers before the process image goes away — unless this
/// is a `vfork` child, whose image is its parent's: the parent goes on
/// recording in it, so the child leaves everything as it is.
fn before_exec() {
    let _errno = crate::sys::ErrnoGuard::new();
    crate::no_unwind("exec", || {
        if super::configured().is_some() && !thread::FINISHED.load(Ordering::Relaxed) && !in_shared_child() {
            super::flush_all(true);
        }
    });
}

/// The exec failed: go on tracing.
fn after_failed_exec() {
    let _errno = crate::sys::ErrnoGuard::new();
    if super::configured().is_some() && !in_shared_child() {
        if let Some(s) = session::lock().as_mut() {
            s.restore();
        }
        crate::api::with_state(|state| {
            if let Some(s) = session::lock().as_mut() {
                s.take_modules(state);
            }
            Ok(())
        })
        .ok();
        thread::FINISHED.store(false, Ordering::Release);
        writer::start();
    }
}

macro_rules! exec_wrapper {
    ($name:ident, $ty:ty, ($($arg:ident: $argty:ty),*)) => {
        #[doc = concat!("`", stringify!($name), "`, after writing the trace buffers.")]
        ///
        /// # Safety
        /// As the C library's.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $argty),*) -> c_int {
            let f = real(concat!(stringify!($name), "\0").as_bytes());
            if f == 0 {
                crate::sys::set_errno(libc::ENOSYS);
                return -1;
            }
            before_exec();
            // SAFETY: the C library's function of this type, called as given.
            let r = unsafe { std::mem::transmute::<usize, $ty>(f)($($arg),*) };
            after_failed_exec();
            r
        }
    };
}

exec_wrapper!(execve, ExecFn, (path: *const c_char, argv: *const *const c_char, envp: *const *const c_char));
exec_wrapper!(execvpe, ExecFn, (file: *const c_char, argv: *const *const c_char, envp: *const *const c_char));
exec_wrapper!(execv, ExecvFn, (path: *const c_char, argv: *const *const c_char));
exec_wrapper!(execvp, ExecvFn, (file: *const c_char, argv: *const *const c_char));

/// The variadic `execl*`: which real function, by wrapper index.
const EXECL_NAMES: [&[u8]; 3] = [b"execl\0", b"execle\0", b"execlp\0"];
static EXECL_REAL: [std::sync::atomic::AtomicUsize; 3] =
    [const { std::sync::atomic::AtomicUsize::new(0) }; 3];

/// Writes the buffers and gives the real `execl*` (the wrappers jump to it
/// with the caller's registers and stack: the variadic arguments intact).
extern "C" fn prepare_execl(which: usize, _sp: usize) -> usize {
    before_exec();
    let which = which.min(EXECL_NAMES.len() - 1);
    let mut f = EXECL_REAL[which].load(Ordering::Relaxed);
    if f == 0 {
        f = real(EXECL_NAMES[which]);
        EXECL_REAL[which].store(f, Ordering::Relaxed);
    }
    if f == 0 {
        crate::sys::write_stderr(b"fntrace: the C library's execl is missing; aborting\n");
        std::process::abort();
    }
    f
}

// The `execl*` wrappers: the buffers are written, then the real function
// runs with the variadic arguments intact. If the exec fails, tracing stays
// stopped in this process (the events of its old image are written).
super::unwind::tail_wrapper!(execl, 0, prepare_execl, "the trace buffers are written first.");
super::unwind::tail_wrapper!(execle, 1, prepare_execl, "the trace buffers are written first.");
super::unwind::tail_wrapper!(execlp, 2, prepare_execl, "the trace buffers are written first.");
