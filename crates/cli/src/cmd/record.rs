//! `fntrace record [OPTIONS] -- COMMAND [ARGS...]`: runs a command with the
//! runtime preloaded and writes its trace to a data directory (uftrace
//! record, trace-cmd record).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{SystemTime, UNIX_EPOCH};
use std::{env, fs};

use anyhow::Context;
use fntrace_format::layout;
use fntrace_format::meta::{RunInfo, VERSION};
use fntrace_format::replace::replace;
use fntrace_format::settings::{self, Settings};
use serde::Serialize;

use crate::forward::Forwarder;
use crate::launch::{self, Ending, NotFound};
use crate::options::{RecordFlags, Tracer};
use crate::output;
use crate::unmatched;

const AFTER_HELP: &str = "\
The command runs with the runtime library (libfntrace_runtime.so, found
through $FNTRACE_RUNTIME, next to fntrace, in its deps/ or ../lib/fntrace/)
preloaded; fntrace exits with the command's exit status (128 + N when
signal N killed it). SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to fntrace
are passed on to the command, and fntrace waits for it. An existing data
directory is kept as DIR.old.

The program, or a library it loads, must have patchable sites: build it
with gcc -pg -mfentry, -fpatchable-function-entry=5, or clang
-fxray-instrument (see 'fntrace list --help'); and each pattern of -F, -N,
--graph-function and -T must match a patchable function of theirs.
--force skips these checks, for code in libraries the program dlopens.

Examples:
  fntrace record ./prog arg
  fntrace record -F 'parse_*' -t 10us -- ./prog
  fntrace record -T 'main@trace_off' -T 'work@trace_on,depth=3' ./prog";

/// Run a command and record a trace of its functions.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The data directory to write.
    #[arg(short, long, value_name = "DIR", default_value = layout::DEFAULT_DIR)]
    output: PathBuf,
    #[command(flatten)]
    flags: RecordFlags,
    /// The command to trace, and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// What the run was given, as `info.json` keeps it under `options`.
#[derive(Debug, Clone, Serialize)]
pub struct Options {
    /// `-F`: these functions and what they call.
    pub filter: Vec<String>,
    /// `-P`: only these functions, patched (the kernel's meaning).
    pub patch: Vec<String>,
    pub notrace: Vec<String>,
    pub triggers: Vec<String>,
    pub depth: Option<u32>,
    pub time_filter_ns: Option<u64>,
    pub graph_functions: Vec<String>,
    pub buffer_size: Option<u64>,
    pub flight_recorder: Option<u64>,
    pub lossy: bool,
    pub force: bool,
    /// Which library calls: `none`, `program` or `nested`.
    #[serde(serialize_with = "libcall_name")]
    pub libcall: fntrace_format::settings::Libcall,
    /// `-A` and `-R`: one spec per pattern (`fntrace_format::args`).
    pub args: Vec<String>,
    /// `-a`.
    pub auto_args: bool,
    /// `--no-follow`: the command's children are not traced.
    pub no_follow: bool,
    /// `--srcline`.
    pub srcline: bool,
}

fn libcall_name<S: serde::Serializer>(
    mode: &fntrace_format::settings::Libcall,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(mode.name())
}

/// A whole `record` request, after the edge.
#[derive(Debug, Clone)]
pub struct Request {
    pub output: PathBuf,
    pub tracer: Tracer,
    pub options: Options,
    pub command: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let request = args.flags.into_request(args.command, args.output);
    match record(&request)? {
        Ok(ending) => {
            say_losses(&request.output);
            Ok(ExitCode::from(ending.exit_code()))
        }
        Err(code) => Ok(code),
    }
}

/// Records `request` and tells how the command ended. The outer error is
/// fntrace's own failure; the inner one an exit status already explained
/// on stderr (command not found).
pub fn record(request: &Request) -> anyhow::Result<Result<Ending, ExitCode>> {
    let name = request.command[0].to_string_lossy().into_owned();
    let program = match launch::find_command(&request.command[0]) {
        Ok(path) => path,
        Err(e) => {
            let what = match &e {
                NotFound::Missing => "command not found",
                NotFound::NotExecutable(_) => "permission denied",
            };
            return Ok(Err(output::fail(e.exit_code(), &format!("{name}: {what}"))));
        }
    };
    launch::check_recording()?;
    check_arch(&program, &name)?;
    check_supported(request)?;
    if !request.options.force {
        check_sites(&program, &name, &request.options)?;
    }
    let runtime = launch::find_runtime()?;
    let dir = std::path::absolute(&request.output)
        .with_context(|| format!("{}: bad output directory", request.output.display()))?;
    let mut info = RunInfo {
        version: VERSION,
        command: request
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        cwd: env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        tracer: request.tracer.as_str().to_string(),
        options: serde_json::to_value(&request.options)?,
        start_unix_ns: unix_now_ns(),
        end_unix_ns: None,
        exit_status: None,
        signal: None,
        attach: None,
    };
    // From here on a terminating signal must not end fntrace before the
    // command: it is passed on to it (`forward.rs`).
    let signals = Forwarder::catch().context("cannot catch signals")?;
    prepare_dir(&dir, &info)?;

    let mut command = Command::new(&program);
    command.arg0(&request.command[0]).args(&request.command[1..]);
    // What the caller's environment says of the options is not the
    // recording's: the options given replace it, the others remove it.
    for key in settings::OPTIONS {
        command.env_remove(key);
    }
    command.envs(settings(request, &dir).to_env());
    command.env("LD_PRELOAD", launch::preload(&runtime));
    let mut child = match command.spawn() {
        Ok(child) => child,
        // As shells do: found but not executable (a script without `#!`, a
        // foreign binary) is 126.
        Err(e) => return Ok(Err(output::fail(126, &format!("{name}: cannot execute: {e}")))),
    };
    let ending = Ending::of(signals.wait(&mut child)?);

    info.end_unix_ns = Some(unix_now_ns());
    match ending {
        Ending::Exited(code) => info.exit_status = Some(code),
        Ending::Killed { signal, .. } => info.signal = Some(signal),
    }
    // The command's status goes on whether or not it could be written.
    if let Err(e) = write_info(&dir, &info) {
        eprintln!("fntrace: error: {e:#}: the command's end is not recorded in it");
    }
    if let Some(line) = ending.message(&name) {
        eprintln!("{line}");
    }
    if request.options.srcline {
        crate::srcline::keep(&dir);
    }
    if !has_process(&dir) {
        eprintln!(
            "fntrace: warning: nothing was recorded in {} (did the runtime {} load?)",
            request.output.display(),
            runtime.display()
        );
    }
    Ok(Ok(ending))
}

/// Prints [`losses`] of `dir`, if any: the last thing `record`, `live` (after
/// its replay) and `attach` print.
pub fn say_losses(dir: &Path) {
    if let Some(line) = unpatched(dir) {
        eprintln!("{line}");
    }
    if let Some(line) = losses(dir) {
        eprintln!("{line}");
    }
}

/// The line that names what a filter selected but the runtime could not
/// patch (functions no compiler prepared whose entry cannot be moved), and
/// those traced through a trap: `None` if there are none.
fn unpatched(dir: &Path) -> Option<String> {
    let trace = fntrace_format::read::open(dir).ok()?;
    let (refused, traps) = trace
        .processes
        .iter()
        .fold((0, 0), |(r, t), p| (r + p.info.unpatched, t + p.info.trap_sites));
    let mut parts = Vec::new();
    if refused > 0 {
        parts.push(format!(
            "{refused} selected function{} could not be patched and {} not traced ('fntrace list --sites' says why)",
            if refused == 1 { "" } else { "s" },
            if refused == 1 { "was" } else { "were" },
        ));
    }
    if traps > 0 {
        parts.push(format!(
            "{traps} function{} traced through a trap, a signal per call",
            if traps == 1 { "" } else { "s" },
        ));
    }
    (!parts.is_empty()).then(|| format!("fntrace: warning: {}", parts.join("; ")))
}

/// The last line of `record`, `live` and `attach` when the trace in `dir`
/// is incomplete: the readers' line (`losses.rs`), from one pass over
/// every thread's events (the files alone know of words never written);
/// `None` if it misses nothing, or cannot be read (the readers say why).
fn losses(dir: &Path) -> Option<String> {
    let trace = fntrace_format::read::open(dir).ok()?;
    let all = crate::losses::scan(&crate::trace::select(&trace, &[]));
    crate::losses::summary(&all, &trace, None).map(|line| format!("fntrace: warning: {line}"))
}

/// What the runtime patches and the functions it records inside (its
/// `filter` and `graph_functions`) for the options `o`: `-F` is uftrace's
/// subtree (the functions and what they call: recorded inside them, the
/// kernel's set_graph_function), `-P` the kernel's filter (only these
/// patched). A `-F` pattern naming a module asks for that module's own
/// functions, which are patched only when named: it is patched too,
/// beside everything else (`*`) unless `-P` says what. The `function`
/// tracer has no frames to record inside: its `-F` is its filter.
fn patched_and_graph(tracer: Tracer, o: &Options) -> (Vec<String>, Vec<String>) {
    let mut patch = o.patch.clone();
    let mut graph = o.graph_functions.clone();
    if tracer == Tracer::Function {
        patch.extend(o.filter.iter().cloned());
        return (patch, graph);
    }
    let modules: Vec<String> = o.filter.iter().filter(|p| p.contains(":mod:")).cloned().collect();
    if !modules.is_empty() && patch.is_empty() {
        patch.push("*".to_string());
    }
    patch.extend(modules);
    graph.extend(o.filter.iter().cloned());
    (patch, graph)
}

/// The runtime's settings for `request`, recording into `dir`
/// (`fntrace_format::settings`).
pub fn settings(request: &Request, dir: &Path) -> Settings {
    let o = &request.options;
    let (filter, graph_functions) = patched_and_graph(request.tracer, o);
    Settings {
        data: Some(dir.to_path_buf()),
        tracer: request.tracer.settings(),
        filter,
        notrace: o.notrace.clone(),
        graph_functions,
        depth: o.depth,
        time_filter_ns: o.time_filter_ns,
        triggers: o.triggers.clone(),
        buffer_size: o.buffer_size,
        flight: o.flight_recorder,
        lossy: o.lossy,
        libcall: o.libcall,
        args: o.args.clone(),
        auto_args: o.auto_args,
        no_follow: o.no_follow.then(std::process::id),
        recorder: Some(std::process::id()),
        ..Settings::default()
    }
}

/// Refuses what the runtime of this build cannot record yet: on AArch64,
/// values and library calls (`docs/CROSS.md`; by default library calls
/// are not asked for there).
fn check_supported(request: &Request) -> anyhow::Result<()> {
    if cfg!(target_arch = "x86_64") {
        return Ok(());
    }
    if request.options.libcall != fntrace_format::settings::Libcall::None {
        anyhow::bail!(
            "tracing library calls (--nest-libcall) is not built for {} yet",
            native_machine()
        );
    }
    if !request.options.args.is_empty() || request.options.auto_args {
        anyhow::bail!(
            "recording arguments and return values is not built for {} yet",
            native_machine()
        );
    }
    Ok(())
}

/// The machine this fntrace (and the runtime it preloads) is built for.
fn native_machine() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "AArch64"
    } else {
        "x86-64"
    }
}

/// Refuses, before anything is written, an ELF program of another
/// architecture than the runtime's, this build's (`fntrace list` reads
/// MIPS and AArch64 files, and their plans run in `crates/emu`).
fn check_arch(program: &Path, name: &str) -> anyhow::Result<()> {
    let mut header = [0u8; 20];
    let read = fs::File::open(program).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut header));
    if read.is_err() || header[..4] != *b"\x7fELF" {
        return Ok(());
    }
    match fntrace_inject::machine(&header) {
        None => Ok(()),
        Some(machine) => anyhow::bail!(
            "{name} is for {machine}; this fntrace records {} programs ('fntrace list' reads its sites)",
            native_machine()
        ),
    }
}

/// Fails when `program` is an ELF file without patchable sites, in it or
/// in the libraries it loads: nothing of it could be traced; or when a
/// function pattern of `options` matches none of their patchable functions
/// (a typo would record nothing). The libraries are looked at only when
/// the program alone does not do. Other files (scripts) are left to the
/// kernel.
fn check_sites(program: &Path, name: &str, options: &Options) -> anyhow::Result<()> {
    let data = output::read_input(program)?;
    if !data.starts_with(b"\x7fELF") {
        return Ok(());
    }
    let binary = match fntrace_sites::discover_file(program, &data) {
        Ok(binary) => binary,
        Err(e) => {
            eprintln!("fntrace: warning: {name}: cannot look for patchable sites: {e}");
            return Ok(());
        }
    };
    let libcalls = options.libcall != fntrace_format::settings::Libcall::None;
    let calls = unmatched::calls_in(&data, libcalls);
    drop(data);
    let mut modules = Vec::new();
    if !binary.sites.is_empty() {
        modules.push(unmatched::Module::of_file(program, binary, calls));
        if unmatched::first(options, &modules).is_none() {
            return Ok(());
        }
    }
    modules.extend(unmatched::libraries_of(
        program,
        unmatched::names_modules(options),
    ));
    if modules.is_empty() {
        anyhow::bail!(
            "{name}: no patchable sites (no function symbols or unwind data; or build it with gcc -pg \
             -mfentry, -fpatchable-function-entry=5 or clang -fxray-instrument; see 'fntrace list --help'; \
             --force to run it anyway)"
        );
    }
    if let Some((option, pattern)) = unmatched::first(options, &modules) {
        anyhow::bail!(
            "{option} '{pattern}' matches no function of {name} or the libraries it loads \
             (see 'fntrace list {name}'; --force to record anyway, for functions of libraries it dlopens)"
        );
    }
    Ok(())
}

/// Makes `dir` a fresh data directory holding `info.json`. An existing data
/// directory becomes `DIR.old` (an older `DIR.old` is removed) once the new
/// one is ready; anything else in the way is an error.
pub fn prepare_dir(dir: &Path, info: &RunInfo) -> anyhow::Result<()> {
    let shown = dir.display();
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let name = dir
        .file_name()
        .with_context(|| format!("{shown}: bad output directory"))?
        .to_string_lossy()
        .into_owned();
    let old = match fs::symlink_metadata(dir) {
        Err(_) => false,
        Ok(meta) if meta.is_dir() && is_data_dir(dir) => true,
        Ok(meta) if meta.is_dir() && fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none()) => {
            fs::remove_dir(dir).with_context(|| format!("cannot replace {shown}"))?;
            false
        }
        Ok(_) => anyhow::bail!("{shown} exists and is not a fntrace data directory"),
    };
    let fresh = parent.join(format!(".{name}.fntrace-{}.tmp", std::process::id()));
    let _ = fs::remove_dir_all(&fresh);
    fs::create_dir(&fresh).with_context(|| format!("cannot create {}", fresh.display()))?;
    let made = (|| {
        write_info(&fresh, info)?;
        if old {
            let backup = parent.join(format!("{name}.old"));
            if fs::symlink_metadata(&backup).is_ok() {
                fs::remove_dir_all(&backup).with_context(|| format!("cannot remove {}", backup.display()))?;
            }
            fs::rename(dir, &backup)
                .with_context(|| format!("cannot rename {shown} to {}", backup.display()))?;
        }
        fs::rename(&fresh, dir).with_context(|| format!("cannot create {shown}"))
    })();
    if made.is_err() {
        let _ = fs::remove_dir_all(&fresh);
    }
    made
}

/// A directory `record` made: it has `info.json` or `p*/` directories.
fn is_data_dir(dir: &Path) -> bool {
    dir.join(layout::INFO).is_file() || has_process(dir)
}

/// Whether the runtime wrote a process directory.
fn has_process(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            layout::parse_process_dir(&e.file_name().to_string_lossy()).is_some()
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
    })
}

/// Writes `info.json` through a temporary file and `rename`, or in place
/// when there is no room for a new file (`fntrace_format::replace`).
pub fn write_info(dir: &Path, info: &RunInfo) -> anyhow::Result<()> {
    let path = dir.join(layout::INFO);
    replace(&path, info.to_json().as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

/// Now, in nanoseconds since the Unix epoch.
pub fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
