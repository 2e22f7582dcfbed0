//! `fntrace flamegraph [DIR] [-o FILE] [--flamechart]`: an interactive SVG
//! flame graph of the trace's self times (Brendan Gregg's flame graphs,
//! drawn by the `inferno` crate), or a flame chart in time order.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use fntrace_format::layout;
use fntrace_format::read::Trace;
use inferno::flamegraph::{self, Options};

use crate::cmd::dump::selected;
use crate::export::progress::Progress;
use crate::export::sink::Sink;
use crate::export::{chart, folded};
use crate::losses;
use crate::narrow::NarrowFlags;
use crate::nothing;
use crate::trace::{self, command_line};

const AFTER_HELP: &str = "\
A flame graph shows every distinct call stack once, as wide as the time
spent in it (the folded stacks of 'fntrace dump --folded', in ns): stacks
merge over the whole trace and the threads, and siblings are sorted by
name, so x is not time. Click a frame to zoom, Ctrl-F to search.

--flamechart keeps time order instead: x is time, each frame one call.
The threads are laid out one after the other, each under a frame T<tid>
that spans its events. Calls narrower than 0.01% of the chart are drawn
as part of their caller (as a flame graph drops them), which keeps the SVG
small for long traces; the trace is read twice.

A trace that lost anything says so in the subtitle; a call whose exit was
lost has no self time (its time is unknown).

Examples:
  fntrace flamegraph -o fg.svg
  fntrace flamegraph --flamechart --tid 4321 -o chart.svg other.data";

/// Draw a flame graph (SVG).
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The data directory.
    #[arg(default_value = layout::DEFAULT_DIR)]
    dir: PathBuf,
    /// Write the SVG to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// A flame chart: calls in time order, not merged.
    #[arg(long)]
    flamechart: bool,
    /// Start each stack with its thread (T<tid>) instead of merging the threads.
    #[arg(long, conflicts_with = "flamechart")]
    per_thread: bool,
    /// The title (default: the command line).
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// Only these threads; repeatable.
    #[arg(long = "tid", value_name = "TID")]
    tid: Vec<u32>,
    #[command(flatten)]
    demangle: crate::trace::DemangleFlags,
    #[command(flatten)]
    narrow: NarrowFlags,
}

/// `fntrace flamegraph`, writing to `-o FILE` or else to `out`.
pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let narrowing = args.narrow.narrowing()?;
    let trace = trace::open(&args.dir)?;
    let threads = selected(&trace, &args.dir, &args.tid)?;
    args.narrow
        .check_patterns(threads.iter().map(|(p, _)| *p), &args.dir)?;
    let mut sink = Sink::create(args.output.as_deref(), out)?;
    let demangle = args.demangle.mode();

    let passes = if args.flamechart { 2 } else { 1 };
    let progress = Progress::new(&threads, narrowing, passes, "flamegraph");
    let (lines, events, damage, lost) = if args.flamechart {
        let chart = chart::collect(&threads, demangle, &progress);
        (chart.text(), chart.events, chart.damage, chart.losses)
    } else {
        let stacks = folded::collect(&threads, args.per_thread, demangle, &progress);
        let lines = stacks.lines().map(|lines| {
            lines
                .iter()
                .map(|(stack, ns)| format!("{stack} {ns}"))
                .collect::<Vec<_>>()
        });
        (lines, stacks.events, stacks.damage, stacks.losses)
    };
    progress.finish();
    trace::warn_damage(&trace.damage);
    trace::warn_damage(&damage);
    let lines = lines.map_err(|why| anyhow::anyhow!("{}: {why}", args.dir.display()))?;
    if !lines.iter().any(|l| !l.ends_with(" 0")) {
        return nothing::fail(nothing::no_durations(&trace, &args.dir, events));
    }

    let mut options = Options::default();
    options.title = args.title.unwrap_or_else(|| title(&trace));
    options.count_name = "ns".to_string();
    // Colours from the names, so that the same trace draws the same.
    options.hash = true;
    let incomplete = losses::summary(&lost, &trace, None);
    options.subtitle = incomplete.clone();
    if args.flamechart {
        options.flame_chart = true;
        let chart = "flame chart: time from left to right, threads one after the other";
        options.subtitle = Some(match &incomplete {
            Some(line) => format!("{chart}; {line}"),
            None => chart.into(),
        });
        // inferno reverses the lines of a flame chart (flamegraph.pl reads
        // its input backwards), so they go in last first.
        flamegraph::from_lines(&mut options, lines.iter().rev().map(String::as_str), sink.out())?;
    } else {
        flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), sink.out())?;
    }
    sink.commit()?;
    Ok(ExitCode::SUCCESS)
}

/// The command line of the run, or of its first process.
fn title(trace: &Trace) -> String {
    match &trace.info {
        Some(info) if !info.command.is_empty() => info.command.join(" "),
        _ => trace
            .processes
            .first()
            .map(command_line)
            .unwrap_or_else(|| "fntrace".into()),
    }
}
