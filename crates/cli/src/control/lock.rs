//! One `fntrace attach` per process: the lock file `PID.lock` in the
//! control directory, held (`flock`, exclusive) by the attach of process
//! PID for its whole run, with the attach's own pid in it; the kernel lets
//! it go when that fntrace ends, however it ends. A second attach is
//! refused at once, naming the first. The cleaning of stale files
//! (`stale.rs`) holds it for a moment too, without writing its pid.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

/// The lock file of process `pid`.
pub fn path(dir: &Path, pid: i32) -> PathBuf {
    dir.join(format!("{pid}.lock"))
}

/// A lock held; dropped, its file is removed, then it is let go.
#[derive(Debug)]
pub struct Held {
    _file: File,
    path: PathBuf,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Removed while held: whoever opened it meanwhile finds it gone
        // once it has the lock (`take`), and tries again.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Takes the lock of process `pid` if nobody holds it (`None` if someone
/// does); `mine` writes this process's pid in it.
pub fn take(dir: &Path, pid: i32, mine: bool) -> io::Result<Option<Held>> {
    let path = path(dir, pid);
    loop {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(e),
        }
        // Its last holder may have removed it between our open and our
        // lock: a lock on a file nobody else can open would exclude no one.
        let ours = file.metadata()?;
        let named = std::fs::metadata(&path).ok();
        if !named.is_some_and(|m| m.ino() == ours.ino() && m.dev() == ours.dev()) {
            continue;
        }
        if mine {
            file.set_len(0)?;
            file.write_all(std::process::id().to_string().as_bytes())?;
        }
        return Ok(Some(Held { _file: file, path }));
    }
}

/// The running fntrace whose pid is in `pid`'s lock file, if any.
fn holder(dir: &Path, pid: i32) -> Option<u32> {
    let text = std::fs::read_to_string(path(dir, pid)).ok()?;
    let holder: u32 = text.trim().parse().ok()?;
    Path::new(&format!("/proc/{holder}")).exists().then_some(holder)
}

/// The lock for `fntrace attach`, or why not: another fntrace attach has
/// the process. A holder that does not say who it is (a cleaning, or an
/// attach between taking the lock and writing its pid) is waited for a
/// few seconds.
pub fn for_attach(dir: &Path, pid: i32, name: &str) -> anyhow::Result<Held> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let taken = take(dir, pid, true);
        if let Some(held) = taken.with_context(|| format!("cannot lock {}", path(dir, pid).display()))? {
            return Ok(held);
        }
        match holder(dir, pid) {
            Some(other) => anyhow::bail!(
                "process {pid} ({name}) is already attached by fntrace attach (pid {other}); \
                 one at a time: Ctrl-C to that one ends its session"
            ),
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            None => anyhow::bail!(
                "process {pid} ({name}) is being attached by another fntrace ({} is locked)",
                path(dir, pid).display()
            ),
        }
    }
}
