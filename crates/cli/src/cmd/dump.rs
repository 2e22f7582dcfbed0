//! `fntrace dump [DIR] --chrome|--perfetto|--folded|--firefox [-o FILE]`:
//! the trace converted for other tools (uftrace dump --chrome,
//! stackcollapse): Chrome Trace Event JSON for chrome://tracing and
//! Perfetto, Perfetto's own protobuf, folded stacks for flamegraph.pl,
//! inferno and speedscope, the Firefox Profiler's processed format.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use fntrace_format::layout;
use fntrace_format::read::{Process, Trace};

use crate::export::progress::Progress;
use crate::export::sink::Sink;
use crate::export::{chrome, firefox, folded, perfetto};
use crate::losses;
use crate::narrow::NarrowFlags;
use crate::nothing;
use crate::trace;

const AFTER_HELP: &str = "\
--chrome writes Chrome Trace Event JSON: one track per thread (pid = the
traced process, tid = the thread), each call a B/E pair, the B named by
its function (the E closes the thread's last open B: no name, no
category, 30% fewer bytes), ts/dur in microseconds; lost events, the function
tracer's entries (with their callers) and trigger marks are instant
events; --time-filter calls are nested B/E pairs as the others; a call open when events were
lost ends with 'exit_lost' in its args. 'metadata' holds the command line,
clock source, lost events, fntrace version and 'incomplete', the line that
says what the trace lost (null if nothing). Open it in
https://ui.perfetto.dev or chrome://tracing. It is written as the trace is
read: memory does not grow with the trace.

--perfetto writes Perfetto's native protobuf (a Trace of TracePackets,
built with Perfetto's own .proto definitions): a track per process and
thread, each call a slice begin/end with interned names and timestamps
delta-encoded on an incremental clock: several times smaller than the
JSON. Streams like --chrome. Open it in https://ui.perfetto.dev.

--firefox writes the Firefox Profiler's processed format: each call an
interval marker (Marker Chart), and samples carrying the call stack,
weighted by the nanoseconds until the next entry or exit (1 sample = 1 ns),
so the Call Tree and Flame Graph show exact inclusive and self times. The
profile is built in memory (about 150 bytes a call): past --max-calls
calls (default 10,000,000) it refuses, before building anything, and
says how to narrow the trace (-r, --tid, -F, -D, -t) or raise the limit.
Open it in https://profiler.firefox.com.

--folded writes one line per distinct call stack, 'main;a;leaf 1234': the
self time of its innermost function in nanoseconds, summed over the
trace, sorted by stack; the threads merge (--per-thread starts each stack
with its thread, 'T<tid>'). The values add up to the self times of
'fntrace report' (a call whose exit was lost counts none). What the trace
lost, if anything, is said on stderr (the format has no header). Feed it to flamegraph.pl or inferno-flamegraph, or see
'fntrace flamegraph'.

Output goes to standard output, or with -o to FILE: written as FILE.tmp,
renamed when complete, so a failure leaves no file. A progress bar shows
on a terminal.

Examples:
  fntrace dump --chrome -o trace.json
  fntrace dump --folded other.data | flamegraph.pl > fg.svg";

/// Convert a trace for other tools.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
#[command(group(clap::ArgGroup::new("format").required(true).args(["chrome", "perfetto", "folded", "firefox"])))]
pub struct Args {
    /// The data directory.
    #[arg(default_value = layout::DEFAULT_DIR)]
    dir: PathBuf,
    /// Write Chrome Trace Event JSON.
    #[arg(long)]
    chrome: bool,
    /// Write Perfetto's protobuf trace.
    #[arg(long)]
    perfetto: bool,
    /// Write folded stacks with self times (ns).
    #[arg(long)]
    folded: bool,
    /// Write a Firefox Profiler profile (JSON).
    #[arg(long)]
    firefox: bool,
    /// With --firefox: the most calls the profile (built in memory) may hold; 0: no limit.
    #[arg(long, value_name = "N", default_value_t = 10_000_000, requires = "firefox")]
    max_calls: u64,
    /// With --folded: start each stack with its thread (T<tid>).
    #[arg(long, conflicts_with = "chrome")]
    per_thread: bool,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Only these threads; repeatable.
    #[arg(long = "tid", value_name = "TID")]
    tid: Vec<u32>,
    #[command(flatten)]
    demangle: crate::trace::DemangleFlags,
    #[command(flatten)]
    narrow: NarrowFlags,
}

/// `fntrace dump`, writing to `-o FILE` or else to `out`.
pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let narrowing = args.narrow.narrowing()?;
    let trace = trace::open(&args.dir)?;
    let threads = selected(&trace, &args.dir, &args.tid)?;
    args.narrow
        .check_patterns(threads.iter().map(|(p, _)| *p), &args.dir)?;
    let mut sink = Sink::create(args.output.as_deref(), out)?;
    let progress = Progress::new(&threads, narrowing, 1, "dump");
    let demangle = args.demangle.mode();

    // Whether the output is empty, or why there is none.
    let (events, damage, empty) = if args.chrome {
        let summary = chrome::write(sink.out(), &trace, &threads, demangle, &progress)?;
        (summary.events, summary.damage, Ok(summary.events == 0))
    } else if args.perfetto {
        let stats = perfetto::write(sink.out(), &trace, &threads, demangle, &progress)?;
        (stats.events, stats.damage, Ok(stats.events == 0))
    } else if args.firefox {
        check_calls(&threads, &progress, args.max_calls)?;
        let stats = firefox::write_firefox(&trace, &threads, sink.out(), demangle, &progress)?;
        (stats.events, stats.damage, Ok(stats.events == 0))
    } else {
        let stacks = folded::collect(&threads, args.per_thread, demangle, &progress);
        if let Some(line) = losses::summary(&stacks.losses, &trace, None) {
            eprintln!("fntrace: warning: {line}");
        }
        let lines = stacks.lines();
        if let Ok(lines) = &lines {
            folded::write(sink.out(), lines)?;
        }
        (stacks.events, stacks.damage, lines.map(|l| l.is_empty()))
    };
    progress.finish();
    trace::warn_damage(&trace.damage);
    trace::warn_damage(&damage);
    let empty = empty.map_err(|why| anyhow::anyhow!("{}: {why}", args.dir.display()))?;
    if empty {
        return nothing::fail(nothing::no_durations(&trace, &args.dir, events));
    }
    sink.commit()?;
    Ok(ExitCode::SUCCESS)
}

/// Fails when the threads hold more than `max` calls, as narrowed (0: no
/// limit): the Firefox profile is built in memory. The files' sizes bound
/// the calls (an entry takes at least 8 bytes), so most traces are not
/// read twice.
fn check_calls(threads: &[(&Process, Vec<u32>)], progress: &Progress, max: u64) -> anyhow::Result<()> {
    let bytes: u64 = threads
        .iter()
        .flat_map(|(p, tids)| tids.iter().map(move |&t| p.dir.join(layout::thread_file(t))))
        .filter_map(|path| std::fs::metadata(path).ok())
        .map(|m| m.len())
        .sum();
    if max == 0 || bytes / 8 <= max {
        return Ok(());
    }
    let mut calls = 0u64;
    for (process, tids) in threads {
        for &tid in tids {
            calls += progress
                .events(process, tid)
                .filter(|e| matches!(e.kind, fntrace_format::read::EventKind::Entry))
                .count() as u64;
        }
    }
    if calls > max {
        anyhow::bail!(
            "the trace holds {calls} calls, more than the {max} a Firefox profile is built with in memory (about {} MiB): narrow it (-r START~STOP, --tid, -F, -D, -t) or raise --max-calls",
            calls.saturating_mul(150) >> 20
        );
    }
    Ok(())
}

/// The threads an export reads: those of `tids` (`--tid`; all when
/// empty). Fails when none of `tids` is in the trace, or nothing is left.
pub fn selected<'t>(
    trace: &'t Trace,
    dir: &Path,
    tids: &[u32],
) -> anyhow::Result<Vec<(&'t Process, Vec<u32>)>> {
    trace::check_tids(trace, tids)?;
    let threads = trace::select(trace, tids);
    if threads.is_empty() {
        trace::warn_damage(&trace.damage);
        return nothing::fail(nothing::no_events(trace, dir));
    }
    Ok(threads)
}
