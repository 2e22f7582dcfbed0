//! Thin wrappers over the system calls the runtime needs. Each `unsafe`
//! block is a single call whose arguments are checked here.

use std::io;

/// The page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as usize
    } else {
        4096
    }
}

/// Rounds `[start, end)` out to whole pages.
pub fn page_range(start: usize, end: usize) -> (usize, usize) {
    let page = page_size();
    (start & !(page - 1), (end + page - 1) & !(page - 1))
}

/// `mprotect` over whole pages.
pub fn protect(start: usize, end: usize, prot: i32) -> io::Result<()> {
    let (start, end) = page_range(start, end);
    // SAFETY: changing protections of pages does not by itself break memory
    // safety of this process: callers only make code pages writable (adding
    // a right) for the duration of a batch and restore them right after.
    let r = unsafe { libc::mprotect(start as *mut libc::c_void, end - start, prot) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Maps `size` bytes of private anonymous memory, readable and writable, at
/// exactly `addr` if that range is free.
pub fn map_fixed_noreplace(addr: usize, size: usize) -> io::Result<usize> {
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; a new
    // anonymous mapping aliases nothing.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    if p as usize != addr {
        // Kernels before 4.17 treat the flag as a hint.
        // SAFETY: p is the mapping just made, of `size` bytes, used by no one.
        unsafe { libc::munmap(p, size) };
        return Err(io::Error::from_raw_os_error(libc::EEXIST));
    }
    Ok(addr)
}

/// The mapped ranges of this process, sorted, from `/proc/self/maps`.
pub fn mappings() -> io::Result<Vec<(usize, usize)>> {
    let text = std::fs::read_to_string("/proc/self/maps")?;
    let mut out: Vec<(usize, usize)> = text
        .lines()
        .filter_map(|line| {
            let range = line.split_whitespace().next()?;
            let (a, b) = range.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// The number of threads of this process.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(usize::MAX, |d| d.count())
}

/// Reads `errno`.
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() }
}

/// Writes `errno`.
pub fn set_errno(value: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = value };
}

/// Keeps `errno` as it was when created (the host must not see ours).
pub struct ErrnoGuard(i32);

impl ErrnoGuard {
    /// Remembers `errno`.
    pub fn new() -> ErrnoGuard {
        ErrnoGuard(errno())
    }
}

impl Drop for ErrnoGuard {
    fn drop(&mut self) {
        set_errno(self.0);
    }
}

const MEMBARRIER_CMD_QUERY: i32 = 0;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: i32 = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: i32 = 1 << 4;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE: i32 = 1 << 5;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: i32 = 1 << 6;

fn membarrier(cmd: i32) -> io::Result<i64> {
    // SAFETY: membarrier takes no pointers.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// How the patcher makes every thread's instruction stream see new code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMethod {
    /// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE)`.
    SyncCore,
    /// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: an IPI to every CPU
    /// running a thread of ours; on x86 its return to user space is `iret`,
    /// which serializes.
    Expedited,
    /// Changing the protection of a page we touched: the TLB shootdown sends
    /// the same IPIs (as .NET's `FlushProcessWriteBuffers` does), slower.
    Mprotect,
}

impl SyncMethod {
    /// Name, for messages and `FNTRACE_SYNC`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMethod::SyncCore => "membarrier-sync-core",
            SyncMethod::Expedited => "membarrier",
            SyncMethod::Mprotect => "mprotect",
        }
    }

    /// Registers for the best method available, or for `wanted` if given.
    pub fn setup(wanted: Option<&str>) -> SyncMethod {
        let supported = membarrier(MEMBARRIER_CMD_QUERY).unwrap_or(0) as i32;
        let try_register = |cmd: i32, register: i32| supported & cmd != 0 && membarrier(register).is_ok();
        let sync_core = || {
            try_register(
                MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
            )
        };
        let expedited = || {
            try_register(
                MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            )
        };
        match wanted {
            Some("mprotect") => SyncMethod::Mprotect,
            Some("membarrier") if expedited() => SyncMethod::Expedited,
            _ if sync_core() => SyncMethod::SyncCore,
            _ if expedited() => SyncMethod::Expedited,
            _ => SyncMethod::Mprotect,
        }
    }

    /// Makes every thread of the process see code written so far.
    pub fn sync(self, scratch_page: usize) {
        let done = match self {
            SyncMethod::SyncCore => membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE).is_ok(),
            SyncMethod::Expedited => membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED).is_ok(),
            SyncMethod::Mprotect => false,
        };
        if !done {
            sync_by_mprotect(scratch_page);
        }
    }
}

/// Forces an IPI to every CPU that runs a thread of ours: write to a page of
/// ours (so it is in their TLBs' reach) and take the write right away.
fn sync_by_mprotect(page: usize) {
    if page == 0 {
        return;
    }
    let size = page_size();
    let _ = protect(page, page + size, libc::PROT_READ | libc::PROT_WRITE);
    // SAFETY: `page` is a private page mapped for this purpose, now writable.
    unsafe { std::ptr::write_volatile(page as *mut u8, 1) };
    let _ = protect(page, page + size, libc::PROT_NONE);
}

/// Maps a private page for `sync_by_mprotect`.
pub fn scratch_page() -> usize {
    // SAFETY: a new anonymous mapping aliases nothing.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page_size(),
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        0
    } else {
        p as usize
    }
}

/// Maps `size` bytes of zeroed, private, anonymous memory (async-signal-safe).
pub fn map_anon(size: usize) -> Option<*mut u8> {
    // SAFETY: an anonymous private mapping at an address the kernel picks
    // touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as *mut u8)
}

/// The calling thread's id.
pub fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// `CLOCK_MONOTONIC` in nanoseconds (through the vDSO: no system call).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The time stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc only reads the counter (every x86-64 CPU has it).
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// Makes code just written at `start..start + len` visible to instruction
/// fetch on every CPU: nothing on x86-64, whose caches are coherent with
/// stores; on AArch64, each data cache line cleaned to the point of
/// unification, then each instruction cache line invalidated (the
/// architecture's sequence, as `__clear_cache` does it). The pipelines of
/// other threads are then synchronised by the batch's `sync`.
#[inline]
pub fn flush_icache(start: usize, len: usize) {
    #[cfg(target_arch = "aarch64")]
    {
        let ctr: u64;
        // SAFETY: CTR_EL0 is readable at EL0 on Linux (the kernel traps
        // and emulates it where it must); reading it touches nothing.
        unsafe { std::arch::asm!("mrs {}, ctr_el0", out(reg) ctr, options(nomem, nostack)) };
        let dline = 4usize << ((ctr >> 16) & 0xf);
        let iline = 4usize << (ctr & 0xf);
        let end = start + len;
        let mut at = start & !(dline - 1);
        while at < end {
            // SAFETY: cache maintenance of mapped code the caller just
            // wrote; it changes no data.
            unsafe { std::arch::asm!("dc cvau, {}", in(reg) at, options(nostack)) };
            at += dline;
        }
        // SAFETY: a barrier.
        unsafe { std::arch::asm!("dsb ish", options(nostack)) };
        let mut at = start & !(iline - 1);
        while at < end {
            // SAFETY: as above.
            unsafe { std::arch::asm!("ic ivau, {}", in(reg) at, options(nostack)) };
            at += iline;
        }
        // SAFETY: barriers.
        unsafe { std::arch::asm!("dsb ish", "isb", options(nostack)) };
    }
    #[cfg(not(target_arch = "aarch64"))]
    let _ = (start, len);
}

/// `v` without a pointer authentication code (`XPACLRI`, a hint: on a CPU
/// without pointer authentication a NOP, and `v` has none).
#[cfg(target_arch = "aarch64")]
#[inline]
pub fn strip_pac(v: usize) -> usize {
    let out: usize;
    // SAFETY: XPACLRI only rewrites x30, given and taken back here.
    unsafe { std::arch::asm!("hint #7", inout("x30") v => out, options(nomem, nostack, preserves_flags)) };
    out
}

/// `v` signed with key A (`key_b`: B) and `modifier`, as `PACIASP`
/// (`PACIBSP`) signs a return address with the stack pointer
/// (`PACIA1716`, `PACIB1716`: hints, NOPs without pointer authentication).
#[cfg(target_arch = "aarch64")]
#[inline]
pub fn sign_pac(v: usize, modifier: usize, key_b: bool) -> usize {
    let out: usize;
    // SAFETY: PACIA1716 and PACIB1716 only rewrite x17 from x17 and x16,
    // given here.
    unsafe {
        if key_b {
            std::arch::asm!(
                "hint #10",
                inout("x17") v => out,
                in("x16") modifier,
                options(nomem, nostack, preserves_flags)
            )
        } else {
            std::arch::asm!(
                "hint #8",
                inout("x17") v => out,
                in("x16") modifier,
                options(nomem, nostack, preserves_flags)
            )
        }
    };
    out
}

/// Whether this CPU signs addresses with pointer authentication
/// (`HWCAP_PACA`, keys A and B): without it, `PACIASP`, `PACIBSP` and the
/// hints of [`sign_pac`] do nothing.
#[cfg(target_arch = "aarch64")]
pub fn has_pac() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    const HWCAP_PACA: libc::c_ulong = 1 << 30;
    static KNOWN: AtomicU8 = AtomicU8::new(0);
    match KNOWN.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            // SAFETY: getauxval reads the auxiliary vector; no preconditions.
            let yes = unsafe { libc::getauxval(libc::AT_HWCAP) } & HWCAP_PACA != 0;
            KNOWN.store(1 + u8::from(yes), Ordering::Relaxed);
            yes
        }
    }
}

/// The stack pointer of the caller (close enough: a few words below it).
#[inline(always)]
pub fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer into a register; nothing else is
    // touched.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    sp
}

/// The calling thread's stack, `[start, end)` (`pthread_getattr_np`;
/// it allocates: not for signal handlers).
pub fn thread_stack() -> Option<(usize, usize)> {
    // SAFETY: `attr` is initialized by pthread_getattr_np before it is read
    // and destroyed after; the out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut start: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let got = libc::pthread_attr_getstack(&attr, &mut start, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (got == 0).then(|| (start as usize, (start as usize).saturating_add(size)))
    }
}

/// The calling thread's alternate signal stack, `[start, end)`, if it has
/// one, and whether the thread is running on it now (one system call,
/// async-signal-safe).
pub fn alt_stack() -> Option<(usize, usize, bool)> {
    // SAFETY: a query only (no new stack given); `ss` is a valid stack_t.
    let ss = unsafe {
        let mut ss: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut ss) != 0 {
            return None;
        }
        ss
    };
    if ss.ss_flags & libc::SS_DISABLE != 0 || ss.ss_size == 0 {
        return None;
    }
    let start = ss.ss_sp as usize;
    Some((
        start,
        start.saturating_add(ss.ss_size),
        ss.ss_flags & libc::SS_ONSTACK != 0,
    ))
}

/// Waits (at most `timeout_ms`) while `word` holds `expected`, or until a
/// [`futex_wake`] on it (async-signal-safe: one system call).
pub fn futex_wait(word: &std::sync::atomic::AtomicU32, expected: u32, timeout_ms: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ms / 1000) as libc::time_t,
        tv_nsec: ((timeout_ms % 1000) * 1_000_000) as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on an aligned u32 that stays mapped, with a valid
    // relative timeout; it only sleeps.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every thread waiting on `word` ([`futex_wait`]).
pub fn futex_wake(word: &std::sync::atomic::AtomicU32) {
    // SAFETY: FUTEX_WAKE on an aligned u32; it only wakes waiters.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
    }
}

/// Writes to stderr with one system call (no locks: safe anywhere).
pub fn write_stderr(msg: &[u8]) {
    // SAFETY: writes `msg.len()` bytes from a valid slice.
    unsafe { libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len()) };
}

thread_local! {
    /// Set in the runtime's own threads (`spawn_quiet`).
    static RUNTIME_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is one of the runtime's own (the writer,
/// the control thread), or runs the runtime's own work now
/// ([`RuntimeWork`]): never traced, whatever it calls (a library traced
/// whole sees its calls; async-signal-safe: a constant thread-local).
pub fn in_runtime_thread() -> bool {
    RUNTIME_THREAD.with(|q| q.get())
}

/// The runtime's own work in a thread of the program (start-up, taking
/// in a `dlopen`ed library, the end): while it lives, the thread is the
/// runtime's ([`in_runtime_thread`]).
pub struct RuntimeWork(bool);

impl RuntimeWork {
    pub fn new() -> RuntimeWork {
        RuntimeWork(RUNTIME_THREAD.with(|q| q.replace(true)))
    }
}

impl Drop for RuntimeWork {
    fn drop(&mut self) {
        let was = self.0;
        RUNTIME_THREAD.with(|q| q.set(was));
    }
}

/// Starts a thread of the runtime with every signal blocked but SIGTRAP:
/// the program's signals must go to the program's threads. SIGTRAP stays
/// open because our threads call library functions (`write`, `futex`...)
/// that a live batch may be switching, one `int3` at a time: an `int3` run
/// with SIGTRAP blocked kills the process (the kernel forces the default
/// action), where the trap handler steers our threads as it does the
/// program's (`trap.rs`). The runtime raises no other SIGTRAP.
pub fn spawn_quiet(name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<()> {
    // SAFETY: sigset_t values on the stack, filled by sigfillset; the old
    // mask is restored right after the spawn (the new thread inherits ours).
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigdelset(&mut all, libc::SIGTRAP);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    };
    let spawned = std::thread::Builder::new().name(name.into()).spawn(|| {
        RUNTIME_THREAD.with(|q| q.set(true));
        f()
    });
    // SAFETY: restores this thread's mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    spawned.map(drop)
}

/// The `PROT_*` of the mapping holding `addr` (from `/proc/self/maps`);
/// `None` if nothing is mapped there.
pub fn protection_at(addr: usize) -> Option<i32> {
    let text = std::fs::read_to_string("/proc/self/maps").ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (lo, hi) = fields.next()?.split_once('-')?;
        let (lo, hi) = (
            usize::from_str_radix(lo, 16).ok()?,
            usize::from_str_radix(hi, 16).ok()?,
        );
        if addr < lo || addr >= hi {
            return None;
        }
        let perms = fields.next()?.as_bytes();
        let bit = |i: usize, c: u8, p: i32| if perms.get(i) == Some(&c) { p } else { 0 };
        Some(bit(0, b'r', libc::PROT_READ) | bit(1, b'w', libc::PROT_WRITE) | bit(2, b'x', libc::PROT_EXEC))
    })
}

/// What a global lookup of `name` gives (`dlsym(RTLD_DEFAULT)`: the
/// definition the dynamic linker binds a program's import to, after IFUNC
/// selection), if anything.
pub fn lookup_global(name: &str) -> Option<usize> {
    let cname = std::ffi::CString::new(name).ok()?;
    // SAFETY: dlsym with a NUL-terminated name only looks a symbol up.
    let addr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, cname.as_ptr()) } as usize;
    (addr != 0).then_some(addr)
}

/// Copies up to `buf.len()` bytes of this process's memory at `addr` into
/// `buf`, without ever faulting: `process_vm_readv` on ourselves, which
/// stops at the first byte that is not readable (an unmapped, freed or
/// `PROT_NONE` page) and says how many it copied. Returns that count (0 if
/// nothing at `addr` is readable, or the call is refused, as a seccomp
/// filter may). Async-signal-safe; keeps `errno`.
pub fn read_memory(addr: usize, buf: &mut [u8]) -> usize {
    if buf.is_empty() || addr == 0 {
        return 0;
    }
    let saved = errno();
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, ours
    // and mutable; it reads the remote range with its own fault handling
    // (a bad address is an error or a short count, never a signal).
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    set_errno(saved);
    n.max(0) as usize
}
