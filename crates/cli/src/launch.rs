//! Starting the traced command: finding it as `execvp` does, finding the
//! runtime library, and telling how the command ended.

use std::env;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use fntrace_format::settings;

/// The file name of the runtime library.
pub const RUNTIME: &str = "libfntrace_runtime.so";

/// Why a command cannot be started.
#[derive(Debug, PartialEq, Eq)]
pub enum NotFound {
    /// No such file (exit status 127, as shells use).
    Missing,
    /// A file, but not an executable one (exit status 126).
    NotExecutable(PathBuf),
}

impl NotFound {
    /// The exit status a shell gives for this.
    pub fn exit_code(&self) -> u8 {
        match self {
            NotFound::Missing => 127,
            NotFound::NotExecutable(_) => 126,
        }
    }
}

/// The file `execvp` would run for `name`: `name` itself when it contains a
/// `/`, else the first executable file of that name in `$PATH`.
pub fn find_command(name: &OsStr) -> Result<PathBuf, NotFound> {
    if name.is_empty() {
        return Err(NotFound::Missing);
    }
    if name.as_bytes().contains(&b'/') {
        let path = PathBuf::from(name);
        return match executable(&path) {
            Some(true) => Ok(path),
            Some(false) => Err(NotFound::NotExecutable(path)),
            None => Err(NotFound::Missing),
        };
    }
    let search = env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    let mut denied = None;
    for dir in env::split_paths(&search) {
        // An empty entry is the working directory.
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let path = dir.join(name);
        match executable(&path) {
            Some(true) => return Ok(path),
            Some(false) if denied.is_none() => denied = Some(path),
            _ => {}
        }
    }
    Err(denied.map_or(NotFound::Missing, NotFound::NotExecutable))
}

/// `Some(is executable)` for a regular file (links followed), `None` when
/// there is no such file.
fn executable(path: &Path) -> Option<bool> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return Some(false);
    }
    Some(meta.permissions().mode() & 0o111 != 0)
}

/// Fails on a machine the runtime is not built for (it exists for x86-64
/// and AArch64): elsewhere fntrace reads traces and lists sites.
pub fn check_recording() -> anyhow::Result<()> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        anyhow::bail!(
            "recording is not implemented on {} yet (the runtime is built for x86-64 and AArch64): \
             this fntrace reads traces recorded elsewhere and lists sites",
            env::consts::ARCH
        );
    }
    Ok(())
}

/// The runtime library: `$FNTRACE_RUNTIME`, else `libfntrace_runtime.so`
/// next to the `fntrace` executable, in its `deps/` directory (cargo's
/// layout), or in `../lib/fntrace/` (an installed layout).
pub fn find_runtime() -> anyhow::Result<PathBuf> {
    check_recording()?;
    if let Some(path) = env::var_os(settings::RUNTIME).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            anyhow::bail!("{}={}: no such file", settings::RUNTIME, path.display());
        }
        return Ok(std::path::absolute(&path)?);
    }
    let exe = env::current_exe()?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let candidates = [
        dir.join(RUNTIME),
        dir.join("deps").join(RUNTIME),
        dir.join("../lib/fntrace").join(RUNTIME),
    ];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        anyhow::anyhow!(
            "cannot find the runtime library {RUNTIME} (looked in {}, its deps/ and ../lib/fntrace/; \
             set {} to its path)",
            dir.display(),
            settings::RUNTIME
        )
    })
}

/// `LD_PRELOAD` with the runtime first, then what was already preloaded.
pub fn preload(runtime: &Path) -> OsString {
    let mut value = runtime.as_os_str().to_os_string();
    if let Some(old) = env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        value.push(":");
        value.push(old);
    }
    value
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Killed { signal: i32, core: bool },
}

impl Ending {
    pub fn of(status: ExitStatus) -> Ending {
        match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Killed {
                signal,
                core: status.core_dumped(),
            },
            // Neither: not possible for a waited-for child; call it a failure.
            (None, None) => Ending::Exited(1),
        }
    }

    /// The exit status a shell reports: the code, or 128 + the signal.
    pub fn exit_code(self) -> u8 {
        match self {
            Ending::Exited(code) => (code & 0xff) as u8,
            Ending::Killed { signal, .. } => (128 + (signal & 0x7f)) as u8,
        }
    }

    /// One line for a command killed by a signal; `None` when it exited.
    pub fn message(self, command: &str) -> Option<String> {
        match self {
            Ending::Exited(_) => None,
            Ending::Killed { signal, core } => Some(format!(
                "fntrace: {command}: {}{}",
                killed_by(signal),
                if core { ", core dumped" } else { "" }
            )),
        }
    }
}

/// `killed by signal N (NAME)`, the name when the number has one.
pub fn killed_by(signal: i32) -> String {
    match signal_name(signal) {
        Some(name) => format!("killed by signal {signal} ({name})"),
        None => format!("killed by signal {signal}"),
    }
}

/// The name of a Linux signal number (x86-64, arm64).
fn signal_name(signal: i32) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(signal)
        .ok()
        .and_then(|s| s.checked_sub(1))
        .and_then(|i| NAMES.get(i))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_found_like_execvp() {
        assert!(find_command(OsStr::new("sh")).is_ok());
        assert_eq!(find_command(OsStr::new("/nonexistent")), Err(NotFound::Missing));
        assert_eq!(
            find_command(OsStr::new("no-such-command-fntrace")),
            Err(NotFound::Missing)
        );
        assert_eq!(find_command(OsStr::new("")), Err(NotFound::Missing));
        assert!(matches!(
            find_command(OsStr::new("/")),
            Err(NotFound::NotExecutable(_))
        ));
    }

    #[test]
    fn endings() {
        assert_eq!(Ending::Exited(3).exit_code(), 3);
        let killed = Ending::Killed {
            signal: 11,
            core: false,
        };
        assert_eq!(killed.exit_code(), 139);
        assert_eq!(
            killed.message("./prog").unwrap(),
            "fntrace: ./prog: killed by signal 11 (SIGSEGV)"
        );
        assert_eq!(signal_name(9), Some("SIGKILL"));
        assert_eq!(signal_name(0), None);
        assert_eq!(signal_name(64), None);
    }
}
