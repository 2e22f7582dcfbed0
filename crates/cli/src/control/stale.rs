//! Stale files of the control directory: the sockets of runtimes that are
//! gone (a process killed while attached cannot remove its own), and the
//! settings and lock files of attaches that did not end. `fntrace attach`
//! and `fntrace ctl` remove them before they look for a session.
//!
//! For each process with files, under its lock (`lock.rs`; one an attach
//! holds is that attach's, and left alone):
//! - a process that is gone (or a zombie) loses all of them;
//! - a live one loses its socket if nothing answers on it: the pid may
//!   have been reused by a process without a session (a socket file with
//!   no listener refuses connections at once), or the runtime in it ended
//!   without removing it. A session that answers, or is too busy to answer
//!   within a second, keeps its socket.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::{lock, request, settings_file, socket, Failure};

/// How long a session may take to answer before it is thought busy.
const PATIENCE: Duration = Duration::from_secs(1);

/// Removes the stale files of `dir`.
pub fn clean(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let pids: BTreeSet<i32> = entries
        .flatten()
        .filter_map(|e| owner(&e.file_name().to_string_lossy()))
        .collect();
    for pid in pids {
        clean_process(dir, pid);
    }
}

/// The pid of `PID.sock`, `PID.conf` or `PID.lock`.
fn owner(name: &str) -> Option<i32> {
    let (pid, suffix) = name.split_once('.')?;
    if !matches!(suffix, "sock" | "conf" | "err" | "lock") || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|&p| p > 0)
}

fn clean_process(dir: &Path, pid: i32) {
    // Dropped at the end: the lock file goes with it.
    let Ok(Some(_held)) = lock::take(dir, pid, false) else {
        return;
    };
    let socket = socket(dir, pid);
    if !fntrace_inject::alive(pid) {
        let _ = std::fs::remove_file(&socket);
        let settings = settings_file(dir, pid);
        let _ = std::fs::remove_file(fntrace_format::control::start_error_file(&settings));
        let _ = std::fs::remove_file(settings);
        return;
    }
    if socket.exists()
        && matches!(
            request(&socket, &fntrace_format::control::Request::Status, PATIENCE),
            Err(Failure::NoSession)
        )
    {
        let _ = std::fs::remove_file(&socket);
    }
}

#[cfg(test)]
mod tests {
    use super::owner;

    #[test]
    fn names() {
        assert_eq!(owner("123.sock"), Some(123));
        assert_eq!(owner("123.conf"), Some(123));
        assert_eq!(owner("123.lock"), Some(123));
        for other in [
            "libfntrace_attach.so",
            "x.sock",
            "123.socket",
            "-1.sock",
            "0.sock",
            "1.2.sock",
            ".sock",
        ] {
            assert_eq!(owner(other), None, "{other}");
        }
    }
}
