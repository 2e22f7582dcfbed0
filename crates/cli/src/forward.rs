//! Terminating signals sent to fntrace while it runs a command (`record`,
//! `live`): SIGTERM, SIGINT, SIGHUP and SIGQUIT are passed on to the
//! command, and fntrace waits for it to end, so that it is never left
//! running (and recording) behind a fntrace that is gone, and `info.json`
//! gets its status.
//!
//! While the command runs, the signals (and SIGCHLD) are blocked in fntrace
//! and read from a `signalfd`, which tells who sent each: one the kernel
//! sent (`SI_KERNEL`: the terminal's Ctrl-C, Ctrl-\ or hang-up) went to the
//! whole foreground process group, the command included, and is not sent
//! again; one a process sent (`kill`, a service manager, `timeout`) is.
//! They can be blocked only once the command started (a blocked mask is
//! inherited, and the command must start with its own); before that a
//! handler keeps the latest one, passed on as soon as the command runs.
//! Until the [`Forwarder`] is dropped (fntrace has written what it
//! writes about the command), they are caught; then they have their
//! default actions again.

use std::io;
use std::os::fd::AsFd;
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, pthread_sigmask, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::Pid;

/// The signals passed on.
pub const PASSED: [Signal; 4] = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP, Signal::SIGQUIT];

/// `si_code` of a signal the kernel sent (`<asm-generic/siginfo.h>`).
const SI_KERNEL: i32 = 0x80;

/// The signals caught, from before the command starts until it ended.
pub struct Forwarder {
    /// The latest signal that came before they were blocked (0: none).
    early: Arc<AtomicUsize>,
    /// Set when dropped: the signals act as if never caught.
    done: Arc<AtomicBool>,
}

impl Forwarder {
    /// Catches the signals: from now on they do not end fntrace.
    pub fn catch() -> io::Result<Forwarder> {
        let early = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        for signal in PASSED {
            let number = signal as i32;
            signal_hook::flag::register_usize(number, Arc::clone(&early), number as usize)?;
            signal_hook::flag::register_conditional_default(number, Arc::clone(&done))?;
        }
        Ok(Forwarder { early, done })
    }

    /// Waits for `child` to end, passing the signals on; its status.
    pub fn wait(&self, child: &mut Child) -> io::Result<ExitStatus> {
        let mut set = SigSet::empty();
        for signal in PASSED {
            set.add(signal);
        }
        set.add(Signal::SIGCHLD);
        let mut old = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old))?;
        let fd = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK);
        let status = fd
            .map_err(io::Error::from)
            .and_then(|fd| self.pass_on(&fd, child));
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
        status
    }

    fn pass_on(&self, fd: &SignalFd, child: &mut Child) -> io::Result<ExitStatus> {
        let pid = Pid::from_raw(child.id() as i32);
        // Before they were blocked the sender is not known: a terminal's
        // signal in that moment reaches the command twice.
        let mut passed: Vec<Signal> = Signal::try_from(self.early.swap(0, Ordering::AcqRel) as i32)
            .into_iter()
            .collect();
        loop {
            for signal in passed.drain(..) {
                // It may have ended meanwhile: try_wait says so below.
                let _ = kill(pid, signal);
            }
            if let Some(status) = child.try_wait()? {
                // Those that came with its end (the terminal's Ctrl-C that
                // ended it) were for the command.
                read(fd)?;
                return Ok(status);
            }
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
            passed = read(fd)?;
        }
    }
}

/// Reads the signals that came; gives those a process sent.
fn read(fd: &SignalFd) -> io::Result<Vec<Signal>> {
    let mut passed = Vec::new();
    while let Some(info) = fd.read_signal()? {
        let Ok(signal) = Signal::try_from(info.ssi_signo as i32) else {
            continue;
        };
        if PASSED.contains(&signal) && info.ssi_code != SI_KERNEL {
            passed.push(signal);
        }
    }
    Ok(passed)
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
    }
}
