//! Options shared by several subcommands, checked at the edge: the record
//! options (`record`, `live`) and the display options (`replay`, `live`).
//! Every value is validated by clap's parser so that a bad one is a
//! one-line usage error.

use std::ffi::OsString;
use std::path::PathBuf;

use fntrace_filter::Filter;

use crate::cmd::record::{Options, Request};
use fntrace_format::args::ArgSpec;
use fntrace_format::settings;
use fntrace_format::units::{parse_duration, parse_size};

/// The tracers (`--tracer`), named as `fntrace_format::settings` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Tracer {
    /// Every call's entry and exit, shown as a call graph (the default).
    #[value(name = settings::Tracer::Graph.name())]
    FunctionGraph,
    /// Function entries with their callers, like the kernel's `function`.
    #[value(name = settings::Tracer::Function.name())]
    Function,
    /// Per-function counts and times only, kept in memory.
    #[value(name = settings::Tracer::Profile.name())]
    Profile,
}

impl Tracer {
    pub fn as_str(self) -> &'static str {
        self.settings().name()
    }

    /// The runtime's name for it.
    pub fn settings(self) -> settings::Tracer {
        match self {
            Tracer::FunctionGraph => settings::Tracer::Graph,
            Tracer::Function => settings::Tracer::Function,
            Tracer::Profile => settings::Tracer::Profile,
        }
    }
}

/// The options of `record` and `live` that say what to record.
#[derive(clap::Args, Debug, Clone)]
pub struct RecordFlags {
    /// Trace only these functions and what they call (uftrace's -F; ftrace filter syntax: name, glob*, !name, PATTERN:mod:MODULE); repeatable.
    #[arg(short = 'F', long = "filter", value_name = "PATTERN", value_parser = pattern)]
    filter: Vec<String>,
    /// Patch only these functions: they alone are traced (the kernel's set_ftrace_filter, uftrace's -P); repeatable.
    #[arg(short = 'P', long = "patch", value_name = "PATTERN", value_parser = pattern)]
    patch: Vec<String>,
    /// Do not trace these functions (nor what they call); repeatable.
    #[arg(short = 'N', long = "notrace", value_name = "PATTERN", value_parser = pattern)]
    notrace: Vec<String>,
    /// FUNC@ACTION[,ACTION...]: when FUNC is entered, do ACTION (trace_on, trace_off, depth=N); repeatable.
    #[arg(short = 'T', long = "trigger", value_name = "TRIGGER", value_parser = trigger)]
    trigger: Vec<String>,
    /// Record calls nested at most N deep.
    #[arg(short = 'D', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    depth: Option<u32>,
    /// Keep only calls at least this long (100ns, 2us, 1.5ms, 1s; a bare number is ns).
    #[arg(short = 't', long = "time-filter", value_name = "DURATION", value_parser = parse_duration)]
    time_filter: Option<u64>,
    /// Trace only inside these functions (the kernel's set_graph_function); repeatable.
    #[arg(long = "graph-function", value_name = "FUNC", value_parser = pattern)]
    graph_function: Vec<String>,
    /// What to record.
    #[arg(long, value_enum, default_value_t = Tracer::FunctionGraph)]
    tracer: Tracer,
    /// Buffer size per thread (bytes, or 512K, 4M; at least 64K, at most a quarter of the memory).
    #[arg(long = "buffer-size", value_name = "SIZE", value_parser = buffer_size)]
    buffer_size: Option<u64>,
    /// Keep only the last SIZE of events per thread, written at exit (no streaming).
    #[arg(long = "flight-recorder", value_name = "SIZE", value_parser = buffer_size)]
    flight_recorder: Option<u64>,
    /// Drop events (and count them) when a thread's buffers are full, instead of making it wait for the writer.
    #[arg(long)]
    lossy: bool,
    /// Run even if no patchable function is found, or a pattern matches none (code in libraries loaded later).
    #[arg(long)]
    force: bool,
    /// Do not trace the program's calls into shared libraries (traced by default, as printf(), malloc()).
    #[arg(long = "no-libcall", conflicts_with = "nest_libcall")]
    no_libcall: bool,
    /// Trace calls from one shared library into another too.
    #[arg(long = "nest-libcall")]
    nest_libcall: bool,
    /// FUNC@SPEC: record arguments of FUNC (uftrace syntax: arg1/d32, arg2/s, fparg1, arg7%stack+1, retval/x); repeatable.
    #[arg(short = 'A', long = "argument", value_name = "SPEC", value_parser = arg_spec)]
    argument: Vec<ArgSpec>,
    /// FUNC@retval[/FORMAT]: record the return value of FUNC (retval/d32, retval/s, retval/f); repeatable.
    #[arg(short = 'R', long = "retval", value_name = "SPEC", value_parser = retval_spec)]
    retval: Vec<ArgSpec>,
    /// Record the arguments and return values of every traced function its DWARF (-g) describes, and of common libc functions.
    #[arg(short = 'a', long = "auto-args")]
    auto_args: bool,
    /// Trace the command only, not the processes it starts (they run untraced and write nothing).
    #[arg(long = "no-follow")]
    no_follow: bool,
    /// Keep each function's source file and line (from DWARF, -g) in the data directory, for the readers' --srcline (live: and show them).
    #[arg(long)]
    srcline: bool,
}

impl RecordFlags {
    /// `--srcline`.
    pub fn srcline(&self) -> bool {
        self.srcline
    }
}

/// `-A`: a spec of `fntrace_format::args`, with a valid pattern.
fn arg_spec(text: &str) -> Result<ArgSpec, String> {
    let spec = ArgSpec::parse(text).map_err(|e| e.to_string())?;
    pattern(&spec.pattern)?;
    Ok(spec)
}

/// `-R`: as `-A`, with the return value only.
fn retval_spec(text: &str) -> Result<ArgSpec, String> {
    let spec = arg_spec(text)?;
    if !spec.args.is_empty() || spec.retval.is_none() {
        return Err(format!(
            "'{text}': -R takes FUNC@retval[/FORMAT] (arguments go to -A)"
        ));
    }
    Ok(spec)
}

/// The specs of `-A` and `-R`, one per pattern (in the order first
/// given), as the runtime takes them.
fn merged_specs(specs: impl IntoIterator<Item = ArgSpec>) -> Vec<String> {
    let mut out: Vec<ArgSpec> = Vec::new();
    for spec in specs {
        match out.iter_mut().find(|s| s.pattern == spec.pattern) {
            Some(s) => s.merge(&spec),
            None => out.push(spec),
        }
    }
    out.iter().map(ToString::to_string).collect()
}

impl RecordFlags {
    /// What of `-A`, `-R` and `-a` these options cannot record, said as a
    /// warning (the recording goes on without it): nothing lost silently.
    pub fn values_not_recorded(&self) -> Option<&'static str> {
        let args = self.argument.iter().any(|s| !s.args.is_empty()) || self.auto_args;
        let rets = !self.retval.is_empty() || self.argument.iter().any(|s| s.retval.is_some());
        if !args && !rets {
            return None;
        }
        match self.tracer {
            Tracer::Profile => Some("the profile tracer keeps counts and times only: -A, -R and -a record nothing"),
            Tracer::Function if rets => {
                Some("the function tracer records entries only: return values (-R) are not recorded")
            }
            _ if self.time_filter.is_some() && args => Some(
                "--time-filter records each call whole, at its end: its arguments (-A, -a) are not recorded, its return value is",
            ),
            _ => None,
        }
    }

    /// The request to record `command` into `output`.
    pub fn into_request(self, command: Vec<OsString>, output: PathBuf) -> Request {
        if let Some(why) = self.values_not_recorded() {
            eprintln!("fntrace: warning: {why}");
        }
        Request {
            output,
            tracer: self.tracer,
            options: Options {
                filter: self.filter,
                patch: self.patch,
                notrace: self.notrace,
                triggers: self.trigger,
                depth: self.depth,
                time_filter_ns: self.time_filter,
                graph_functions: self.graph_function,
                buffer_size: self.buffer_size,
                flight_recorder: self.flight_recorder,
                lossy: self.lossy,
                force: self.force,
                libcall: if self.no_libcall {
                    settings::Libcall::None
                } else if self.nest_libcall {
                    settings::Libcall::Nested
                } else if cfg!(target_arch = "x86_64") {
                    settings::Libcall::Program
                } else {
                    // Library calls are traced through their entry code
                    // (bare sites), which only the x86-64 runtime patches.
                    settings::Libcall::None
                },
                args: merged_specs(self.argument.into_iter().chain(self.retval)),
                auto_args: self.auto_args,
                no_follow: self.no_follow,
                srcline: self.srcline,
            },
            command,
        }
    }
}

/// When to colour the output (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

impl Color {
    /// Whether to colour standard output: `auto` colours a terminal unless
    /// `NO_COLOR` is set.
    pub fn enabled(self) -> bool {
        use std::io::IsTerminal;
        self.enabled_for(std::io::stdout().is_terminal())
    }

    /// Whether to colour an output that is a terminal (`terminal`) or not.
    pub fn enabled_for(self, terminal: bool) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && terminal,
        }
    }
}

/// How `replay` and `live` show a trace.
#[derive(clap::Args, Debug, Clone)]
pub struct DisplayFlags {
    /// Show only these threads; repeatable.
    #[arg(long = "tid", value_name = "TID")]
    pub tid: Vec<u32>,
    /// Colour durations by their mark.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub color: Color,
    #[command(flatten)]
    pub demangle: crate::trace::DemangleFlags,
    /// The columns before each function, in order (uftrace's -f): tid, duration, time, elapsed, delta, addr.
    #[arg(
        short = 'f',
        long = "output-fields",
        value_enum,
        value_delimiter = ',',
        value_name = "FIELD",
        default_value = "tid,duration"
    )]
    pub fields: Vec<crate::columns::Field>,
}

/// A function pattern for the runtime: valid ftrace filter syntax, without
/// the characters that separate patterns in `FNTRACE_*` variables
/// (`fntrace_format::settings::separates`).
pub fn pattern(text: &str) -> Result<String, String> {
    if text.contains(settings::separates) {
        return Err(format!(
            "pattern '{text}' contains a comma, semicolon or space (patterns are globs: use '?' or '*')"
        ));
    }
    filter_pattern(text)
}

/// A pattern for a reader (`replay -F`): valid ftrace filter syntax.
pub fn filter_pattern(text: &str) -> Result<String, String> {
    Filter::parse(&[text]).map_err(|e| e.to_string())?;
    Ok(text.to_string())
}

/// A per-thread buffer size within the limits of this machine
/// (`fntrace_format::limits`).
pub fn buffer_size(text: &str) -> Result<u64, String> {
    let size = parse_size(text).map_err(|e| e.to_string())?;
    fntrace_format::limits::check_buffer(size).map_err(|e| e.to_string())
}

/// A trigger `FUNC@ACTION[,ACTION...]` with actions `trace_on`,
/// `trace_off`, `depth=N` (N >= 1).
pub fn trigger(text: &str) -> Result<String, String> {
    let bad = |why: &str| {
        format!("bad trigger '{text}': {why} (expected FUNC@ACTION[,ACTION...] with trace_on, trace_off, depth=N)")
    };
    let (function, actions) = text.rsplit_once('@').ok_or_else(|| bad("no '@'"))?;
    if function.is_empty() {
        return Err(bad("no function"));
    }
    pattern(function).map_err(|e| bad(&e))?;
    if actions.is_empty() {
        return Err(bad("no action"));
    }
    for action in actions.split(',') {
        match action.split_once('=') {
            None if action == "trace_on" || action == "trace_off" => {}
            Some(("depth", n)) if n.parse::<u32>().is_ok_and(|n| n >= 1) && !n.starts_with('+') => {}
            Some(("depth", _)) => return Err(bad("depth=N needs a number N >= 1")),
            _ => return Err(bad(&format!("unknown action '{action}'"))),
        }
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers() {
        assert!(trigger("main@trace_off").is_ok());
        assert!(trigger("work*@trace_on,depth=3").is_ok());
        for bad in [
            "main",
            "@trace_on",
            "main@",
            "main@trace",
            "main@depth=0",
            "main@depth=x",
            "main@depth=+1",
            "main@trace_on,",
            "a b@trace_on",
            "a;b@trace_on",
            "[@trace_on",
        ] {
            assert!(trigger(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn argument_specs() {
        assert!(arg_spec("add@arg1/i32,arg2/i32").is_ok());
        assert!(arg_spec("add@arg0").unwrap_err().contains("count from 1"));
        assert!(arg_spec("a b@arg1").is_err());
        assert!(retval_spec("add@retval/i32").is_ok());
        assert!(retval_spec("add@arg1").unwrap_err().contains("-R takes"));
        let merged = merged_specs([
            arg_spec("add@arg1/i32").unwrap(),
            arg_spec("f@arg1/s").unwrap(),
            retval_spec("add@retval/i32").unwrap(),
        ]);
        assert_eq!(merged, ["add@arg1/d32%rdi,retval/d32", "f@arg1/s64%rdi"]);
    }

    #[test]
    fn patterns() {
        assert!(pattern("foo*").is_ok());
        assert!(pattern("!foo:mod:libm").is_ok());
        assert!(pattern("a,b").is_err());
        assert!(pattern("f(int, int)").is_err());
        assert!(pattern("[").is_err());
        assert!(pattern("").is_err());
    }
}
