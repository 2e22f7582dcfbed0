//! The process's directory in the data directory (`p<PID>`, or
//! `p<PID>.N` for the N-th program `exec`ed in the same process): its
//! `process.json` (rewritten through a temporary file, so a reader never
//! sees half of it, or in place on a full disk: `fntrace_format::replace`)
//! and its `functions.tsv` (appended as libraries come).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use fntrace_format::layout;
use fntrace_format::meta::{Clock, FunctionEntry, ModuleInfo, ProcessInfo};

use super::clock;
use crate::state::State;

/// An open process directory.
pub struct Session {
    /// The data directory.
    pub root: PathBuf,
    /// This process's directory.
    pub dir: PathBuf,
    /// Its name (`p123`).
    pub name: String,
    info: ProcessInfo,
    functions: Option<File>,
    written: usize,
    /// A child of the traced command (not the command itself, nor a
    /// process `fntrace attach` joined).
    child: bool,
    /// Its directory was removed: a child that recorded nothing.
    withdrawn: bool,
}

/// The session (locked after the state's lock, before the writer's).
pub static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// Locks the session.
pub fn lock() -> MutexGuard<'static, Option<Session>> {
    SESSION.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn argv() -> Vec<String> {
    std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Makes the first free process directory under `root`; `child`: the
/// process is a child of the traced command.
pub fn open(root: &Path, tracer: &str, parent: Option<String>, child: bool) -> io::Result<Session> {
    let pid = std::process::id();
    let mut image = 0;
    let (dir, name) = loop {
        let name = layout::process_dir(pid, image);
        let dir = root.join(&name);
        match std::fs::create_dir(&dir) {
            Ok(()) => break (dir, name),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && image < 1000 => image += 1,
            Err(e) => return Err(e),
        }
    };
    let (tick, mono) = clock::point();
    let functions = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(layout::FUNCTIONS))?;
    let info = ProcessInfo {
        version: 1,
        pid,
        // SAFETY: getppid cannot fail.
        ppid: unsafe { libc::getppid() } as u32,
        parent,
        exe: std::fs::read_link("/proc/self/exe")
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        argv: argv(),
        tracer: tracer.to_string(),
        start_unix_ns: unix_ns(),
        clock: Clock {
            source: clock::source().to_string(),
            tick0: tick,
            mono0_ns: mono,
            tick1: tick,
            mono1_ns: mono,
            tsc_hz: None,
        },
        sites: 0,
        patched: 0,
        instrumentation: Default::default(),
        modules: Vec::new(),
        lost: 0,
        untraced: 0,
        unpatched: 0,
        trap_sites: 0,
        ended: false,
        write_error: None,
    };
    let session = Session {
        root: root.to_path_buf(),
        dir,
        name,
        info,
        functions: Some(functions),
        written: 0,
        child,
        withdrawn: false,
    };
    session.write_info()?;
    Ok(session)
}

impl Session {
    fn write_info(&self) -> io::Result<()> {
        let text = self.info.to_json();
        fntrace_format::replace::replace(&self.dir.join(layout::PROCESS), text.as_bytes())
    }

    /// Keeps the first error writing the trace, for `process.json`.
    pub fn note(&mut self, error: String) {
        self.info.write_error.get_or_insert(error);
    }

    /// Appends the functions not yet written and updates the site counts,
    /// and `process.json` with them.
    pub fn take_modules(&mut self, state: &State) {
        self.note_modules(state);
        let _ = self.write_info();
    }

    /// [`Session::take_modules`] without rewriting `process.json`: the
    /// counts go out with its next refresh (the writer's, every second, or
    /// the last one).
    pub fn note_modules(&mut self, state: &State) {
        let mut text = String::new();
        for (fid, f) in state.functions.iter().enumerate().skip(self.written) {
            text.push_str(
                &FunctionEntry {
                    fid: fid as u32,
                    module: f.module.to_string(),
                    address: f.address,
                    size: f.size,
                    name: f.name.to_string(),
                }
                .to_line(),
            );
        }
        self.written = state.functions.len();
        if let Some(Err(e)) = self.functions.as_mut().map(|f| f.write_all(text.as_bytes())) {
            self.note(format!("cannot write {}: {e}", layout::FUNCTIONS));
        }
        let mut kinds = std::collections::BTreeMap::new();
        let mut modules = Vec::new();
        let mut patched = 0u64;
        for (m, module) in state.mods.iter().enumerate() {
            let Some(module) = module else { continue };
            let Some(records) = state.core.module(m) else {
                continue;
            };
            for record in &records.sites {
                *kinds.entry(record.data.kind.as_str().to_string()).or_insert(0u64) += 1;
                patched += u64::from(record.in_effect != fntrace_core::Target::Nop);
            }
            modules.push(ModuleInfo {
                path: module.loaded.path.clone(),
                bias: module.loaded.bias as u64,
                sites: records.sites.len() as u64,
            });
        }
        self.info.sites = state.stats.sites as u64;
        self.info.patched = patched;
        self.info.instrumentation = kinds;
        self.info.modules = modules;
    }

    /// Takes the clock's second point now (the calibration `ticks_per_ns`
    /// reads).
    pub fn take_clock_point(&mut self) {
        let (tick, mono) = clock::point();
        self.info.clock.tick1 = tick;
        self.info.clock.mono1_ns = mono;
    }

    /// Refreshes the clock's second point, the lost count and the end mark.
    pub fn refresh(&mut self, ended: bool) {
        self.take_clock_point();
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        self.info.lost = super::thread::all().map(|t| t.lost_total.load(relaxed)).sum();
        self.info.untraced = super::thread::all().map(|t| t.untraced.load(relaxed)).sum();
        self.info.ended = ended;
        (self.info.unpatched, self.info.trap_sites) = crate::bare::counts();
        // The events the writer could not write (a full disk) are lost too.
        let files = super::writer::files();
        self.info.lost += files.unwritten;
        if let Some(error) = files.error.clone() {
            self.note(error);
        }
        let nothing = files.bytes == 0;
        drop(files);
        if ended && nothing && self.recorded_nothing() {
            self.withdraw();
            return;
        }
        let _ = self.write_info();
    }

    /// Whether this image is a child's that wrote no event and lost or
    /// left out none: its directory would only add a name to read past (a
    /// build's hundreds of shells). The profiler's table is written apart:
    /// its children stay.
    fn recorded_nothing(&self) -> bool {
        self.child
            && self.info.lost == 0
            && self.info.untraced == 0
            && self.info.write_error.is_none()
            && self.info.tracer != "profile"
    }

    /// Removes this image's directory, and says so in the data
    /// directory's list of processes that recorded nothing.
    fn withdraw(&mut self) {
        self.functions = None;
        if std::fs::remove_dir_all(&self.dir).is_err() {
            let _ = self.write_info();
            return;
        }
        self.withdrawn = true;
        let line = format!(
            "{}\t{}\n",
            self.info.pid,
            self.info.argv.join(" ").replace(['\t', '\n'], " ")
        );
        // One write of one line, appended: lines of processes ending
        // together do not mix.
        let quiet = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join(layout::QUIET));
        let _ = quiet.and_then(|mut f| f.write_all(line.as_bytes()));
    }

    /// After a failed `exec`, the process goes on: its directory comes
    /// back if it was withdrawn, with every function written again.
    pub fn restore(&mut self) {
        if !std::mem::take(&mut self.withdrawn) {
            return;
        }
        if std::fs::create_dir(&self.dir).is_err() {
            return;
        }
        self.functions = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(layout::FUNCTIONS))
            .ok();
        self.written = 0;
        let _ = self.write_info();
    }

    /// The calibration so far: ticks per nanosecond.
    pub fn ticks_per_ns(&self) -> f64 {
        let c = &self.info.clock;
        clock::ticks_per_ns((c.tick0, c.mono0_ns), (c.tick1, c.mono1_ns))
    }
}

/// Refreshes `process.json` (the writer does it every second).
pub fn refresh(ended: bool) {
    if let Some(s) = lock().as_mut() {
        s.refresh(ended);
    }
}
