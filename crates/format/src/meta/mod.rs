//! The descriptive files of a data directory: `info.json` ([`RunInfo`]),
//! `process.json` ([`ProcessInfo`], with its [`Clock`] and [`ModuleInfo`]s),
//! the lines of `functions.tsv` ([`FunctionEntry`]) and of `profile.tsv`
//! ([`ProfileRow`]).
//!
//! The JSON structs serialize exactly as `docs/FORMAT.md` shows them. When
//! read, unknown fields are ignored and missing fields take their default
//! (`null`, 0, empty), except the ones a reader cannot do without:
//! `version` in both files, and `pid` and `clock` in `process.json`.

mod clock;
mod tables;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use clock::{Clock, MIN_CALIBRATION_NS, SOURCE_MONOTONIC, SOURCE_TSC};
pub use tables::{FunctionEntry, ProfileRow};

/// The version of `info.json` and `process.json` this crate writes and
/// reads.
pub const VERSION: u32 = 1;

/// `info.json`: the run, written by `fntrace record` before the command
/// starts and completed after it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The format version ([`VERSION`]).
    pub version: u32,
    /// The command line that was run.
    #[serde(default)]
    pub command: Vec<String>,
    /// The working directory it was run in (absolute).
    #[serde(default)]
    pub cwd: String,
    /// The tracer: `function_graph`, `function` or `profile`.
    #[serde(default)]
    pub tracer: String,
    /// What `fntrace record` was given, as the CLI chooses to write it.
    #[serde(default)]
    pub options: serde_json::Value,
    /// When the command started (Unix time, ns).
    #[serde(default)]
    pub start_unix_ns: u64,
    /// When the command ended; `None` until it did.
    #[serde(default)]
    pub end_unix_ns: Option<u64>,
    /// The command's exit status, if it exited.
    #[serde(default)]
    pub exit_status: Option<i32>,
    /// The signal that killed the command, if one did.
    #[serde(default)]
    pub signal: Option<i32>,
    /// For `fntrace attach`: how the attach and the detach went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachInfo>,
}

/// `info.json`'s `attach`: a recording of a process that was already
/// running (`fntrace attach`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AttachInfo {
    /// The process.
    pub pid: u32,
    /// The thread that was stopped to load the runtime.
    #[serde(default)]
    pub tid: u32,
    /// The longest time the injected thread was stopped by ptrace (ns); the
    /// threads that meet a breakpoint of the live patching are not counted.
    #[serde(default)]
    pub longest_pause_ns: u64,
    /// The runtime was loaded by this attach (false: it was there from an
    /// earlier one).
    #[serde(default)]
    pub loaded: bool,
    /// From the start of `fntrace attach` to recording (ns).
    #[serde(default)]
    pub attach_ns: u64,
    /// Of which the runtime's set-up in the process, while it ran (ns).
    #[serde(default)]
    pub setup_ns: u64,
    /// Patchable sites in the process, and those patched at start.
    #[serde(default)]
    pub sites: u64,
    /// Sites patched at the start.
    #[serde(default)]
    pub patched: u64,
    /// How long the detach took (ns); `None` if it did not happen.
    #[serde(default)]
    pub detach_ns: Option<u64>,
    /// Sites given their original bytes back at the detach.
    #[serde(default)]
    pub restored: Option<u64>,
    /// Why the recording ended: `interrupt`, `duration`, `exit`, `detached`
    /// (by `fntrace ctl PID detach`).
    #[serde(default)]
    pub ended_by: String,
}

/// One loaded module (executable or shared library) of a process.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ModuleInfo {
    /// The module's path.
    pub path: String,
    /// The load bias: runtime address minus file address.
    #[serde(default)]
    pub bias: u64,
    /// The patchable sites found in it.
    #[serde(default)]
    pub sites: u64,
}

/// `process.json`: one traced process image, written by the runtime at
/// start-up and rewritten ([`replace`](crate::replace::replace): through a
/// temporary file and `rename`, in place on a full disk) when the clock
/// calibration is refreshed and at exit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// The format version ([`VERSION`]).
    pub version: u32,
    /// The process id.
    pub pid: u32,
    /// The parent's process id.
    #[serde(default)]
    pub ppid: u32,
    /// The parent's directory name (`p123`) when the parent was traced too.
    #[serde(default)]
    pub parent: Option<String>,
    /// The executable (absolute path).
    #[serde(default)]
    pub exe: String,
    /// The program's arguments, `argv[0]` included.
    #[serde(default)]
    pub argv: Vec<String>,
    /// The tracer that recorded it.
    #[serde(default)]
    pub tracer: String,
    /// When the image started (Unix time, ns).
    #[serde(default)]
    pub start_unix_ns: u64,
    /// How event ticks convert to nanoseconds.
    pub clock: Clock,
    /// Patchable sites found in all modules.
    #[serde(default)]
    pub sites: u64,
    /// Sites patched to record events.
    #[serde(default)]
    pub patched: u64,
    /// Sites per instrumentation kind (`fentry`, `mcount`, `patchable`, ...).
    #[serde(default)]
    pub instrumentation: BTreeMap<String, u64>,
    /// The modules loaded so far.
    #[serde(default)]
    pub modules: Vec<ModuleInfo>,
    /// Events dropped over all threads.
    #[serde(default)]
    pub lost: u64,
    /// Calls not traced over all threads: a signal handler called them
    /// while its thread was inside the tracer, or the shadow stack was full.
    #[serde(default)]
    pub untraced: u64,
    /// Functions no compiler prepared that a filter selected but that
    /// could not be patched (`fntrace list --sites` says why): not traced.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpatched: u64,
    /// Functions no compiler prepared traced through a trap (an `int3` per
    /// call: correct, slower).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trap_sites: u64,
    /// Whether the runtime wrote this file at exit (`false`: the process is
    /// running, or died without the runtime's exit handler).
    #[serde(default)]
    pub ended: bool,
    /// The first error writing this process's trace (a full disk): the
    /// events that could not be written are counted in `lost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_error: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Default for RunInfo {
    /// An empty run of the current [`VERSION`].
    fn default() -> Self {
        RunInfo {
            version: VERSION,
            command: Vec::new(),
            cwd: String::new(),
            tracer: String::new(),
            options: serde_json::Value::Null,
            start_unix_ns: 0,
            end_unix_ns: None,
            exit_status: None,
            signal: None,
            attach: None,
        }
    }
}

impl Default for ProcessInfo {
    /// An empty process of the current [`VERSION`] with a `monotonic`
    /// clock at 0.
    fn default() -> Self {
        ProcessInfo {
            version: VERSION,
            pid: 0,
            ppid: 0,
            parent: None,
            exe: String::new(),
            argv: Vec::new(),
            tracer: String::new(),
            start_unix_ns: 0,
            clock: Clock::default(),
            sites: 0,
            patched: 0,
            instrumentation: BTreeMap::new(),
            modules: Vec::new(),
            lost: 0,
            untraced: 0,
            unpatched: 0,
            trap_sites: 0,
            ended: false,
            write_error: None,
        }
    }
}

impl RunInfo {
    /// Parses `info.json`; the error is serde_json's one-line message.
    pub fn from_json(text: &str) -> Result<RunInfo, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The JSON text of this run (pretty, with a final newline).
    pub fn to_json(&self) -> String {
        to_json(self)
    }
}

impl ProcessInfo {
    /// Parses `process.json`; the error is serde_json's one-line message.
    pub fn from_json(text: &str) -> Result<ProcessInfo, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The JSON text of this process (pretty, with a final newline).
    pub fn to_json(&self) -> String {
        to_json(self)
    }
}

fn to_json<T: Serialize>(value: &T) -> String {
    // These structs hold only strings, numbers, maps with string keys and
    // JSON values, so serializing them cannot fail.
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROCESS: &str = r#"{ "version": 1, "pid": 1, "ppid": 0, "parent": null, "exe": "/abs/prog",
      "argv": ["prog"], "tracer": "function_graph", "start_unix_ns": 0,
      "clock": { "source": "tsc", "tick0": 0, "mono0_ns": 0, "tick1": 0, "mono1_ns": 0 },
      "sites": 0, "patched": 0, "instrumentation": { "fentry": 0 },
      "modules": [ { "path": "/abs/prog", "bias": 0, "sites": 0 } ],
      "lost": 0, "ended": false }"#;

    const INFO: &str = r#"{ "version": 1, "command": ["./prog", "arg"], "cwd": "/abs",
      "tracer": "function_graph", "options": { "x": 1 },
      "start_unix_ns": 0, "end_unix_ns": 0, "exit_status": 0, "signal": null }"#;

    #[test]
    fn spec_examples_parse_and_round_trip() {
        let p = ProcessInfo::from_json(PROCESS).unwrap();
        assert_eq!(p.modules[0].path, "/abs/prog");
        assert_eq!(p.instrumentation["fentry"], 0);
        assert_eq!(p.clock.tsc_hz, None);
        assert_eq!(ProcessInfo::from_json(&p.to_json()).unwrap(), p);
        assert!(p.to_json().contains("\"parent\": null"));
        assert!(!p.to_json().contains("tsc_hz"));

        let i = RunInfo::from_json(INFO).unwrap();
        assert_eq!(i.command, ["./prog", "arg"]);
        assert_eq!((i.end_unix_ns, i.exit_status, i.signal), (Some(0), Some(0), None));
        assert_eq!(RunInfo::from_json(&i.to_json()).unwrap(), i);
    }

    #[test]
    fn unknown_fields_ignored_missing_defaulted() {
        let i = RunInfo::from_json(r#"{"version":1,"future":[1,2]}"#).unwrap();
        assert_eq!((i.end_unix_ns, i.options.is_null()), (None, true));
        let p = ProcessInfo::from_json(
            r#"{"version":1,"pid":9,"clock":{"source":"monotonic","tick0":0,"mono0_ns":0,"tick1":0,"mono1_ns":0,"new":1}}"#,
        )
        .unwrap();
        assert_eq!((p.pid, p.ended, p.modules.len()), (9, false, 0));
        assert!(RunInfo::from_json("{}").is_err());
        assert_eq!(RunInfo::default().version, VERSION);
        let d = ProcessInfo::default();
        assert_eq!((d.version, d.clock.source.as_str()), (VERSION, "monotonic"));
        assert!(ProcessInfo::from_json(r#"{"version":1,"pid":9}"#)
            .unwrap_err()
            .contains("clock"));
    }
}
