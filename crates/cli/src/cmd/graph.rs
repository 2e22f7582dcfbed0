//! `fntrace graph [DIR] [FUNC]`: the call graph as uftrace's `graph` shows
//! it — every call path merged into a tree with counts and times, and under
//! FUNC every backtrace that reached it (`crate::calltree`); with
//! `--gprof`, gprof's layout: each function's calls and times, then who
//! called it and what it called.

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use fntrace_filter::Filter;
use fntrace_format::layout;

use crate::calltree::{CallTree, Selector};
use crate::losses;
use crate::narrow::NarrowFlags;
use crate::nothing;
use crate::stats::{self, Edge, Request, Stats};
use crate::trace;
use crate::units::human;

const AFTER_HELP: &str = "\
The call graph, as uftrace's graph shows it:
  # TOTAL TIME   FUNCTION
    10.293 ms : (1) demo
    10.293 ms : (1) main
    46.626 us :  +-(2) foo
    44.360 us :  | (6) loop
              :  |
    10.138 ms :  +-(1) bar
    10.100 ms :    (1) usleep
Each line is a function reached by one path of calls: the total time of
its calls on that path, their number in parentheses. A function with one
callee shows it at its own level; with several, each hangs from a '+-'
branch, the earliest first. The root is the process. With FUNC, the graph
starts at FUNC's calls (the outermost ones: recursion is inside), after
every backtrace that reached them, with its hits and their time. Calls
still open at the end count up to the last event read; calls open when
events were lost have no known end: they are counted apart (said on the
first line) and in no time.

With --gprof, for each function, longest total time first (then by name):
  main: 1 call, total 10.293 us, self 1.200 us
    called by:
             1     10.293 us  (root)
    calls:
             2      4.000 us  foo
Callers and callees show how many calls went along that edge and their
total time. '(root)' stands for calls with no traced caller. Total time
counts a recursive function's outermost calls only. Traces of the function
tracer have counts but no times. Calls open when events were lost have no
known end: they are counted apart ('N whose exit was lost') and in no
time. A trace that lost anything says so on its first line.

With one argument, an existing directory (or a path with '/') is the data
directory; anything else is FUNC, a name or ftrace filter pattern
('parse_*', 'ns::f').";

/// Show the aggregated call graph.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// [DIR] [FUNC]: the data directory (default fntrace.data), and the function(s) to show.
    #[arg(value_name = "DIR|FUNC", num_args = 0..=2)]
    args: Vec<String>,
    #[command(flatten)]
    demangle: crate::trace::DemangleFlags,
    /// Only these threads; repeatable.
    #[arg(long = "tid", value_name = "TID")]
    tid: Vec<u32>,
    /// gprof's layout: per function, its callers and callees.
    #[arg(long)]
    gprof: bool,
    /// After each function, its source file and line (kept by record --srcline).
    #[arg(long, conflicts_with = "gprof")]
    srcline: bool,
    #[command(flatten)]
    narrow: NarrowFlags,
}

/// `fntrace graph`, writing to `out`.
pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let (dir, func) = match args.args.as_slice() {
        [] => (PathBuf::from(layout::DEFAULT_DIR), None),
        [one] if one.contains('/') || PathBuf::from(one).is_dir() => (PathBuf::from(one), None),
        [one] => (PathBuf::from(layout::DEFAULT_DIR), Some(one.clone())),
        [dir, func, ..] => (PathBuf::from(dir), Some(func.clone())),
    };
    let filter = func.as_ref().map(|f| Filter::parse(&[f])).transpose()?;
    let narrowing = args.narrow.narrowing()?;
    let trace = trace::open(&dir)?;
    trace::check_tids(&trace, &args.tid)?;
    trace::warn_damage(&trace.damage);
    args.narrow.check_patterns(trace.processes.iter(), &dir)?;
    let profiles = trace.processes.iter().filter(|p| p.profile.is_some()).count();
    if !args.gprof && profiles > 0 {
        let what = match profiles == trace.processes.len() {
            true => "showing each function's totals (--gprof)",
            false => "their processes are left out of the graph (--gprof shows their totals)",
        };
        eprintln!("fntrace: warning: profile tables (--tracer profile) hold no call paths: {what}");
    }
    if !args.gprof && profiles < trace.processes.len() {
        let func = func.as_deref().zip(filter.as_ref().map(Selector::Pattern));
        return call_tree(&args, &trace, &dir, func, &narrowing, out);
    }
    let stats = stats::collect(
        &trace,
        &Request {
            tids: &args.tid,
            demangle: args.demangle.mode(),
            select: filter.as_ref(),
            by_args: false,
            narrowing: &narrowing,
        },
    );
    trace::warn_damage(&stats.damage);
    if stats.functions.is_empty() {
        return nothing::fail(nothing::no_calls(&trace, &dir, stats.events));
    }
    let mut shown: Vec<&String> = match &func {
        Some(func) => {
            if stats.selected.is_empty() {
                anyhow::bail!("no function in {} matches '{func}'", dir.display());
            }
            stats.selected.iter().collect()
        }
        None => stats.functions.keys().collect(),
    };
    shown.sort_by(|a, b| {
        let (fa, fb) = (&stats.functions[*a], &stats.functions[*b]);
        fb.total_ns.cmp(&fa.total_ns).then_with(|| a.cmp(b))
    });

    let (callers, callees) = adjacency(&stats);
    let mut out = BufWriter::new(out);
    if let Some(line) = losses::summary(&stats.losses, &trace, Some(stats.exit_lost)) {
        writeln!(out, "# {line}\n")?;
    }
    for (i, name) in shown.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let f = &stats.functions[*name];
        let lost = match f.exit_lost {
            0 => String::new(),
            n => format!(" ({n} more whose exit was lost)"),
        };
        writeln!(
            out,
            "{name}: {} call{}{lost}, total {}, self {}",
            f.calls,
            if f.calls == 1 { "" } else { "s" },
            human(f.total_ns),
            human(f.self_ns)
        )?;
        write_edges(&mut out, "called by", callers.get(name.as_str()))?;
        write_edges(&mut out, "calls", callees.get(name.as_str()))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The call graph in uftrace's layout.
fn call_tree(
    args: &Args,
    trace: &fntrace_format::read::Trace,
    dir: &std::path::Path,
    func: Option<(&str, Selector<'_>)>,
    narrowing: &crate::narrow::Narrowing,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let (tree, damage) = CallTree::read(
        trace,
        &args.tid,
        func,
        narrowing,
        args.demangle.mode(),
        args.srcline,
    );
    trace::warn_damage(&damage);
    if tree.is_empty() {
        if let Some((func, _)) = func.filter(|_| tree.events > 0) {
            anyhow::bail!("no function in {} matches '{func}'", dir.display());
        }
        return nothing::fail(nothing::no_calls(trace, dir, tree.events));
    }
    let mut out = BufWriter::new(out);
    // What was lost, from the same reading (the graph is written after it).
    if let Some(line) = losses::summary(&tree.losses, trace, Some(tree.exit_lost)) {
        writeln!(out, "# {line}\n")?;
    }
    tree.write(&mut out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

type Adjacent<'s> = BTreeMap<&'s str, Vec<(&'s str, &'s Edge)>>;

/// For each function, its callers and its callees.
fn adjacency(stats: &Stats) -> (Adjacent<'_>, Adjacent<'_>) {
    let mut callers: Adjacent<'_> = BTreeMap::new();
    let mut callees: Adjacent<'_> = BTreeMap::new();
    for ((caller, callee), edge) in &stats.edges {
        let from = caller.as_deref().unwrap_or("(root)");
        callers.entry(callee.as_str()).or_default().push((from, edge));
        if let Some(caller) = caller {
            callees
                .entry(caller.as_str())
                .or_default()
                .push((callee.as_str(), edge));
        }
    }
    (callers, callees)
}

fn write_edges(out: &mut impl Write, title: &str, edges: Option<&Vec<(&str, &Edge)>>) -> io::Result<()> {
    let Some(edges) = edges else {
        return Ok(());
    };
    let mut edges = edges.clone();
    edges.sort_by(|(an, a), (bn, b)| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.calls.cmp(&a.calls))
            .then_with(|| an.cmp(bn))
    });
    writeln!(out, "  {title}:")?;
    for (name, edge) in edges {
        writeln!(out, "  {:>10}  {:>12}  {name}", edge.calls, human(edge.total_ns))?;
    }
    Ok(())
}
