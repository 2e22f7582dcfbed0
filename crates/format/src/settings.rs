//! The settings the CLI gives the runtime: every `FNTRACE_*` variable's
//! name, and the tracer's settings as a typed [`Settings`] that `fntrace
//! record` puts in the environment ([`Settings::to_env`]), `fntrace attach`
//! writes in the settings file it hands the runtime (`KEY=VALUE` lines,
//! the same names), and the runtime reads back with the same code
//! ([`Settings::from_env`]). Lists of patterns are lists here: joined for
//! the environment and split again by [`patterns`] and [`triggers`], in
//! this file alone. The table of `docs/FORMAT.md` ("Environment between
//! `fntrace record` and the runtime") documents the values.
//!
//! [`Settings::from_env`] runs in the traced process before `main`: it
//! allocates only the values it keeps.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::limits::{check_buffer, BufferError};
use crate::units::{parse_bytes, UnitError};

/// The data directory (absolute); set, it starts the tracer.
pub const DATA: &str = "FNTRACE_DATA";
/// Which tracer: [`Tracer::name`].
pub const TRACER: &str = "FNTRACE_TRACER";
/// Patterns: trace only these functions (none: all).
pub const FILTER: &str = "FNTRACE_FILTER";
/// Patterns: never trace these.
pub const NOTRACE: &str = "FNTRACE_NOTRACE";
/// Patterns: trace only inside these functions.
pub const GRAPH_FUNCTION: &str = "FNTRACE_GRAPH_FUNCTION";
/// The deepest nesting of recorded calls (0: no limit).
pub const DEPTH: &str = "FNTRACE_DEPTH";
/// Nanoseconds: keep only calls at least this long.
pub const TIME_FILTER: &str = "FNTRACE_TIME_FILTER";
/// `FUNC@ACTION[,ACTION...]` items separated by `;`.
pub const TRIGGERS: &str = "FNTRACE_TRIGGERS";
/// Bytes of buffer per thread.
pub const BUFFER_SIZE: &str = "FNTRACE_BUFFER_SIZE";
/// Bytes per thread kept by the flight recorder.
pub const FLIGHT: &str = "FNTRACE_FLIGHT";
/// Set: a thread whose buffers are full drops events instead of waiting.
pub const LOSSY: &str = "FNTRACE_LOSSY";
/// The control socket of an attach session (the settings file only).
pub const CTL: &str = "FNTRACE_CTL";
/// The session this one continues (`parent` of `process.json`).
pub const PARENT_SESSION: &str = "FNTRACE_PARENT_SESSION";
/// Set: the tracer never uses its fast paths (for tests and comparisons).
pub const SLOW: &str = "FNTRACE_SLOW";
/// Library calls: [`Libcall::name`] (unset: `program`).
pub const LIBCALL: &str = "FNTRACE_LIBCALL";
/// Values to record: [`crate::args::ArgSpec`]s (`PATTERN@ITEM,...`)
/// separated by `;`.
pub const ARGS: &str = "FNTRACE_ARGS";
/// Set: record the arguments and return values of every traced function
/// that DWARF or a built-in prototype describes (`-a`).
pub const AUTO_ARGS: &str = "FNTRACE_AUTO_ARGS";
/// `--no-follow`: the process id of `fntrace record`. Only its child, the
/// command (through its `exec`s), is traced; the processes that child
/// forks or starts run untraced, and write nothing.
pub const NO_FOLLOW: &str = "FNTRACE_NO_FOLLOW";
/// The process id of `fntrace record`: a traced process whose parent it
/// is not is a child of the command; one that recorded nothing leaves no
/// directory (`docs/FORMAT.md`, `quiet.tsv`).
pub const RECORDER: &str = "FNTRACE_RECORDER";

/// The runtime library the CLI preloads or injects (read by the CLI).
pub const RUNTIME: &str = "FNTRACE_RUNTIME";
/// Read by the runtime alone (`docs/RUNTIME.md`): `1` or a file, the
/// counting client.
pub const COUNT: &str = "FNTRACE_COUNT";
/// Read by the runtime alone: `1`, the counting client saves every register.
pub const REGS: &str = "FNTRACE_REGS";
/// Read by the runtime alone: set, it prints its start-up accounting.
pub const VERBOSE: &str = "FNTRACE_VERBOSE";
/// Read by the runtime alone: set, it does nothing.
pub const DISABLE: &str = "FNTRACE_DISABLE";
/// Read by the runtime alone: `membarrier` or `mprotect`, the sync it uses.
pub const SYNC: &str = "FNTRACE_SYNC";
/// Read by the runtime alone: `monotonic` forces that clock.
pub const CLOCK: &str = "FNTRACE_CLOCK";
/// Read by the runtime alone: `N` skips the first N punned displacements.
pub const PUN_FROM: &str = "FNTRACE_PUN_FROM";

/// The variables `fntrace record` sets from its options: those it is not
/// given are removed from the command's environment, so that one left in
/// the caller's environment does not change the recording.
pub const OPTIONS: [&str; 16] = [
    DATA,
    TRACER,
    FILTER,
    NOTRACE,
    GRAPH_FUNCTION,
    DEPTH,
    TIME_FILTER,
    TRIGGERS,
    BUFFER_SIZE,
    FLIGHT,
    LOSSY,
    LIBCALL,
    ARGS,
    AUTO_ARGS,
    NO_FOLLOW,
    RECORDER,
];

/// Which calls into shared libraries are traced (uftrace's default,
/// `--no-libcall` and `--nest-libcall`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Libcall {
    /// None.
    None,
    /// The program's own calls into its libraries (the default).
    #[default]
    Program,
    /// Those, and every call from one library into another.
    Nested,
}

impl Libcall {
    /// Every mode.
    pub const ALL: [Libcall; 3] = [Libcall::None, Libcall::Program, Libcall::Nested];

    /// Its name ([`LIBCALL`]).
    pub const fn name(self) -> &'static str {
        match self {
            Libcall::None => "none",
            Libcall::Program => "program",
            Libcall::Nested => "nested",
        }
    }

    /// The mode named `name`.
    pub fn parse(name: &str) -> Option<Libcall> {
        Libcall::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Which tracer records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Tracer {
    /// Function entries with their callers, like the kernel's `function`.
    Function,
    /// Every call's entry and exit (the default).
    #[default]
    Graph,
    /// Per-function counts and times only.
    Profile,
}

impl Tracer {
    /// Every tracer.
    pub const ALL: [Tracer; 3] = [Tracer::Graph, Tracer::Function, Tracer::Profile];

    /// Its name (`--tracer`, [`TRACER`], `process.json`).
    pub const fn name(self) -> &'static str {
        match self {
            Tracer::Function => "function",
            Tracer::Graph => "function_graph",
            Tracer::Profile => "profile",
        }
    }

    /// The tracer named `name`.
    pub fn parse(name: &str) -> Option<Tracer> {
        Tracer::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// A setting the runtime cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// [`TRACER`] names no tracer.
    #[error("unknown tracer '{0}'")]
    Tracer(String),
    /// [`LIBCALL`] names no mode.
    #[error("unknown library-call mode '{0}' (none, program, nested)")]
    Libcall(String),
    /// [`ARGS`] holds a spec that does not parse.
    #[error(transparent)]
    Args(#[from] crate::args::SpecError),
    /// A number that does not parse.
    #[error("bad {0}")]
    Number(&'static str),
    /// A size that does not parse.
    #[error("{name}={text}: {source}")]
    Size {
        /// The variable.
        name: &'static str,
        /// Its value.
        text: String,
        /// Why.
        source: UnitError,
    },
    /// A buffer larger than a thread may map here (a smaller one than the
    /// minimum is raised to it by the runtime).
    #[error("{name}={text}: {source}")]
    Buffer {
        /// The variable.
        name: &'static str,
        /// Its value.
        text: String,
        /// Why.
        source: BufferError,
    },
}

/// The tracer's settings, as the CLI passes them to the runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// [`DATA`]: where to record (none: the tracer does not start).
    pub data: Option<PathBuf>,
    /// [`TRACER`].
    pub tracer: Tracer,
    /// [`FILTER`]: trace only these functions (empty: all).
    pub filter: Vec<String>,
    /// [`NOTRACE`]: never trace these.
    pub notrace: Vec<String>,
    /// [`GRAPH_FUNCTION`]: trace only inside these.
    pub graph_functions: Vec<String>,
    /// [`DEPTH`] (0 or none: no limit).
    pub depth: Option<u32>,
    /// [`TIME_FILTER`], in nanoseconds.
    pub time_filter_ns: Option<u64>,
    /// [`TRIGGERS`]: `FUNC@ACTION[,ACTION...]` each.
    pub triggers: Vec<String>,
    /// [`BUFFER_SIZE`], in bytes.
    pub buffer_size: Option<u64>,
    /// [`FLIGHT`], in bytes.
    pub flight: Option<u64>,
    /// [`LOSSY`].
    pub lossy: bool,
    /// [`CTL`]: the attach session's socket.
    pub ctl: Option<PathBuf>,
    /// [`PARENT_SESSION`].
    pub parent_session: Option<String>,
    /// [`SLOW`].
    pub slow: bool,
    /// [`LIBCALL`].
    pub libcall: Libcall,
    /// [`ARGS`]: what to record of which functions' values, one spec per
    /// pattern (as [`crate::args::ArgSpec`] writes them).
    pub args: Vec<String>,
    /// [`AUTO_ARGS`].
    pub auto_args: bool,
    /// [`NO_FOLLOW`].
    pub no_follow: Option<u32>,
    /// [`RECORDER`].
    pub recorder: Option<u32>,
}

impl Settings {
    /// Whether a pattern of these settings names a module
    /// (`PATTERN:mod:MODULE`, in a filter, notrace, graph function or
    /// trigger or argument spec).
    pub fn names_modules(&self) -> bool {
        [
            &self.filter,
            &self.notrace,
            &self.graph_functions,
            &self.triggers,
            &self.args,
        ]
        .into_iter()
        .flatten()
        .any(|p| p.contains(":mod:"))
    }

    /// The variables that say these settings; those left at their default
    /// are not in it (see [`OPTIONS`] for the ones to remove then).
    pub fn to_env(&self) -> Vec<(&'static str, OsString)> {
        let list = |v: &[String], sep: &str| (!v.is_empty()).then(|| OsString::from(v.join(sep)));
        let number = |n: Option<u64>| n.map(|n| OsString::from(n.to_string()));
        let flag = |on: bool| on.then(|| OsString::from("1"));
        let vars = [
            (DATA, self.data.as_ref().map(|d| d.as_os_str().to_os_string())),
            (TRACER, Some(self.tracer.name().into())),
            (FILTER, list(&self.filter, PATTERN_SEPARATOR)),
            (NOTRACE, list(&self.notrace, PATTERN_SEPARATOR)),
            (GRAPH_FUNCTION, list(&self.graph_functions, PATTERN_SEPARATOR)),
            (DEPTH, number(self.depth.map(u64::from))),
            (TIME_FILTER, number(self.time_filter_ns)),
            (TRIGGERS, list(&self.triggers, TRIGGER_SEPARATOR)),
            (BUFFER_SIZE, number(self.buffer_size)),
            (FLIGHT, number(self.flight)),
            (LOSSY, flag(self.lossy)),
            (CTL, self.ctl.as_ref().map(|c| c.as_os_str().to_os_string())),
            (PARENT_SESSION, self.parent_session.as_ref().map(OsString::from)),
            (
                LIBCALL,
                (self.libcall != Libcall::default()).then(|| self.libcall.name().into()),
            ),
            (SLOW, flag(self.slow)),
            (ARGS, list(&self.args, TRIGGER_SEPARATOR)),
            (AUTO_ARGS, flag(self.auto_args)),
            (NO_FOLLOW, number(self.no_follow.map(u64::from))),
            (RECORDER, number(self.recorder.map(u64::from))),
        ];
        vars.into_iter().filter_map(|(k, v)| Some((k, v?))).collect()
    }

    /// Reads the settings through `get` (a variable's value, `None` when it
    /// is not set: the caller decides whether an empty one counts).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let tracer = match get(TRACER) {
            None => Tracer::default(),
            Some(name) => Tracer::parse(&name).ok_or(SettingsError::Tracer(name))?,
        };
        let list = |name, split: fn(&str) -> Vec<String>| get(name).map_or_else(Vec::new, |v| split(&v));
        Ok(Settings {
            data: get(DATA).map(PathBuf::from),
            tracer,
            filter: list(FILTER, pattern_list),
            notrace: list(NOTRACE, pattern_list),
            graph_functions: list(GRAPH_FUNCTION, pattern_list),
            time_filter_ns: number(&get, TIME_FILTER)?,
            depth: number(&get, DEPTH)?,
            triggers: list(TRIGGERS, trigger_list),
            buffer_size: buffer(&get, BUFFER_SIZE)?,
            flight: buffer(&get, FLIGHT)?,
            lossy: get(LOSSY).is_some(),
            ctl: get(CTL).map(PathBuf::from),
            parent_session: get(PARENT_SESSION),
            slow: get(SLOW).is_some(),
            libcall: match get(LIBCALL) {
                None => Libcall::default(),
                Some(name) => Libcall::parse(&name).ok_or(SettingsError::Libcall(name))?,
            },
            args: {
                let args = list(ARGS, trigger_list);
                for spec in &args {
                    crate::args::ArgSpec::parse(spec)?;
                }
                args
            },
            auto_args: get(AUTO_ARGS).is_some(),
            no_follow: number(&get, NO_FOLLOW)?,
            recorder: number(&get, RECORDER)?,
        })
    }
}

/// A number variable.
fn number<T: std::str::FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<Option<T>, SettingsError> {
    get(name)
        .map(|v| v.parse().map_err(|_| SettingsError::Number(name)))
        .transpose()
}

/// [`BUFFER_SIZE`] or [`FLIGHT`]: a size no larger than a thread may map
/// on this machine (`limits`; a smaller one than the minimum is raised to
/// it by the runtime).
fn buffer(get: &impl Fn(&str) -> Option<String>, name: &'static str) -> Result<Option<u64>, SettingsError> {
    let Some(text) = get(name) else { return Ok(None) };
    let size = match parse_bytes(&text) {
        Ok(size) => size,
        Err(source) => return Err(SettingsError::Size { name, text, source }),
    };
    match check_buffer(size) {
        Err(source @ BufferError::TooLarge { .. }) => Err(SettingsError::Buffer { name, text, source }),
        _ => Ok(Some(size)),
    }
}

/// What [`Settings::to_env`] puts between patterns ([`patterns`] also
/// takes whitespace).
const PATTERN_SEPARATOR: &str = ",";
/// What it puts between triggers (whose actions are separated by commas).
const TRIGGER_SEPARATOR: &str = ";";

/// Whether `c` separates patterns or triggers in the settings: a pattern
/// passed to the runtime cannot contain it.
pub fn separates(c: char) -> bool {
    c.is_whitespace() || PATTERN_SEPARATOR.contains(c) || TRIGGER_SEPARATOR.contains(c)
}

/// The patterns of a list ([`FILTER`], [`NOTRACE`], [`GRAPH_FUNCTION`],
/// a `ctl` filter): separated by whitespace or commas.
pub fn patterns(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || PATTERN_SEPARATOR.contains(c))
        .filter(|p| !p.is_empty())
}

fn pattern_list(text: &str) -> Vec<String> {
    patterns(text).map(str::to_string).collect()
}

/// The triggers of [`TRIGGERS`]: separated by `;` (a trigger's actions are
/// separated by commas).
pub fn triggers(text: &str) -> impl Iterator<Item = &str> {
    text.split(TRIGGER_SEPARATOR)
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

fn trigger_list(text: &str) -> Vec<String> {
    triggers(text).map(str::to_string).collect()
}

#[cfg(test)]
mod tests;
