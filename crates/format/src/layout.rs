//! Names in the data directory (`docs/FORMAT.md`, "Layout").
//!
//! ```text
//! fntrace.data/
//!   info.json
//!   quiet.tsv          the child processes that recorded nothing
//!   p<PID>/            process.json, functions.tsv, t<TID>.events, profile.tsv,
//!                      srclines.tsv
//!   p<PID>.1/, ...     the same pid after its 1st, 2nd `exec`
//! ```
//!
//! Numbers in names are plain decimal without leading zeros, so that a name
//! and its number convert both ways; the parsers reject anything else.

/// The default data directory, relative to the working directory.
pub const DEFAULT_DIR: &str = "fntrace.data";
/// The run's description, written by `fntrace record`.
pub const INFO: &str = "info.json";
/// A process image's description, in its `p*/` directory.
pub const PROCESS: &str = "process.json";
/// A process image's function table.
pub const FUNCTIONS: &str = "functions.tsv";
/// Each function's place in its source (`record --srcline`):
/// `FID<TAB>FILE:LINE` lines.
pub const SRCLINES: &str = "srclines.tsv";
/// The profiler's table (tracer `profile`).
pub const PROFILE: &str = "profile.tsv";
/// The processes that recorded nothing, one per line (`PID<TAB>command
/// line`): their directories were not kept.
pub const QUIET: &str = "quiet.tsv";
/// The suffix of thread files.
pub const EVENTS_SUFFIX: &str = ".events";

/// The directory of process `pid`'s image number `image`: `p123` for the
/// first image, `p123.1` after its first `exec`, ...
pub fn process_dir(pid: u32, image: u32) -> String {
    if image == 0 {
        format!("p{pid}")
    } else {
        format!("p{pid}.{image}")
    }
}

/// The pid and image number of a process directory name (`p123` →
/// `(123, 0)`, `p123.2` → `(123, 2)`); `None` for any other name, `p123.0`
/// included.
pub fn parse_process_dir(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix('p')?;
    match rest.split_once('.') {
        None => Some((parse_decimal(rest)?, 0)),
        Some((pid, image)) => {
            let image = parse_decimal(image)?;
            if image == 0 {
                return None;
            }
            Some((parse_decimal(pid)?, image))
        }
    }
}

/// The file of thread `tid`: `t456.events`.
pub fn thread_file(tid: u32) -> String {
    format!("t{tid}{EVENTS_SUFFIX}")
}

/// The tid of a thread file name (`t456.events` → `456`); `None` for any
/// other name.
pub fn parse_thread_file(name: &str) -> Option<u32> {
    parse_decimal(name.strip_prefix('t')?.strip_suffix(EVENTS_SUFFIX)?)
}

/// A decimal `u32` written the way this crate writes it: digits only, no
/// sign, no leading zero (except `0` itself).
fn parse_decimal(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if s.len() > 1 && s.starts_with('0') {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_dirs() {
        assert_eq!(process_dir(123, 0), "p123");
        assert_eq!(process_dir(123, 1), "p123.1");
        for (pid, image) in [(0, 0), (1, 0), (123, 1), (u32::MAX, u32::MAX)] {
            assert_eq!(parse_process_dir(&process_dir(pid, image)), Some((pid, image)));
        }
        for bad in [
            "",
            "p",
            "p.1",
            "p1.",
            "p1.0",
            "p01",
            "p+1",
            "q1",
            "p1.1.1",
            "p1x",
            "p4294967296",
            "p1.01",
        ] {
            assert_eq!(parse_process_dir(bad), None, "{bad}");
        }
    }

    #[test]
    fn thread_files() {
        assert_eq!(thread_file(456), "t456.events");
        for tid in [0, 7, u32::MAX] {
            assert_eq!(parse_thread_file(&thread_file(tid)), Some(tid));
        }
        for bad in [
            "t.events",
            "t1.event",
            "t01.events",
            "x1.events",
            "t-1.events",
            "t1.events.tmp",
            "t1",
        ] {
            assert_eq!(parse_thread_file(bad), None, "{bad}");
        }
    }
}
