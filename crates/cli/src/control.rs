//! The control channel of an attach session: the user's private
//! directory, the runtime's socket for a process, the settings file the
//! runtime reads when it is injected, and the one-line request/answer
//! exchange that `fntrace attach` and `fntrace ctl` make over the socket;
//! the lock that makes one attach per process (`lock.rs`) and the removal
//! of stale files (`stale.rs`).
//!
//! The directory is `$XDG_RUNTIME_DIR/fntrace` (a per-user tmpfs on systemd
//! machines), else `/tmp/fntrace-UID`. It must be a real directory owned by
//! the user with no group or other permissions: anyone who could write in
//! it could steer a traced process (docs/ATTACH.md).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use fntrace_format::control::{self as protocol, Request, ATTACH_NAME};

pub mod lock;
mod stale;

pub use stale::clean;

/// This process's effective user id (the owner of `/proc/self`).
pub fn uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

/// The user's control directory, made (0700) if missing and checked.
pub fn dir() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir());
    let dir = match base {
        Some(base) => base.join("fntrace"),
        None => PathBuf::from(format!("/tmp/fntrace-{}", uid())),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != uid() || meta.mode() & 0o077 != 0 {
        anyhow::bail!(
            "{} is not a private directory of yours (it must be a directory owned by you with mode 0700); remove it",
            dir.display()
        );
    }
    Ok(dir)
}

/// The runtime's socket in process `pid`.
pub fn socket(dir: &Path, pid: i32) -> PathBuf {
    dir.join(format!("{pid}.sock"))
}

/// The settings file for process `pid`.
pub fn settings_file(dir: &Path, pid: i32) -> PathBuf {
    protocol::settings_file(dir, pid as u32)
}

/// Writes the settings (`KEY=VALUE` lines, mode 0600).
pub fn write_settings(path: &Path, settings: &[(String, String)]) -> anyhow::Result<()> {
    let mut text = String::new();
    for (key, value) in settings {
        if value.contains('\n') {
            anyhow::bail!("bad value for {key}: it contains a line break");
        }
        text.push_str(&format!("{key}={value}\n"));
    }
    let _ = std::fs::remove_file(path);
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The link `dir/HASH-libfntrace_attach.so` to the runtime library: one
/// name per runtime (HASH of its path), so that attaches with two builds
/// of fntrace never replace each other's; made under a temporary name and
/// renamed into place, so that two attaches making it at once both find it.
pub fn runtime_link(dir: &Path, runtime: &Path) -> anyhow::Result<PathBuf> {
    let runtime =
        std::fs::canonicalize(runtime).with_context(|| format!("cannot find {}", runtime.display()))?;
    // FNV-1a of the path.
    let hash = runtime
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    let link = dir.join(format!("{hash:016x}-{ATTACH_NAME}"));
    if std::fs::read_link(&link).ok().as_deref() != Some(runtime.as_path()) {
        let temporary = dir.join(format!(".{}-{hash:016x}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&temporary);
        std::os::unix::fs::symlink(&runtime, &temporary)
            .and_then(|()| std::fs::rename(&temporary, &link))
            .with_context(|| format!("cannot make {}", link.display()))?;
    }
    Ok(link)
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum Failure {
    /// No runtime listens for this process.
    NoSession,
    /// The runtime answered `error ...`.
    Refused(String),
    /// Anything else (a broken connection).
    Io(std::io::Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NoSession => write!(f, "no fntrace session in this process (is it attached?)"),
            Failure::Refused(e) => write!(f, "{e}"),
            Failure::Io(e) => write!(f, "the session did not answer: {e}"),
        }
    }
}

/// Sends one request; gives the text after `ok`.
pub fn request(socket: &Path, request: &Request, timeout: Duration) -> Result<String, Failure> {
    let mut stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Err(Failure::NoSession)
        }
        Err(e) => return Err(Failure::Io(e)),
    };
    stream.set_read_timeout(Some(timeout)).map_err(Failure::Io)?;
    stream
        .write_all(format!("{}\n", request.encode()).as_bytes())
        .map_err(Failure::Io)?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(Failure::Io)?;
    match protocol::parse_answer(&answer) {
        Some(Ok(text)) => Ok(text),
        Some(Err(reason)) => Err(Failure::Refused(reason)),
        None => Err(Failure::Io(std::io::Error::other(format!(
            "unexpected answer '{}'",
            answer.trim()
        )))),
    }
}

/// `key=value` fields of an answer.
pub fn field(answer: &str, key: &str) -> Option<u64> {
    answer
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}
