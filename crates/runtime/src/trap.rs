//! The SIGTRAP handler of live patching (the kernel's `poke_int3_handler`):
//! a thread that executes the `int3` written on a site mid-patch behaves as
//! if the site's new instruction were already there.

use std::io;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

use fntrace_arch::x86_64::INT3;
use fntrace_arch::Resume;

/// The sites of the batch in progress, sorted by address.
#[derive(Debug, Default)]
pub struct Table {
    /// (site address, what to do there).
    pub entries: Vec<(usize, Resume)>,
}

static TABLE: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());
/// Handlers running now: a table is freed only when none is.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Threads steered past a site mid-patch, since start.
pub static STEERED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The disposition of SIGTRAP before ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// `si_code` of a trap raised by the kernel for `int3`.
const SI_KERNEL: i32 = 0x80;

/// Installs the handler (once).
pub fn install() -> io::Result<()> {
    if PREVIOUS.get().is_some() {
        return Ok(());
    }
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value,
    // filled in before use; sigaction reads `new` and writes `old`.
    let old = unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut new.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTRAP, &new, &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        old
    };
    let _ = PREVIOUS.set(old);
    Ok(())
}

/// Publishes the table of a batch before its first `int3` is written, and
/// returns once no handler that read the table before it (or read that
/// there was none) is still running: those could otherwise meet the new
/// batch's `int3` without its table. A previous table is freed then.
pub fn publish(table: Table) {
    let new = Box::into_raw(Box::new(table));
    let old = TABLE.swap(new, Ordering::SeqCst);
    drop(take_back(old));
}

/// Withdraws the table once its batch is done — no site of it holds an
/// `int3` any more, so a handler that runs late finds the new byte and
/// re-executes the site without the table (the kernel clears `bp_desc` the
/// same way) — and gives it back once no handler can be reading it: its
/// memory serves the next batch.
pub fn withdraw() -> Option<Table> {
    take_back(TABLE.swap(std::ptr::null_mut(), Ordering::SeqCst))
}

fn take_back(old: *mut Table) -> Option<Table> {
    // Wait even when there was no table: a handler that loaded "no table"
    // before the swap must be done before the new batch writes its first
    // `int3`, or it would read that `int3`, find no table holding it and
    // hand the trap to the program's disposition (the default kills).
    while ACTIVE.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    if old.is_null() {
        return None;
    }
    // SAFETY: `old` came from Box::into_raw in `publish`, is no longer
    // reachable through TABLE, and no handler is running that loaded it.
    Some(*unsafe { Box::from_raw(old) })
}

extern "C" fn handler(sig: i32, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo and ucontext to an
    // SA_SIGINFO handler.
    let (code, uc) = unsafe { ((*info).si_code, &mut *(context as *mut libc::ucontext_t)) };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    let addr = rip.wrapping_sub(1);
    if code == SI_KERNEL && steer(uc, addr) {
        return;
    }
    chain(sig, info, context);
}

/// Steers the thread if the trap at `addr` is (or was) one of ours.
fn steer(uc: &mut libc::ucontext_t, addr: usize) -> bool {
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    let table = TABLE.load(Ordering::SeqCst);
    let resume = if table.is_null() {
        None
    } else {
        // SAFETY: a published table stays valid while ACTIVE counts us.
        let entries = unsafe { &(*table).entries };
        entries
            .binary_search_by_key(&addr, |e| e.0)
            .ok()
            .map(|i| entries[i].1)
    };
    // SAFETY: the thread just executed an `int3` at `addr`: it is mapped,
    // readable code.
    let byte = unsafe { std::ptr::read_volatile(addr as *const u8) };
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
    let gregs = &mut uc.uc_mcontext.gregs;
    if byte != INT3 {
        // The int3 is gone: a batch finished after the trap. Run what is
        // there now.
        STEERED.fetch_add(1, Ordering::Relaxed);
        gregs[libc::REG_RIP as usize] = addr as i64;
        return true;
    }
    let Some(resume) = resume else { return false };
    STEERED.fetch_add(1, Ordering::Relaxed);
    let rsp = gregs[libc::REG_RSP as usize] as usize;
    match resume {
        Resume::At(next) => gregs[libc::REG_RIP as usize] = next as i64,
        Resume::Call { target, ret } => {
            let sp = rsp - 8;
            // SAFETY: a call pushes onto the thread's stack; the kernel put
            // the signal frame below the red zone, so `sp` is free.
            unsafe { std::ptr::write(sp as *mut u64, ret) };
            gregs[libc::REG_RSP as usize] = sp as i64;
            gregs[libc::REG_RIP as usize] = target as i64;
        }
        Resume::Return => {
            // SAFETY: the site is a function's `ret`: the return address is
            // on top of the thread's stack.
            let to = unsafe { std::ptr::read(rsp as *const u64) };
            gregs[libc::REG_RSP as usize] = (rsp + 8) as i64;
            gregs[libc::REG_RIP as usize] = to as i64;
        }
    }
    true
}

/// Hands a trap that is not ours to the disposition that was there before.
fn chain(sig: i32, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let Some(previous) = PREVIOUS.get() else { return };
    match previous.sa_sigaction {
        libc::SIG_IGN => {}
        libc::SIG_DFL => {
            // SAFETY: restoring the default disposition and re-raising gives
            // the death the program would have had without us.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
        }
        f if previous.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the program installed this three-argument handler.
            let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(f) };
            f(sig, info, context);
        }
        f => {
            // SAFETY: the program installed this one-argument handler.
            let f: extern "C" fn(i32) = unsafe { std::mem::transmute(f) };
            f(sig);
        }
    }
}
