//! Makes a running process load a shared library and call one function in
//! it, through ptrace: the way into a process that was not started by
//! `fntrace record`.
//!
//! What it is: [`inject`] (and [`inject_with`]), the checks it makes first
//! ([`check`]), its one-line errors ([`InjectError`]), and the little of
//! `/proc` and ELF it reads to do so, which its callers use too
//! ([`maps`], [`target_file`], [`alive`], [`machine`]). What it is not:
//! it knows nothing of fntrace's runtime, settings, sessions or control
//! socket (the CLI's `cmd/attach.rs` and `control.rs` decide what to load
//! and what to tell it), and it discovers no sites. Safe Rust: ptrace,
//! `waitpid` and signals through `nix`'s safe wrappers.
//!
//! # Technique
//!
//! One thread of the target is seized (`PTRACE_SEIZE`) and stopped
//! (`PTRACE_INTERRUPT`); the other threads keep running. Its general and
//! x87/SSE registers are saved. Each call (`dlopen`, `dlerror` if that
//! failed, then the library's function) runs in that thread on its own
//! stack: the string arguments are written below the red zone through
//! `/proc/PID/mem`, a return address of 0 is pushed, and the thread is
//! continued at the function with the arguments in `rdi`/`rsi`. When the
//! function returns it jumps to address 0 and faults; that `SIGSEGV` at
//! `rip == 0` (with the stack pointer just above the fake return address)
//! is the end of the call, `rax` its result, and the signal is never
//! delivered. Signals the program gets meanwhile are passed on. At the end
//! the saved registers are written back exactly and the thread is detached.
//!
//! `dlopen` and `dlerror` are found in the target's `libc.so.6` (glibc
//! 2.34 and later) or `libdl.so.2` (older glibc): the load base from
//! `/proc/PID/maps` plus the symbol's value in the file's `.dynsym`. The
//! function in the library is found the same way once it is mapped.
//!
//! # System calls
//!
//! A thread blocked in a system call (`read`, `nanosleep`, `futex`...) that
//! is interrupted stops with the call's number in `orig_rax` and a
//! `-ERESTART*` code in `rax`; on its way back to user space the kernel
//! would restart the call by moving `rip` back onto the `syscall`
//! instruction. The injected calls set `orig_rax` to -1 (not in a system
//! call) and `rax` to 0 (no `-ERESTART*` code) so that the kernel does not
//! do that to them; restoring the saved `orig_rax` and `rax` at the
//! end lets the kernel restart the interrupted call as if nothing had
//! happened, so the program never sees an `EINTR` it did not ask for.
//!
//! # Limits
//!
//! - Locks: the stopped thread may hold a lock that `dlopen` (or the called
//!   function) takes: the `malloc` arena lock or the loader's lock if it was
//!   running user code, and then the call deadlocks in it. So the thread is
//!   chosen among those blocked in a sleeping system call, which hold
//!   neither in a sane program (see [`inject`]); a thread in `futex` or the
//!   main thread at any point are only fallbacks. A deadlocked call hangs
//!   the injection (there is no timeout: giving up in the middle of `dlopen`
//!   would leave the loader's state half changed).
//! - Only the general and x87/SSE registers are saved: the upper halves of
//!   AVX and the AVX-512 registers are not (the `nix` crate has no
//!   `NT_X86_XSTATE` register set). A thread blocked in a system call is in
//!   a libc wrapper, a function call, after which these are dead anyway.
//! - A restarted `nanosleep` or `poll` (`-ERESTART_RESTARTBLOCK`) keeps
//!   its remaining time in the thread's restart block, which a system call
//!   the injected code makes and that is itself interrupted may overwrite.
//! - If fntrace dies during an injection the kernel detaches the thread
//!   with the injected registers, and the target most likely crashes.
//! - x86-64 only; the target must use glibc's dynamic loader.
#![forbid(unsafe_code)]

mod procfs;
pub use procfs::{alive, machine, maps, target_file, FileId, Mapping};
#[cfg(target_arch = "x86_64")]
mod tracee;
#[cfg(not(target_arch = "x86_64"))]
#[path = "unsupported.rs"]
mod tracee;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tracee::{Arg, Tracee};

/// `RTLD_NOW | RTLD_LOCAL` from `<dlfcn.h>`: resolve everything at once, so
/// that a missing symbol is an error of `dlopen` and not a crash later.
const RTLD_NOW_LOCAL: u64 = 2;

/// What an injection did.
#[derive(Debug, Clone)]
pub struct Injection {
    /// The thread that was stopped and made to run the calls.
    pub tid: i32,
    /// How long that thread was stopped (from PTRACE_INTERRUPT to PTRACE_DETACH returning).
    pub pause: Duration,
    /// `dlopen` was called (false: the library was already mapped in the target).
    pub loaded: bool,
    /// What the function returned (rax, as i64). A function returning `int`
    /// leaves it in the low 32 bits: `result as i32`.
    pub result: i64,
}

/// Why an injection failed; the Display text is one line, for `fntrace: error: ...`.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// fntrace runs on a machine whose injection is not implemented.
    #[error(
        "fntrace attach is not implemented on {arch} (x86-64 only): start the program \
         under fntrace record instead"
    )]
    Architecture { arch: &'static str },
    /// `/proc/PID` does not exist.
    #[error("no process with PID {pid}")]
    NoProcess { pid: i32 },
    /// The PID is fntrace's own.
    #[error("process {pid} is fntrace itself")]
    OwnProcess { pid: i32 },
    /// The number is a thread of another process, not a process.
    #[error("{tid} is a thread of process {pid}; give the process ID")]
    Thread { tid: i32, pid: i32 },
    /// The process has exited and waits for its parent.
    #[error("process {pid} is a zombie (it has exited)")]
    Zombie { pid: i32 },
    /// The process is stopped (`SIGSTOP`, job control or a debugger).
    #[error("process {pid} is stopped (continue it first)")]
    Stopped { pid: i32 },
    /// Another tracer (a debugger, strace) is attached.
    #[error("process {pid} is already traced by process {tracer} (a debugger?)")]
    Traced { pid: i32, tracer: i32 },
    /// The executable is an emulator running a program of another machine.
    #[error(
        "process {pid} runs under qemu-user emulation ({emulator}); \
         fntrace attach works on native x86-64 processes"
    )]
    Qemu { pid: i32, emulator: String },
    /// The executable is not ELF64 x86-64.
    #[error("process {pid} runs a {machine} program; fntrace attach works on x86-64 processes")]
    Machine { pid: i32, machine: String },
    /// No `dlopen` in any mapped `libc.so.6` or `libdl.so.2`.
    #[error("process {pid} has no dynamic loader (statically linked?)")]
    NoLoader { pid: i32 },
    /// The library cannot be read or is not an x86-64 ELF shared library.
    #[error("cannot use {}: {reason}", .library.display())]
    Library { library: PathBuf, reason: String },
    /// The library does not define the function.
    #[error("{} does not export a function named {symbol}", .library.display())]
    NoSymbol { library: PathBuf, symbol: String },
    /// The library path or the argument contains a NUL byte.
    #[error("the {what} contains a NUL byte")]
    NulByte { what: &'static str },
    /// ptrace was refused.
    #[error(
        "cannot trace process {pid}: permission denied (ptrace needs the same user and \
         /proc/sys/kernel/yama/ptrace_scope 0, or CAP_SYS_PTRACE; {})",
        scope_text(.ptrace_scope)
    )]
    Permission { pid: i32, ptrace_scope: Option<String> },
    /// The process exited or was killed while stopped or running a call.
    #[error("process {pid} exited during attach")]
    Exited { pid: i32 },
    /// `dlopen` returned NULL; `message` is what `dlerror` said.
    #[error("the target could not load {}: {message}", .library.display())]
    DlopenFailed { library: PathBuf, message: String },
    /// `dlopen` succeeded but no mapping of the library is in the maps.
    #[error("process {pid} loaded {} but it is not in /proc/{pid}/maps", .library.display())]
    NotMapped { pid: i32, library: PathBuf },
    /// An injected call died of a fault; the registers were restored.
    #[error("the injected call to {function} faulted at {address:#x} ({signal})")]
    Faulted {
        function: String,
        address: u64,
        signal: &'static str,
    },
    /// A ptrace request failed unexpectedly.
    #[error("ptrace {request} on thread {tid} failed: {}", .errno.desc())]
    Ptrace {
        tid: i32,
        request: &'static str,
        #[source]
        errno: nix::errno::Errno,
    },
    /// Reading or writing a file of `/proc` failed.
    #[error("{what}: {error}")]
    Io {
        what: String,
        #[source]
        error: std::io::Error,
    },
}

/// The end of [`InjectError::Permission`]'s message.
fn scope_text(ptrace_scope: &Option<String>) -> String {
    match ptrace_scope {
        Some(scope) => format!("current ptrace_scope: {scope}"),
        None => "no Yama".to_string(),
    }
}

/// Checks, without touching the process, that [`inject`] could go into
/// it: it exists, runs, is not fntrace or traced, is an x86-64 program with
/// glibc's `dlopen` mapped.
pub fn check(pid: i32) -> Result<(), InjectError> {
    supported()?;
    procfs::check_process(pid)?;
    procfs::find_loader(pid).map(drop)
}

/// Whether this machine's injection is implemented (x86-64 only).
fn supported() -> Result<(), InjectError> {
    match cfg!(target_arch = "x86_64") {
        true => Ok(()),
        false => Err(InjectError::Architecture {
            arch: std::env::consts::ARCH,
        }),
    }
}

/// Why `/proc/PID/...` could not be read: the permission error, explained.
pub fn permission(pid: i32) -> InjectError {
    InjectError::Permission {
        pid,
        ptrace_scope: procfs::ptrace_scope(),
    }
}

/// Makes process `pid` load `library` (dlopen(path, RTLD_NOW|RTLD_LOCAL), unless a mapping of that same file — same device and inode as `std::fs::metadata(library)`, which follows symlinks — is already in /proc/PID/maps) and call its exported function `symbol` with one argument: a pointer to the NUL-terminated string `arg` written into the target's memory. Returns the function's result.
///
/// `library` is passed to `dlopen` as given: a relative path is resolved
/// against the target's working directory and a bare name is searched in
/// its library path, so give an absolute path.
///
/// Everything that can be checked without touching the target is checked
/// first: the process exists, is not fntrace, runs (not a zombie, not
/// stopped, not traced), is an x86-64 ELF program with glibc's `dlopen`
/// mapped, and the library exports `symbol`.
///
/// The calls run in one thread, chosen to avoid deadlocks: a thread that
/// was stopped while running user code may hold the `malloc` lock or the
/// loader's lock, and `dlopen` in it would wait for itself forever. So the
/// thread is, in this order of preference, one blocked in a sleeping system
/// call (`nanosleep`, `clock_nanosleep`, `pause`, `poll`, `ppoll`, `select`,
/// `pselect6`, `epoll_wait`, `epoll_pwait`, `epoll_pwait2`, `read`,
/// `accept`, `accept4`, `recvfrom`, `recvmsg`, `wait4`, `waitid`: the main
/// thread if it is one of them), one blocked in `futex` (or in the
/// `restart_syscall` of an interrupted sleep or `futex`), or else the main
/// thread, as read from `/proc/PID/task/TID/syscall` just before.
///
/// After the calls (and on every error once the thread is stopped) its
/// registers are restored and it is detached: an interrupted system call
/// restarts, and the program goes on as before, with the library loaded.
pub fn inject(pid: i32, library: &Path, symbol: &str, arg: &str) -> Result<Injection, InjectError> {
    inject_with(pid, library, symbol, arg, true)
}

/// [`inject`], but when `after_load` is false and `dlopen` had to load the
/// library, the function is not called (its constructor does the work):
/// one stop of the thread fewer, `result` 0.
pub fn inject_with(
    pid: i32,
    library: &Path,
    symbol: &str,
    arg: &str,
    after_load: bool,
) -> Result<Injection, InjectError> {
    let library_bytes = library.as_os_str().as_bytes();
    if library_bytes.contains(&0) {
        return Err(InjectError::NulByte { what: "library path" });
    }
    if arg.as_bytes().contains(&0) {
        return Err(InjectError::NulByte { what: "argument" });
    }
    supported()?;
    procfs::check_process(pid)?;
    let lib = LibraryFile::read(library, symbol)?;
    let loader = procfs::find_loader(pid)?;
    let mapped = lib.base_in(pid, &procfs::maps(pid)?);

    let tid = procfs::choose_thread(pid);
    let mut tracee = Tracee::stop(pid, tid)?;
    let calls = run_calls(&mut tracee, &lib, &loader, mapped, arg, after_load);
    match (calls, tracee.release()) {
        (Ok((loaded, result)), Ok(pause)) => Ok(Injection {
            tid,
            pause,
            loaded,
            result,
        }),
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
    }
}

/// The calls themselves, with the thread stopped: `dlopen` (and `dlerror`)
/// unless `mapped` is the library's load bias, then the function. Returns
/// whether `dlopen` was called and the function's result.
fn run_calls(
    tracee: &mut Tracee,
    lib: &LibraryFile,
    loader: &procfs::Loader,
    mapped: Option<u64>,
    arg: &str,
    after_load: bool,
) -> Result<(bool, i64), InjectError> {
    let pid = tracee.pid();
    let (loaded, bias) = match mapped {
        Some(bias) => (false, bias),
        None => {
            let path = lib.path.as_os_str().as_bytes();
            let handle = tracee.call(
                "dlopen",
                loader.dlopen,
                &[Arg::Str(path), Arg::Int(RTLD_NOW_LOCAL)],
            )?;
            if handle == 0 {
                let message = match loader.dlerror {
                    Some(dlerror) => match tracee.call("dlerror", dlerror, &[])? {
                        0 => "dlopen returned NULL and dlerror nothing".to_string(),
                        text => String::from_utf8_lossy(&tracee.read_c_string(text)?).into_owned(),
                    },
                    None => "dlopen returned NULL (no dlerror to say why)".to_string(),
                };
                return Err(InjectError::DlopenFailed {
                    library: lib.path.clone(),
                    message,
                });
            }
            // A handle says the library is loaded: without a call to make,
            // the stopped thread goes on at once, /proc/PID/maps unread.
            if !after_load {
                return Ok((true, 0));
            }
            let bias = lib.base_in(pid, &procfs::maps(pid)?);
            let bias = bias.ok_or_else(|| InjectError::NotMapped {
                pid,
                library: lib.path.clone(),
            })?;
            (true, bias)
        }
    };
    let function = bias.wrapping_add(lib.symbol_value);
    let result = tracee.call(&lib.symbol, function, &[Arg::Str(arg.as_bytes())])?;
    Ok((loaded, result as i64))
}

/// The library as read on our side, before touching the target.
struct LibraryFile {
    /// As the caller gave it: what `dlopen` gets.
    path: PathBuf,
    /// The file it names, symlinks followed.
    id: FileId,
    /// `p_vaddr` of the segment mapped from file offset 0, page-aligned.
    first_vaddr: u64,
    symbol: String,
    /// `st_value` of `symbol` in `.dynsym`.
    symbol_value: u64,
}

impl LibraryFile {
    fn read(path: &Path, symbol: &str) -> Result<Self, InjectError> {
        let error = |reason: String| InjectError::Library {
            library: path.to_path_buf(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| error(e.to_string()))?;
        let data = std::fs::read(path).map_err(|e| error(e.to_string()))?;
        let elf = procfs::Elf::parse(&data).map_err(error)?;
        if !elf.is_x86_64_dyn() {
            return Err(error("not an x86-64 ELF shared library".to_string()));
        }
        let symbol_value = elf.function(symbol).ok_or_else(|| InjectError::NoSymbol {
            library: path.to_path_buf(),
            symbol: symbol.to_string(),
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            id: FileId::of(&meta),
            first_vaddr: elf.first_vaddr().map_err(error)?,
            symbol: symbol.to_string(),
            symbol_value,
        })
    }

    /// The load bias of this file in process `pid`, if it is mapped there:
    /// a mapping at offset 0 of the same device and inode, or (for file
    /// systems such as overlayfs, whose maps show the inode underneath) of
    /// a path that names this file.
    fn base_in(&self, pid: i32, maps: &[Mapping]) -> Option<u64> {
        let first = maps.iter().filter(|m| m.offset == 0);
        let start = first
            .clone()
            .filter(|m| m.id == self.id)
            .map(|m| m.start)
            .min()
            .or_else(|| {
                first
                    .filter(|m| m.path.starts_with('/'))
                    .filter(|m| {
                        procfs::target_file(pid, &m.path)
                            .metadata()
                            .ok()
                            .map(|md| FileId::of(&md))
                            == Some(self.id)
                    })
                    .map(|m| m.start)
                    .min()
            })?;
        Some(start.wrapping_sub(self.first_vaddr))
    }
}
