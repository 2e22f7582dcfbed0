//! `fntrace replay [DIR]`: the recorded calls in the kernel's
//! function_graph layout, the threads of each process merged by time
//! (uftrace replay, `trace-cmd report` of function_graph).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use fntrace_format::layout;
use fntrace_format::read::{Process, Trace};

use crate::funcgraph::{ProcessView, Style};
use crate::losses;
use crate::merge::Merge;
use crate::narrow::NarrowFlags;
use crate::nothing;
use crate::options::DisplayFlags;
use crate::trace::Demangle;
use crate::trace::{self, command_line};

const AFTER_HELP: &str = "\
Durations are in microseconds, marked as the kernel marks them:
  + more than 10 us   ! 100 us   # 1 ms   * 10 ms   @ 100 ms   $ 1 s
A call whose entry is immediately followed by its exit is one line;
'} /* f (unwound) */' closes a call left without returning (longjmp,
thread end). Lost events are shown where they were dropped; a call open
then closes as '} /* f (exit lost) */', without a duration (its exit may
be among them). A trace that lost anything says so on its first line,
'# the trace is incomplete: ...'. Several
processes are shown one after the other, each under a '# process' line.

Examples:
  fntrace replay
  fntrace replay -F 'parse_*' -N 'log_*' --tid 4321 other.data";

/// Show a recorded trace as a call graph.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The data directory.
    #[arg(default_value = layout::DEFAULT_DIR)]
    dir: PathBuf,
    #[command(flatten)]
    display: DisplayFlags,
    #[command(flatten)]
    narrow: NarrowFlags,
    /// After each function, its source file and line (kept by record --srcline).
    #[arg(long)]
    srcline: bool,
    /// Each thread in a column of its own, to the right of the previous thread's (uftrace's --column-view).
    #[arg(long)]
    column_view: bool,
    /// With --column-view, how many levels apart the columns start.
    #[arg(long, value_name = "DEPTH", default_value_t = 8, requires = "column_view")]
    column_offset: usize,
}

/// What to show and how.
pub struct Settings {
    pub tids: Vec<u32>,
    pub color: bool,
    pub demangle: Demangle,
    /// `-f`.
    pub fields: Vec<crate::columns::Field>,
    /// `-F`, `-N`, `-D`...
    pub narrow: NarrowFlags,
    /// `--srcline`.
    pub srcline: bool,
    /// `--column-view`'s offset.
    pub column: Option<usize>,
}

impl Settings {
    pub fn new(display: &DisplayFlags, narrow: NarrowFlags) -> Settings {
        Settings {
            tids: display.tid.clone(),
            color: display.color.enabled(),
            demangle: display.demangle.mode(),
            fields: display.fields.clone(),
            narrow,
            srcline: false,
            column: None,
        }
    }
}

/// `fntrace replay`, writing to `out`.
pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut settings = Settings::new(&args.display, args.narrow);
    settings.srcline = args.srcline;
    settings.column = args.column_view.then_some(args.column_offset);
    replay(&args.dir, &settings, out)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the trace in `dir` to `out`.
pub fn replay(dir: &Path, settings: &Settings, out: &mut dyn Write) -> anyhow::Result<()> {
    let narrowing = settings.narrow.narrowing()?;
    let trace = trace::open(dir)?;
    trace::check_tids(&trace, &settings.tids)?;
    let selected = trace::select(&trace, &settings.tids);
    let width = selected
        .iter()
        .flat_map(|(_, tids)| tids.iter())
        .map(|t| t.to_string().len())
        .max()
        .unwrap_or(0)
        .max(4);
    let style = Style {
        color: settings.color,
        width,
        fields: settings.fields.clone(),
        srcline: settings.srcline,
        column: settings.column,
    };

    let mut damage = trace.damage.clone();
    if !any_events(&selected, &mut damage) {
        trace::warn_damage(&damage);
        return nothing::fail(nothing::no_events(&trace, dir));
    }
    // After: a trace with nothing to show says that, not that a pattern
    // matches none of its (absent) functions.
    settings
        .narrow
        .check_patterns(selected.iter().map(|(p, _)| *p), dir)?;
    let incomplete = losses::summary(&losses::scan(&selected), &trace, None);
    let mut out = BufWriter::new(out);
    if let Some(line) = incomplete {
        writeln!(out, "# {line}")?;
    }
    writeln!(out, "{}", style.header(is_function_tracer(&trace)))?;
    for (process, tids) in &selected {
        if selected.len() > 1 {
            writeln!(
                out,
                "# process {}: {} (pid {})",
                process.name,
                command_line(process),
                process.info.pid
            )?;
        }
        let threads = tids
            .iter()
            .map(|&t| (t, narrowing.events(process, || process.events(t))));
        let mut merge = Merge::new(threads.collect());
        let mut view = ProcessView::new(&style, process, merge.len(), settings.demangle);
        view.run(&mut out, &mut merge)?;
        damage.extend(merge.damage());
        damage.extend(view.notes(&merge));
    }
    out.flush()?;
    drop(out);
    trace::warn_damage(&damage);
    Ok(())
}

/// Whether a thread of `selected` has an event; when none has, their
/// damage notes are added to `damage`.
fn any_events(selected: &[(&Process, Vec<u32>)], damage: &mut Vec<String>) -> bool {
    let mut notes = Vec::new();
    for (process, tids) in selected {
        for &tid in tids {
            let mut events = process.events(tid);
            if events.next().is_some() {
                return true;
            }
            notes.extend(events.damage().map(str::to_string));
        }
    }
    damage.extend(notes);
    false
}

/// Whether the trace was recorded by the `function` tracer (entries with
/// their callers, no durations).
fn is_function_tracer(trace: &Trace) -> bool {
    match &trace.info {
        Some(info) if !info.tracer.is_empty() => info.tracer == "function",
        _ => !trace.processes.is_empty() && trace.processes.iter().all(|p| p.info.tracer == "function"),
    }
}
