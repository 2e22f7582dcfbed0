//! The SIGTRAP handler of live patching (the kernel's `poke_int3_handler`):
//! a thread that executes the `int3` written on a site mid-patch behaves as
//! if the site's new instruction were already there.

// On AArch64 no site ever holds a breakpoint (one word is written at a
// time): the handler is x86-64's, and the tables stay empty there.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

#[cfg(target_arch = "x86_64")]
use std::io;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

#[cfg(target_arch = "x86_64")]
use fntrace_arch::x86_64::INT3;
use fntrace_arch::Resume;

/// The sites of the batch in progress, sorted by address.
#[derive(Debug, Default)]
pub struct Table {
    /// (site address, what to do there).
    pub entries: Vec<(usize, Resume)>,
}

static TABLE: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());
/// The standing table: where a thread that traps at an original
/// instruction boundary inside a bare site's jump continues (in its
/// detour's copy), and where a trap site's `int3` sends it — whatever
/// batch runs or not (`bare.rs`).
static STANDING: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());
/// Handlers running now: a table is freed only when none is.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Threads steered past a site mid-patch, since start.
pub static STEERED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The program's disposition of SIGTRAP: the one before ours, then what
/// the program sets (`sigguard.rs`); leaked boxes, never freed (a handler
/// may be reading one), one per change.
static PROGRAM: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
/// Our handler is installed.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether our SIGTRAP handler is installed.
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

/// Records `new` (if any) as the program's disposition of SIGTRAP, which
/// traps that are not ours are handed to; returns the one before.
pub fn swap_program_disposition(new: Option<libc::sigaction>) -> libc::sigaction {
    let old = PROGRAM.load(Ordering::Acquire);
    if let Some(new) = new {
        PROGRAM.store(Box::into_raw(Box::new(new)), Ordering::Release);
    }
    // SAFETY: a leaked box set by `install` before INSTALLED, never freed;
    // a zeroed sigaction (SIG_DFL) if there is none.
    unsafe { old.as_ref().copied().unwrap_or_else(|| std::mem::zeroed()) }
}

/// `si_code` of a trap raised by the kernel for `int3`.
const SI_KERNEL: i32 = 0x80;
/// `si_code` of a breakpoint trap (`TRAP_BRKPT`): what valgrind gives for
/// `int3`, where the kernel gives `SI_KERNEL` — so that a program traced
/// under valgrind (the benchmarks count instructions so) keeps working.
const TRAP_BRKPT: i32 = 1;

/// Installs the handler (once).
#[cfg(target_arch = "x86_64")]
pub fn install() -> io::Result<()> {
    if installed() {
        return Ok(());
    }
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value,
    // filled in before use; sigaction reads `new` and writes `old`.
    let old = unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        // Every signal blocked while the handler runs (a few dozen
        // instructions): another handler run on top of it could leave its
        // frame by a jump or a changed context — never returning, so
        // SIGTRAP would stay blocked in that thread, whose next `int3` the
        // kernel then makes fatal, and the handler's count of readers would
        // never fall, so the next batch would wait for it forever. The
        // program's own SIGTRAP handler, if we pass a trap on, gets the mask
        // it asked for (`chain`).
        libc::sigfillset(&mut new.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if crate::sigguard::real_sigaction(libc::SIGTRAP, &new, &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        old
    };
    PROGRAM.store(Box::into_raw(Box::new(old)), Ordering::Release);
    INSTALLED.store(true, Ordering::Release);
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

/// Replaces the standing table (published before the batch that writes the
/// first `int3` it is for; withdrawn entries are for modules gone) and
/// frees the old one once no handler can be reading it.
pub fn publish_standing(table: Table) {
    let new = Box::into_raw(Box::new(table));
    drop(take_back(STANDING.swap(new, Ordering::SeqCst)));
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

#[cfg(target_arch = "x86_64")]
extern "C" fn handler(sig: i32, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo and ucontext to an
    // SA_SIGINFO handler.
    let (code, uc) = unsafe { ((*info).si_code, &mut *(context as *mut libc::ucontext_t)) };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    let addr = rip.wrapping_sub(1);
    if (code == SI_KERNEL || code == TRAP_BRKPT) && steer(uc, addr) {
        return;
    }
    chain(sig, info, context);
}

/// Steers the thread if the trap at `addr` is (or was) one of ours.
#[cfg(target_arch = "x86_64")]
fn steer(uc: &mut libc::ucontext_t, addr: usize) -> bool {
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    // The batch's table first: a site it switches is steered to its new
    // form; then the standing entries.
    let resume = find(&TABLE, addr).or_else(|| find(&STANDING, addr));
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

/// The entry for `addr` in `table`, if any. The caller counts itself in
/// `ACTIVE`.
fn find(table: &AtomicPtr<Table>, addr: usize) -> Option<Resume> {
    let table = table.load(Ordering::SeqCst);
    if table.is_null() {
        return None;
    }
    // SAFETY: a published table stays valid while ACTIVE counts us.
    let entries = unsafe { &(*table).entries };
    entries
        .binary_search_by_key(&addr, |e| e.0)
        .ok()
        .map(|i| entries[i].1)
}

/// Hands a trap that is not ours to the disposition that was there before.
fn chain(sig: i32, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: a leaked box, never freed (`swap_program_disposition`).
    let Some(previous) = (unsafe { PROGRAM.load(Ordering::Acquire).as_ref() }) else {
        return;
    };
    chain_to(previous, sig, info, context);
}

/// Hands the signal to the disposition `previous`, as the kernel would have.
fn chain_to(previous: &libc::sigaction, sig: i32, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    if !matches!(previous.sa_sigaction, libc::SIG_IGN | libc::SIG_DFL) {
        // The program's handler runs with the mask the kernel would have
        // given it (ours blocks every signal): the interrupted code's, its
        // own `sa_mask`, and the signal itself unless `SA_NODEFER`.
        // SAFETY: `context` is the kernel's ucontext for this signal; the
        // set is built from valid sigset_t values before it is installed.
        unsafe {
            let uc = &*(context as *const libc::ucontext_t);
            let mut mask = uc.uc_sigmask;
            for s in 1..=libc::SIGRTMAX() {
                if libc::sigismember(&previous.sa_mask, s) == 1 {
                    libc::sigaddset(&mut mask, s);
                }
            }
            if previous.sa_flags & libc::SA_NODEFER == 0 {
                libc::sigaddset(&mut mask, sig);
            }
            crate::sigguard::real_pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
        }
    }
    match previous.sa_sigaction {
        libc::SIG_IGN => {}
        libc::SIG_DFL => {
            // SAFETY: restoring the default disposition and re-raising gives
            // the death the program would have had without us.
            unsafe {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                crate::sigguard::real_sigaction(sig, &default, std::ptr::null_mut());
                INSTALLED.store(false, Ordering::Release);
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI32, Ordering};

    use super::chain_to;

    /// What the program's handler found blocked: a bit per signal.
    static SEEN: AtomicI32 = AtomicI32::new(0);

    fn blocked(signals: &[i32]) -> i32 {
        // SAFETY: queries this thread's mask into a local sigset_t.
        let mask = unsafe {
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut mask);
            mask
        };
        signals.iter().enumerate().fold(0, |bits, (i, &s)| {
            // SAFETY: a valid sigset_t and signal number.
            bits | (i32::from(unsafe { libc::sigismember(&mask, s) } == 1) << i)
        })
    }

    const WATCHED: [i32; 4] = [libc::SIGTRAP, libc::SIGUSR2, libc::SIGWINCH, libc::SIGUSR1];

    extern "C" fn program_handler(_: i32, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
        SEEN.store(blocked(&WATCHED), Ordering::SeqCst);
    }

    /// The runtime's own threads keep SIGTRAP open (`sys::spawn_quiet`):
    /// one that runs a library function while a batch switches it meets
    /// an `int3`, which with SIGTRAP blocked would kill the process (an
    /// attach's writer thread calling `write` while the detach restores
    /// it did). Every other signal stays with the program's threads.
    #[test]
    fn runtime_threads_keep_sigtrap_open() {
        let (tx, rx) = std::sync::mpsc::channel();
        crate::sys::spawn_quiet("fntrace-test", move || {
            tx.send(blocked(&WATCHED)).unwrap();
        })
        .unwrap();
        // SIGTRAP open; SIGUSR2, SIGWINCH and SIGUSR1 blocked.
        assert_eq!(rx.recv().unwrap(), 0b1110);
    }

    /// A trap passed on to the program's own SIGTRAP handler runs it with
    /// the mask the kernel would have given it — the interrupted code's
    /// (SIGWINCH here), its `sa_mask` (SIGUSR2), SIGTRAP itself — not with
    /// ours, which blocks every signal.
    #[test]
    fn a_trap_passed_on_gets_the_programs_mask() {
        // SAFETY: zeroed sigaction/siginfo/ucontext are valid plain data,
        // filled in here; the masks are this thread's, put back at the end.
        unsafe {
            let mut previous: libc::sigaction = std::mem::zeroed();
            previous.sa_sigaction = program_handler as *const () as usize;
            previous.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut previous.sa_mask);
            libc::sigaddset(&mut previous.sa_mask, libc::SIGUSR2);
            let mut uc: libc::ucontext_t = std::mem::zeroed();
            libc::sigemptyset(&mut uc.uc_sigmask);
            libc::sigaddset(&mut uc.uc_sigmask, libc::SIGWINCH);
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let (mut all, mut saved): (libc::sigset_t, libc::sigset_t) =
                (std::mem::zeroed(), std::mem::zeroed());
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut saved);
            let context = &mut uc as *mut libc::ucontext_t as *mut libc::c_void;
            chain_to(&previous, libc::SIGTRAP, &mut info, context);
            libc::pthread_sigmask(libc::SIG_SETMASK, &saved, std::ptr::null_mut());
        }
        // SIGTRAP, SIGUSR2 and SIGWINCH blocked; SIGUSR1 not.
        assert_eq!(SEEN.load(Ordering::SeqCst), 0b0111);
    }
}
