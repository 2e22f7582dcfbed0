//! The ptrace side: one thread stopped, calls run in it, and the thread
//! left as it was.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc::{user_fpregs_struct, user_regs_struct};
use nix::sys::ptrace::{self, regset, Event, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::{procfs, InjectError};

/// The bytes below the stack pointer that a function may use without
/// moving it (the System V x86-64 red zone): the interrupted code's.
const RED_ZONE: u64 = 128;
/// The direction flag of `rflags`, which the ABI wants clear at a call.
const DIRECTION_FLAG: u64 = 1 << 10;
/// `si_code` above this: the kernel raised the signal (a fault), not `kill`.
const SI_USER_MAX: i32 = 0;

/// An argument of an injected call.
pub(super) enum Arg<'a> {
    Int(u64),
    /// Written to the target's stack with a NUL after it; the argument is its address.
    Str(&'a [u8]),
}

/// A thread that is seized and stopped, with what it had before.
pub(super) struct Tracee {
    pid: i32,
    tid: Pid,
    mem: File,
    regs: user_regs_struct,
    fpregs: user_fpregs_struct,
    interrupted: Instant,
}

impl Tracee {
    /// Seizes thread `tid` of process `pid` and stops it, saving its registers.
    pub(super) fn stop(pid: i32, tid: i32) -> Result<Self, InjectError> {
        let thread = Pid::from_raw(tid);
        ptrace::seize(thread, Options::empty()).map_err(|errno| match errno {
            Errno::EPERM => InjectError::Permission {
                pid,
                ptrace_scope: procfs::ptrace_scope(),
            },
            Errno::ESRCH if !std::path::Path::new(&format!("/proc/{pid}")).exists() => {
                InjectError::NoProcess { pid }
            }
            Errno::ESRCH => InjectError::Exited { pid },
            errno => InjectError::Ptrace {
                tid,
                request: "PTRACE_SEIZE",
                errno,
            },
        })?;
        let interrupted = Instant::now();
        ptrace::interrupt(thread).map_err(|errno| match errno {
            Errno::ESRCH => InjectError::Exited { pid },
            errno => InjectError::Ptrace {
                tid,
                request: "PTRACE_INTERRUPT",
                errno,
            },
        })?;
        loop {
            match wait(pid, thread)? {
                WaitStatus::PtraceEvent(_, Signal::SIGTRAP, event)
                    if event == Event::PTRACE_EVENT_STOP as i32 =>
                {
                    break
                }
                // A group-stop: the process was stopped after the checks.
                WaitStatus::PtraceEvent(_, _, event) if event == Event::PTRACE_EVENT_STOP as i32 => {
                    let _ = ptrace::detach(thread, None);
                    return Err(InjectError::Stopped { pid });
                }
                // A signal came first: deliver it; the interrupt is still pending.
                WaitStatus::Stopped(_, signal) => cont(pid, thread, Some(signal))?,
                _ => cont(pid, thread, None)?,
            }
        }
        let saved = ptrace::getregs(thread)
            .map_err(|errno| ptrace_error(pid, tid, "PTRACE_GETREGS", errno))
            .and_then(|regs| {
                let fpregs = ptrace::getregset::<regset::NT_PRFPREG>(thread)
                    .map_err(|errno| ptrace_error(pid, tid, "PTRACE_GETREGSET", errno))?;
                Ok((regs, fpregs))
            })
            .and_then(|(regs, fpregs)| {
                // Opened once traced: ptrace access is what /proc/PID/mem checks.
                let path = format!("/proc/{pid}/mem");
                let mem = File::options().read(true).write(true).open(&path);
                let mem = mem.map_err(|error| InjectError::Io {
                    what: format!("cannot open {path}"),
                    error,
                })?;
                Ok((regs, fpregs, mem))
            });
        match saved {
            Ok((regs, fpregs, mem)) => Ok(Self {
                pid,
                tid: thread,
                mem,
                regs,
                fpregs,
                interrupted,
            }),
            Err(e) => {
                let _ = ptrace::detach(thread, None);
                Err(e)
            }
        }
    }

    pub(super) fn pid(&self) -> i32 {
        self.pid
    }

    /// Calls `function(args...)` in the thread and returns `rax` once it
    /// returns. Signals the program gets meanwhile are delivered; a fault
    /// ends the call with [`InjectError::Faulted`], the thread stopped.
    pub(super) fn call(&mut self, name: &str, function: u64, args: &[Arg<'_>]) -> Result<u64, InjectError> {
        let mut strings = Vec::new();
        let mut offsets = Vec::new();
        for arg in args {
            offsets.push(strings.len() as u64);
            if let Arg::Str(bytes) = arg {
                strings.extend_from_slice(bytes);
                strings.push(0);
            }
        }
        let data = self.regs.rsp.wrapping_sub(RED_ZONE + strings.len() as u64) & !15;
        // The return address 0 below the strings: rsp ≡ 8 (mod 16) at entry.
        let rsp = data.wrapping_sub(8);
        let mut frame = 0u64.to_le_bytes().to_vec();
        frame.extend_from_slice(&strings);
        self.write(rsp, &frame)?;

        let mut regs = self.regs;
        regs.rip = function;
        regs.rsp = rsp;
        regs.rax = 0;
        // Not in a system call: the kernel must not restart the interrupted one here.
        regs.orig_rax = u64::MAX;
        regs.eflags &= !DIRECTION_FLAG;
        let registers = [
            &mut regs.rdi,
            &mut regs.rsi,
            &mut regs.rdx,
            &mut regs.rcx,
            &mut regs.r8,
            &mut regs.r9,
        ];
        for ((register, arg), offset) in registers.into_iter().zip(args).zip(offsets) {
            *register = match arg {
                Arg::Int(value) => *value,
                Arg::Str(_) => data + offset,
            };
        }
        self.setregs(regs)?;

        let mut signal = None;
        loop {
            cont(self.pid, self.tid, signal.take())?;
            match wait(self.pid, self.tid)? {
                WaitStatus::Stopped(_, sig) if self.is_fault(sig)? => {
                    let now = self.getregs()?;
                    if sig == Signal::SIGSEGV && now.rip == 0 && now.rsp == rsp + 8 {
                        return Ok(now.rax);
                    }
                    let function = name.to_string();
                    return Err(InjectError::Faulted {
                        function,
                        address: now.rip,
                        signal: sig.as_str(),
                    });
                }
                WaitStatus::Stopped(_, sig) => signal = Some(sig),
                // Group-stops (and the like): just go on.
                _ => {}
            }
        }
    }

    /// A NUL-terminated string of the target (at most 4 KiB of it).
    pub(super) fn read_c_string(&self, address: u64) -> Result<Vec<u8>, InjectError> {
        let mut text = Vec::new();
        let mut at = address;
        while text.len() < 4096 {
            // Page by page: the next page may not be mapped.
            let mut chunk = vec![0u8; (0x1000 - (at & 0xfff)) as usize];
            let n = self
                .mem
                .read_at(&mut chunk, at)
                .map_err(|error| InjectError::Io {
                    what: format!("cannot read the memory of process {} at {at:#x}", self.pid),
                    error,
                })?;
            if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
                text.extend_from_slice(&chunk[..end]);
                return Ok(text);
            }
            if n == 0 {
                break;
            }
            text.extend_from_slice(&chunk[..n]);
            at += n as u64;
        }
        Ok(text)
    }

    /// Restores the saved registers (the interrupted system call restarts)
    /// and detaches; returns how long the thread was stopped.
    pub(super) fn release(self) -> Result<Duration, InjectError> {
        let tid = self.tid.as_raw();
        let restored = self
            .setregs(self.regs)
            .and_then(|()| {
                let fpregs = ptrace::setregset::<regset::NT_PRFPREG>(self.tid, self.fpregs);
                fpregs.map_err(|errno| ptrace_error(self.pid, tid, "PTRACE_SETREGSET", errno))
            })
            .and_then(|()| {
                ptrace::detach(self.tid, None)
                    .map_err(|errno| ptrace_error(self.pid, tid, "PTRACE_DETACH", errno))
            });
        if restored.is_err() {
            // Not left traced, whatever happened.
            let _ = ptrace::detach(self.tid, None);
        }
        restored.map(|()| self.interrupted.elapsed())
    }

    /// A fault of the thread's own (the kernel's `si_code`), not one sent with `kill`.
    fn is_fault(&self, signal: Signal) -> Result<bool, InjectError> {
        if !matches!(
            signal,
            Signal::SIGSEGV | Signal::SIGBUS | Signal::SIGILL | Signal::SIGFPE
        ) {
            return Ok(false);
        }
        let info = ptrace::getsiginfo(self.tid)
            .map_err(|errno| ptrace_error(self.pid, self.tid.as_raw(), "PTRACE_GETSIGINFO", errno))?;
        Ok(info.si_code > SI_USER_MAX)
    }

    fn write(&self, address: u64, bytes: &[u8]) -> Result<(), InjectError> {
        self.mem
            .write_all_at(bytes, address)
            .map_err(|error| InjectError::Io {
                what: format!(
                    "cannot write to the memory of process {} at {address:#x}",
                    self.pid
                ),
                error,
            })
    }

    fn getregs(&self) -> Result<user_regs_struct, InjectError> {
        ptrace::getregs(self.tid)
            .map_err(|errno| ptrace_error(self.pid, self.tid.as_raw(), "PTRACE_GETREGS", errno))
    }

    fn setregs(&self, regs: user_regs_struct) -> Result<(), InjectError> {
        ptrace::setregs(self.tid, regs)
            .map_err(|errno| ptrace_error(self.pid, self.tid.as_raw(), "PTRACE_SETREGS", errno))
    }
}

/// ESRCH from a request on a stopped tracee: it was killed meanwhile.
fn ptrace_error(pid: i32, tid: i32, request: &'static str, errno: Errno) -> InjectError {
    match errno {
        Errno::ESRCH => InjectError::Exited { pid },
        errno => InjectError::Ptrace { tid, request, errno },
    }
}

fn cont(pid: i32, thread: Pid, signal: Option<Signal>) -> Result<(), InjectError> {
    ptrace::cont(thread, signal).map_err(|errno| ptrace_error(pid, thread.as_raw(), "PTRACE_CONT", errno))
}

/// The next stop of the thread; its exit (or the process's) is [`InjectError::Exited`].
fn wait(pid: i32, thread: Pid) -> Result<WaitStatus, InjectError> {
    loop {
        match waitpid(thread, Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => {
                return Err(InjectError::Exited { pid })
            }
            Ok(status) => return Ok(status),
            Err(Errno::EINTR) => continue,
            Err(errno) => {
                return Err(InjectError::Ptrace {
                    tid: thread.as_raw(),
                    request: "waitpid",
                    errno,
                })
            }
        }
    }
}
