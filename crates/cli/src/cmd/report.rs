//! `fntrace report [DIR]`: per function, its calls and times (uftrace
//! report, the kernel's function profiler).

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use fntrace_format::layout;
use serde::Serialize;

use crate::diff;
use crate::losses;
use crate::narrow::NarrowFlags;
use crate::nothing;
use crate::output;
use crate::stats::{self, Function, Request};
use crate::trace;
use crate::units::human;

const AFTER_HELP: &str = "\
Total time is the time spent in a function's calls, callees included; for
a recursive function only its outermost calls count (the nested calls'
time is already inside them). Self time leaves out the callees. Min, Max
and Avg are over every call, nested ones included (from a profile table,
Avg is Total / Calls). Calls left without
returning (longjmp) or still running when the trace ended count up to that
point. Calls that were open when events were lost have no known end:
they are counted apart (column 'Exit lost', shown when there are any) and
in no time. A trace that lost anything says so on its first line, '# the
trace is incomplete: ...'. Processes recorded with --tracer profile are
reported from their profile table.

--avg-self shows the shortest, longest and average self time of a call
instead of its total time (uftrace's --avg-self; --avg-total is the
default), and -s min,max,avg sort by them.

--json prints an array of objects with name, calls, total_ns, self_ns,
min_ns, max_ns, avg_ns, self_min_ns, self_max_ns (null from a profile
table), self_avg_ns and exit_lost, in the same order (what was lost is
said on stderr).";

/// How to sort (`--sort`), uftrace's keys and names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sort {
    /// Longest total time first.
    Total,
    /// Longest self time first.
    #[value(name = "self")]
    SelfTime,
    /// Most calls first.
    #[value(alias = "call")]
    Calls,
    /// Longest average first.
    Avg,
    /// Longest shortest call first.
    Min,
    /// Longest longest call first.
    Max,
    /// By name.
    #[value(alias = "func")]
    Name,
}

/// Show per-function call counts and times.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The data directory.
    #[arg(default_value = layout::DEFAULT_DIR)]
    dir: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Sort by these columns, the first first (uftrace's -s total,self,call,avg,min,max,func).
    #[arg(short, long, value_enum, value_delimiter = ',', default_value = "total")]
    sort: Vec<Sort>,
    /// Only these threads; repeatable.
    #[arg(long = "tid", value_name = "TID")]
    tid: Vec<u32>,
    #[command(flatten)]
    demangle: crate::trace::DemangleFlags,
    /// Count a function recorded with its arguments (-A, -a) per argument list: one row per distinct `name(args)`.
    #[arg(long = "by-args")]
    by_args: bool,
    /// Compare with another recording: per function, calls, total and self time in DIR (base) and OTHER (new), and the change; the largest change (of the first --sort key) first.
    #[arg(long, value_name = "OTHER")]
    diff: Option<PathBuf>,
    /// Min, Max and Avg of each call's total time (the default; uftrace's --avg-total).
    #[arg(long, conflicts_with = "avg_self")]
    avg_total: bool,
    /// Min, Max and Avg of each call's self time instead (uftrace's --avg-self); -s min,max,avg sort by them.
    #[arg(long)]
    avg_self: bool,
    #[command(flatten)]
    narrow: NarrowFlags,
}

#[derive(Serialize)]
struct Row<'a> {
    name: &'a str,
    calls: u64,
    total_ns: u64,
    self_ns: u64,
    min_ns: u64,
    max_ns: u64,
    avg_ns: u64,
    self_min_ns: Option<u64>,
    self_max_ns: Option<u64>,
    self_avg_ns: u64,
    exit_lost: u64,
}

/// `fntrace report`, writing to `out`.
pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if let Some(other) = &args.diff {
        return run_diff(&args, other, out);
    }
    let (trace, stats) = open(&args, &args.dir)?;
    let mut rows: Vec<(&String, &Function)> = stats.functions.iter().collect();
    sort(&mut rows, &args.sort, args.avg_self);

    if rows.is_empty() {
        return nothing::fail(nothing::no_calls(&trace, &args.dir, stats.events));
    }
    let incomplete = losses::summary(&stats.losses, &trace, Some(stats.exit_lost));
    let mut out = BufWriter::new(out);
    if args.json {
        if let Some(line) = &incomplete {
            eprintln!("fntrace: warning: {line}");
        }
        let json: Vec<Row<'_>> = rows
            .iter()
            .map(|(name, f)| Row {
                name,
                calls: f.calls,
                total_ns: f.total_ns,
                self_ns: f.self_ns,
                min_ns: f.min_ns,
                max_ns: f.max_ns,
                avg_ns: f.avg_ns(),
                self_min_ns: f.self_range.map(|r| r.0),
                self_max_ns: f.self_range.map(|r| r.1),
                self_avg_ns: f.avg_self_ns(),
                exit_lost: f.exit_lost,
            })
            .collect();
        output::write_json(&mut out, &json)?;
    } else {
        if let Some(line) = &incomplete {
            writeln!(out, "# {line}")?;
        }
        write_table(&mut out, &rows, stats.exit_lost > 0, args.avg_self)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The recording in `dir` and its numbers, as `args` asks for them (the
/// damage found said on stderr).
fn open(args: &Args, dir: &std::path::Path) -> anyhow::Result<(fntrace_format::read::Trace, stats::Stats)> {
    let narrowing = args.narrow.narrowing()?;
    let trace = trace::open(dir)?;
    trace::check_tids(&trace, &args.tid)?;
    trace::warn_damage(&trace.damage);
    args.narrow.check_patterns(trace.processes.iter(), dir)?;
    if !args.tid.is_empty() && trace.processes.iter().any(|p| p.profile.is_some()) {
        eprintln!("fntrace: warning: profile tables are per process: --tid does not apply to them");
    }
    if !narrowing.keeps_everything() && trace.processes.iter().any(|p| p.profile.is_some()) {
        eprintln!("fntrace: warning: profile tables hold totals, not calls: -F, -N, -H, -C, -D, -t and -r do not apply to them");
    }
    let stats = stats::collect(
        &trace,
        &Request {
            tids: &args.tid,
            demangle: args.demangle.mode(),
            select: None,
            by_args: args.by_args,
            narrowing: &narrowing,
        },
    );
    trace::warn_damage(&stats.damage);
    Ok((trace, stats))
}

/// `fntrace report DIR --diff OTHER`: DIR is the base, OTHER the new.
fn run_diff(args: &Args, other: &std::path::Path, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut sides = Vec::with_capacity(2);
    for (label, dir) in [("base", args.dir.as_path()), ("new", other)] {
        let (trace, stats) = open(args, dir)?;
        if stats.functions.is_empty() {
            return nothing::fail(nothing::no_calls(&trace, dir, stats.events));
        }
        let incomplete = losses::summary(&stats.losses, &trace, Some(stats.exit_lost));
        sides.push((label, dir.to_path_buf(), stats.functions, incomplete));
    }
    let key: Option<fn(&diff::Side) -> u64> = match args.sort.first() {
        Some(Sort::Name) => None,
        Some(Sort::SelfTime) => Some(|s| s.self_ns),
        Some(Sort::Calls) => Some(|s| s.calls),
        _ => Some(|s| s.total_ns),
    };
    let rows = diff::rows(&sides[0].2, &sides[1].2, key);
    let mut out = BufWriter::new(out);
    if !args.json {
        writeln!(
            out,
            "# base: {}  new: {}",
            sides[0].1.display(),
            sides[1].1.display()
        )?;
    }
    for (label, dir, _, incomplete) in &sides {
        if let Some(line) = incomplete {
            if args.json {
                eprintln!("fntrace: warning: {label} ({}): {line}", dir.display());
            } else {
                writeln!(out, "# {label} ({}): {line}", dir.display())?;
            }
        }
    }
    if args.json {
        output::write_json(&mut out, &rows)?;
    } else {
        diff::write_table(&mut out, &rows)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Min, max and average of a call's total time, or (`by_self`) of its self
/// time (an unknown range reads as 0).
fn spread(f: &Function, by_self: bool) -> (u64, u64, u64) {
    match by_self {
        false => (f.min_ns, f.max_ns, f.avg_ns()),
        true => {
            let (lo, hi) = f.self_range.unwrap_or((0, 0));
            (lo, hi, f.avg_self_ns())
        }
    }
}

/// Sorts rows by `keys`, the first first, remaining ties by name; `min`,
/// `max` and `avg` of self times with `by_self`.
pub fn sort(rows: &mut [(&String, &Function)], keys: &[Sort], by_self: bool) {
    rows.sort_by(|(an, a), (bn, b)| {
        let (sa, sb) = (spread(a, by_self), spread(b, by_self));
        keys.iter()
            .map(|key| match key {
                Sort::Total => b.total_ns.cmp(&a.total_ns),
                Sort::SelfTime => b.self_ns.cmp(&a.self_ns),
                Sort::Calls => b.calls.cmp(&a.calls),
                Sort::Avg => sb.2.cmp(&sa.2),
                Sort::Min => sb.0.cmp(&sa.0),
                Sort::Max => sb.1.cmp(&sa.1),
                Sort::Name => an.cmp(bn),
            })
            .fold(std::cmp::Ordering::Equal, std::cmp::Ordering::then)
            .then_with(|| an.cmp(bn))
    });
}

/// The table; `exit_lost` adds the column of calls whose exit was lost;
/// `by_self`: min, max and average of self times.
pub(crate) fn write_table(
    out: &mut impl Write,
    rows: &[(&String, &Function)],
    exit_lost: bool,
    by_self: bool,
) -> io::Result<()> {
    let lost = |text: String| {
        if exit_lost {
            format!("{text:>12}")
        } else {
            String::new()
        }
    };
    writeln!(
        out,
        "{:>12}{:>12}{:>12}{}{:>12}{:>12}{:>12}  Function",
        "Total time",
        "Self time",
        "Calls",
        lost("Exit lost".into()),
        if by_self { "Min self" } else { "Min" },
        if by_self { "Max self" } else { "Max" },
        if by_self { "Avg self" } else { "Avg" }
    )?;
    let bar = "  ==========";
    let bars = if exit_lost { 7 } else { 6 };
    writeln!(out, "{}  {}", bar.repeat(bars), "=".repeat(20))?;
    for (name, f) in rows {
        let (min, max, avg) = spread(f, by_self);
        // A profile table keeps no call's self time: no range.
        let range = |ns: u64| match by_self && f.self_range.is_none() {
            true => "-".to_string(),
            false => human(ns),
        };
        writeln!(
            out,
            "{:>12}{:>12}{:>12}{}{:>12}{:>12}{:>12}  {name}",
            human(f.total_ns),
            human(f.self_ns),
            f.calls,
            lost(f.exit_lost.to_string()),
            range(min),
            range(max),
            human(avg)
        )?;
    }
    Ok(())
}
