//! Reading a data directory: [`open`] gives a [`Trace`] with every readable
//! [`Process`]; [`Process::events`] streams a thread's [`Event`]s.
//!
//! Damage never stops more than it has to (`docs/FORMAT.md`, "Reading
//! damaged data"):
//! - the whole directory fails ([`FormatError`]) only when it cannot be
//!   listed, is not a data directory, or declares a format version this
//!   reader does not read;
//! - a process whose `process.json` or `functions.tsv` is missing or
//!   unparsable is skipped with a note in [`Trace::damage`]
//!   (`p12/process.json: reason; process skipped`); so is an unparsable
//!   `info.json` (then [`Trace::info`] is `None`), a bad `profile.tsv` line,
//!   and a cut-short last line of `functions.tsv`;
//! - a thread file is read up to its first damage, noted in
//!   [`ThreadEvents::damage`].
//!
//! Every file is read through [`file`](mod@file): only regular files,
//! never more than their size nor a limit for their kind; one that is not
//! read is damage like any other (`p12/process.json: is a FIFO, not a
//! regular file`).

mod error;
mod events;
pub mod file;
mod functions;
mod losses;
mod raw;

use std::fs;
use std::path::{Path, PathBuf};

pub use error::FormatError;
pub use events::{Event, EventKind, ThreadEvents, Values};
pub use file::FileError;
pub use functions::Functions;
pub use losses::Losses;
pub use raw::{RawEvents, RawItem};

use crate::layout;
use crate::meta::{self, ProcessInfo, ProfileRow, RunInfo};

/// A data directory, read.
#[derive(Debug)]
pub struct Trace {
    /// The directory.
    pub dir: PathBuf,
    /// `info.json`, when present and readable.
    pub info: Option<RunInfo>,
    /// The readable process images, by start time, then pid, then image
    /// number.
    pub processes: Vec<Process>,
    /// One line per damage found while opening (thread files are checked
    /// only when their events are read).
    pub damage: Vec<String>,
    /// The `p*/` directories that could not be read (each has its note in
    /// `damage`).
    pub skipped: usize,
}

impl Trace {
    /// The process image with directory name `name` (`p123`, `p123.1`).
    pub fn process(&self, name: &str) -> Option<&Process> {
        self.processes.iter().find(|p| p.name == name)
    }
}

/// One process image: a `p<PID>[.N]/` directory.
#[derive(Debug)]
pub struct Process {
    /// The directory name (`p123`, `p123.1`).
    pub name: String,
    /// The directory.
    pub dir: PathBuf,
    /// The image number: 0, then 1, 2, ... after each `exec`.
    pub image: u32,
    /// `process.json`.
    pub info: ProcessInfo,
    /// `functions.tsv`.
    pub functions: Functions,
    /// The threads that have a `t<TID>.events` file, sorted.
    pub tids: Vec<u32>,
    /// `profile.tsv`, when present (tracer `profile`); unparsable lines are
    /// left out with a damage note.
    pub profile: Option<Vec<ProfileRow>>,
    /// `srclines.tsv` (`record --srcline`): each function's `FILE:LINE`;
    /// empty when absent.
    pub srclines: std::collections::HashMap<u32, String>,
}

impl Process {
    /// The events of thread `tid`, streamed from its file. A file that
    /// cannot be opened yields nothing and a damage note.
    pub fn events(&self, tid: u32) -> ThreadEvents {
        ThreadEvents::new(self.raw_events(tid), self.info.clock.clone())
    }

    /// The chunk headers and event words of thread `tid`, as written.
    pub fn raw_events(&self, tid: u32) -> RawEvents {
        let file = layout::thread_file(tid);
        RawEvents::open(&self.dir.join(&file), format!("{}/{file}", self.name), Some(tid))
    }
}

/// Reads the data directory `dir`: `info.json`, and every `p*/` directory
/// that can be read.
pub fn open(dir: &Path) -> Result<Trace, FormatError> {
    let mut damage = Vec::new();
    let mut names = Vec::new();
    let listing = fs::read_dir(dir).map_err(|e| FormatError::io(dir, e))?;
    for entry in listing {
        let entry = entry.map_err(|e| FormatError::io(dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Some((pid, image)) = layout::parse_process_dir(&name) else {
            continue;
        };
        if entry.path().is_dir() {
            names.push((name, pid, image));
        }
    }

    let info_path = dir.join(layout::INFO);
    let info = match file::read_text(&info_path, file::JSON_LIMIT) {
        Ok(text) => match RunInfo::from_json(&text) {
            Ok(info) if info.version != meta::VERSION => {
                return Err(FormatError::Version {
                    path: info_path,
                    version: info.version,
                })
            }
            Ok(info) => Some(info),
            Err(reason) => {
                damage.push(format!("{}: cannot parse: {reason}", layout::INFO));
                None
            }
        },
        Err(e) if e.is_not_found() && !names.is_empty() => None,
        Err(e) if e.is_not_found() => return Err(FormatError::NotDataDir(dir.to_path_buf())),
        Err(e) => {
            damage.push(format!("{}: {e}", layout::INFO));
            None
        }
    };

    let mut processes = Vec::new();
    let mut skipped = 0;
    for (name, pid, image) in names {
        match read_process(dir, &name, image, &mut damage) {
            Ok(p) => processes.push((p, pid)),
            Err(reason) => {
                damage.push(format!("{reason}; process skipped"));
                skipped += 1;
            }
        }
    }
    processes.sort_by_key(|(p, pid)| (p.info.start_unix_ns, *pid, p.image));
    Ok(Trace {
        dir: dir.to_path_buf(),
        info,
        processes: processes.into_iter().map(|(p, _)| p).collect(),
        damage,
        skipped,
    })
}

/// Reads `root/name/`; the error is a damage note naming the file.
fn read_process(root: &Path, name: &str, image: u32, damage: &mut Vec<String>) -> Result<Process, String> {
    let dir = root.join(name);
    let read = |path: &str, limit| {
        file::read_text(&dir.join(path), limit).map_err(|e| format!("{name}/{path}: {e}"))
    };

    let info = ProcessInfo::from_json(&read(layout::PROCESS, file::JSON_LIMIT)?)
        .map_err(|reason| format!("{name}/{}: cannot parse: {reason}", layout::PROCESS))?;
    if info.version != meta::VERSION {
        return Err(FormatError::Version {
            path: format!("{name}/{}", layout::PROCESS).into(),
            version: info.version,
        }
        .to_string());
    }

    let (functions, note) = Functions::parse(&read(layout::FUNCTIONS, file::TABLE_LIMIT)?)
        .map_err(|reason| format!("{name}/{}: {reason}", layout::FUNCTIONS))?;
    if let Some(note) = note {
        damage.push(format!("{name}/{}: {note}", layout::FUNCTIONS));
    }

    let mut tids = Vec::new();
    let listing = fs::read_dir(&dir).map_err(|e| format!("{name}: cannot read: {e}"))?;
    for entry in listing {
        let entry = entry.map_err(|e| format!("{name}: cannot read: {e}"))?;
        if let Some(tid) = entry.file_name().to_str().and_then(layout::parse_thread_file) {
            tids.push(tid);
        }
    }
    tids.sort_unstable();

    let profile = match file::read_text(&dir.join(layout::PROFILE), file::TABLE_LIMIT) {
        Ok(text) => Some(parse_profile(
            &text,
            &format!("{name}/{}", layout::PROFILE),
            damage,
        )),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            damage.push(format!("{name}/{}: {e}", layout::PROFILE));
            None
        }
    };

    let srclines = match file::read_text(&dir.join(layout::SRCLINES), file::TABLE_LIMIT) {
        Ok(text) => parse_srclines(&text, &format!("{name}/{}", layout::SRCLINES), damage),
        Err(e) if e.is_not_found() => Default::default(),
        Err(e) => {
            damage.push(format!("{name}/{}: {e}", layout::SRCLINES));
            Default::default()
        }
    };

    Ok(Process {
        name: name.to_string(),
        dir,
        image,
        info,
        functions,
        tids,
        profile,
        srclines,
    })
}

/// The lines of `srclines.tsv`: `FID<TAB>FILE:LINE`; a bad line is left
/// out with a note (the first only: the others are alike).
fn parse_srclines(
    text: &str,
    label: &str,
    damage: &mut Vec<String>,
) -> std::collections::HashMap<u32, String> {
    let mut lines = std::collections::HashMap::new();
    let mut bad = 0;
    for (i, line) in text.lines().enumerate() {
        match line
            .split_once('\t')
            .and_then(|(fid, at)| Some((fid.parse().ok()?, at)))
        {
            Some((fid, at)) if !at.is_empty() => {
                lines.insert(fid, at.to_string());
            }
            _ => {
                if bad == 0 {
                    damage.push(format!(
                        "{label}: line {}: not FID<TAB>FILE:LINE; left out",
                        i + 1
                    ));
                }
                bad += 1;
            }
        }
    }
    lines
}

/// The rows of `profile.tsv`; the header line is optional, bad lines are
/// left out with a note each.
fn parse_profile(text: &str, label: &str, damage: &mut Vec<String>) -> Vec<ProfileRow> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || (i == 0 && ProfileRow::is_header(line)) {
            continue;
        }
        match ProfileRow::parse_line(line) {
            Ok(row) => rows.push(row),
            Err(reason) => damage.push(format!("{label}: line {}: {reason}; line left out", i + 1)),
        }
    }
    rows
}
