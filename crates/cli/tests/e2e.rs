//! End to end, with the real runtime, in the manner of uftrace's `tests/`:
//! each program of `tests/programs/e2e/` is built for tracing, run under
//! `fntrace record`, and what `replay`, `report` and `graph` print of it
//! is compared with the expected output beside it (`NAME.expected`,
//! `NAME.report.expected`, `NAME.graph.expected`).
//!
//! The expected files were written from the programs' sources (the call
//! tree is known without a tracer), not from fntrace's output.
//! `FNTRACE_BLESS=1` rewrites them from what fntrace prints (a test fails
//! if two runs that share a file, in two build styles or with two
//! commands, print different things): check the difference by hand before
//! keeping it.
//!
//! Every program is built in three styles: gcc `-pg -mfentry
//! -mrecord-mcount` (entry calls, return hijacking), gcc
//! `-fpatchable-function-entry=5` (NOPs, return hijacking) and clang
//! `-fxray-instrument` (entry and exit sleds). A style whose compiler is
//! missing is skipped with a note on stderr.
//!
//! For every run: the program's stdout and exit status under `fntrace
//! record` are those of an untraced run; `fntrace live` shows what
//! `record` and `replay` show; `replay --tid T` shows thread T's part of
//! the merged replay.
//!
//! Outputs are normalised before they are compared: durations become
//! `x.xxx us` (the tree and names stay), thread ids become T1, T2, ... (the
//! first thread to appear is T1; the others are sorted by what they did, so
//! that their interleaving does not matter), pids in `# process` lines
//! become `N`, and lines of functions that are not the program's own
//! (`frame_dummy`, `_init`, `__libc_csu_*`, ...) are dropped. `report` is
//! compared by names and call counts, `graph` by names, counts and edges.
//!
//! The runtime is built with `cargo build -p fntrace-runtime` (a no-op when
//! it is fresh) unless `FNTRACE_RUNTIME` names one. Every process has a
//! deadline: a hang fails the test.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::golden::{check, diff, graph_counts, report_counts, Replay, BLANK};
use common::procs::{have, kill_group, run, runtime, text};
use common::styles::Style;
use common::{fntrace, programs, Work};

/// How long a compiler, the program or one `fntrace` command may run.
const DEADLINE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Programs and how they are built
// ---------------------------------------------------------------------------

/// A program of `tests/programs/e2e/`.
struct Program {
    name: &'static str,
    /// C++ (`NAME.cc`) rather than C (`NAME.c`).
    cxx: bool,
    /// Extra link flags.
    libs: &'static [&'static str],
    /// Its exit status.
    status: i32,
    /// The function `NAME.graph.expected` shows (`fntrace graph DIR FUNC`).
    graph: Option<&'static str>,
}

const NESTED: Program = Program {
    name: "nested",
    cxx: false,
    libs: &[],
    status: 0,
    graph: Some("leaf"),
};
const RECURSION: Program = Program {
    name: "recursion",
    cxx: false,
    libs: &[],
    status: 5,
    graph: Some("fib"),
};
const LONGJMP: Program = Program {
    name: "longjmp",
    cxx: false,
    libs: &[],
    status: 0,
    graph: None,
};
const THREADS: Program = Program {
    name: "threads",
    cxx: false,
    libs: &["-pthread"],
    status: 0,
    graph: None,
};
const CXX_EXCEPTION: Program = Program {
    name: "cxx_exception",
    cxx: true,
    libs: &[],
    status: 0,
    graph: None,
};
const FILTERS: Program = Program {
    name: "filters",
    cxx: false,
    libs: &[],
    status: 0,
    graph: None,
};

type Built = Arc<OnceLock<Option<PathBuf>>>;

/// Builds `program` in `style` (once per test binary run); `None`, with a
/// note on stderr, when the compiler is not installed.
fn build(program: &Program, style: Style) -> Option<PathBuf> {
    static BUILDS: OnceLock<Mutex<HashMap<(&'static str, Style), Built>>> = OnceLock::new();
    let cell = BUILDS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry((program.name, style))
        .or_default()
        .clone();
    cell.get_or_init(|| {
        let work = Work::new(&format!("e2e-build-{}-{}", program.name, style.name()));
        let ext = if program.cxx { "cc" } else { "c" };
        let source = programs().join(format!("e2e/{}.{ext}", program.name));
        let mut args = vec!["-O0", "-fno-omit-frame-pointer"];
        args.extend(program.libs);
        style.build(&source, &work.path(program.name), program.cxx, &args)
    })
    .clone()
}

/// The test's prelude: the runtime, and the program built in `style`.
fn prepare(program: &Program, style: Style) -> Option<PathBuf> {
    let exe = build(program, style)?;
    runtime();
    Some(exe)
}

// ---------------------------------------------------------------------------
// Running fntrace
// ---------------------------------------------------------------------------

/// `fntrace ARGS...` in `dir`.
fn fntrace_in(dir: &Path, args: &[&str]) -> Output {
    run(fntrace().args(args).current_dir(dir), DEADLINE)
}

/// `fntrace ARGS...`: must exit 0; returns stdout and stderr.
fn fntrace_ok(dir: &Path, args: &[&str]) -> (String, String) {
    let out = fntrace_in(dir, args);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "fntrace {args:?}: {}\n{stderr}", out.status);
    (text(&out.stdout), stderr)
}

/// The untraced run of `exe ARGS`: its exit status must be `status`.
fn untraced(work: &Work, exe: &Path, args: &[&str], status: i32) -> Output {
    let out = run(Command::new(exe).args(args).current_dir(&work.dir), DEADLINE);
    assert_eq!(
        out.status.code(),
        Some(status),
        "untraced {} {args:?}: {}",
        exe.display(),
        text(&out.stderr)
    );
    out
}

/// `fntrace record -o WORK/trace.data OPTIONS -- EXE ARGS`: the program's
/// stdout and exit status must be those of `plain`, the untraced run, and
/// record must say nothing. Returns the data directory.
fn record(work: &Work, exe: &Path, options: &[&str], args: &[&str], plain: &Output) -> String {
    let data = work.path("trace.data").display().to_string();
    let exe = exe.display().to_string();
    // The expected outputs, like the -finstrument-functions logs they are
    // checked against, are the program's own functions: its calls into
    // libc are left out (library calls: tests/libcall.rs).
    let mut all = vec!["record", "--no-libcall", "-o", &data];
    all.extend(options);
    all.extend(["--", &exe]);
    all.extend(args);
    let out = fntrace_in(&work.dir, &all);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        plain.status.code(),
        "fntrace {all:?}: exit status; stderr: {stderr}"
    );
    assert_eq!(
        text(&out.stdout),
        text(&plain.stdout),
        "fntrace {all:?}: the program's output changed"
    );
    assert_eq!(stderr, "", "fntrace {all:?} said something");
    data
}

/// `fntrace live --color never -o FILE OPTIONS -- EXE`: its exit status
/// must be that of `plain`, its output exactly the program's, and FILE the
/// trace, which it returns.
fn live(work: &Work, exe: &Path, options: &[&str], plain: &Output, problems: &mut Vec<String>) -> String {
    let exe = exe.display().to_string();
    let file = work.path("live.txt");
    let file_arg = file.display().to_string();
    let mut all = vec!["live", "--no-libcall", "--color", "never", "-o", &file_arg];
    all.extend(options);
    all.extend(["--", &exe]);
    let out = fntrace_in(&work.dir, &all);
    let stderr = text(&out.stderr);
    if out.status.code() != plain.status.code() {
        problems.push(format!(
            "fntrace {all:?}: exit status {} (untraced: {}); stderr: {stderr}",
            out.status, plain.status
        ));
    }
    if !stderr.is_empty() {
        problems.push(format!("fntrace {all:?} said on stderr: {stderr}"));
    }
    let stdout = text(&out.stdout);
    let program = text(&plain.stdout);
    if stdout != program {
        problems.push(format!(
            "fntrace {all:?}: stdout is not the program's output {program:?}:\n{stdout}"
        ));
    }
    std::fs::read_to_string(&file).unwrap_or_else(|e| {
        problems.push(format!("fntrace {all:?}: no trace in {}: {e}", file.display()));
        String::new()
    })
}

fn finish(problems: Vec<String>) {
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------
// The programs
// ---------------------------------------------------------------------------

/// Each `replay --tid T` must show thread T's lines of the merged replay.
fn check_tids(problems: &mut Vec<String>, dir: &Path, data: &str, merged: &Replay) {
    for (tid, lines) in &merged.threads {
        let t = tid.to_string();
        let (out, _) = fntrace_ok(dir, &["replay", "--color", "never", "--tid", &t, data]);
        let alone = Replay::parse(&out);
        if alone.threads != [(*tid, lines.clone())] || alone.other != merged.other {
            problems.push(format!(
                "replay --tid {tid} differs from that thread's lines in the merged replay:\n{}",
                diff(&merged.canonical(), &alone.canonical())
            ));
        }
    }
}

/// Record, replay, report, graph and live for one program in one style.
fn program_test(program: &Program, style: Style) {
    let Some(exe) = prepare(program, style) else {
        return;
    };
    let work = Work::new(&format!("e2e-{}-{}", program.name, style.name()));
    let plain = untraced(&work, &exe, &[], program.status);
    let data = record(&work, &exe, &[], &[], &plain);
    let mut problems = Vec::new();
    let what = |cmd: &str| format!("{} ({}): fntrace {cmd}", program.name, style.name());

    let (out, err) = fntrace_ok(&work.dir, &["replay", "--color", "never", &data]);
    if !err.is_empty() {
        problems.push(format!("{}: stderr: {err}", what("replay")));
    }
    let replay = Replay::parse(&out);
    check(
        &mut problems,
        &what("replay"),
        &format!("{}.expected", program.name),
        &replay.canonical(),
    );
    check_tids(&mut problems, &work.dir, &data, &replay);

    let (out, _) = fntrace_ok(&work.dir, &["report", "--json", &data]);
    check(
        &mut problems,
        &what("report --json"),
        &format!("{}.report.expected", program.name),
        &report_counts(&out),
    );
    if let Some(func) = program.graph {
        let (out, _) = fntrace_ok(&work.dir, &["graph", "--gprof", &data, func]);
        check(
            &mut problems,
            &what(&format!("graph {func}")),
            &format!("{}.graph.expected", program.name),
            &graph_counts(&out),
        );
    }

    let shown = live(&work, &exe, &[], &plain, &mut problems);
    let shown = Replay::parse(&shown).canonical();
    if shown != replay.canonical() {
        problems.push(format!(
            "{}: differs from record + replay ('-' replay, '+' live):\n{}",
            what("live"),
            diff(&replay.canonical(), &shown)
        ));
    }
    finish(problems);
}

macro_rules! program_tests {
    ($($module:ident: $program:expr;)*) => {
        $(
            mod $module {
                use super::*;

                #[test]
                fn fentry() {
                    program_test(&$program, Style::Fentry);
                }

                #[test]
                fn patchable() {
                    program_test(&$program, Style::Patchable);
                }

                #[test]
                fn xray() {
                    program_test(&$program, Style::Xray);
                }

                #[test]
                fn plain() {
                    program_test(&$program, Style::Plain);
                }
            }
        )*
    };
}

program_tests! {
    nested: NESTED;
    recursion: RECURSION;
    longjmp: LONGJMP;
    threads: THREADS;
    cxx_exception: CXX_EXCEPTION;
}

// ---------------------------------------------------------------------------
// Filters, depth, triggers, graph functions, time filter
// ---------------------------------------------------------------------------

/// `filters` recorded with `record_options`, replayed with
/// `replay_options`; with record options, `live` must show the same.
fn filters_test(name: &str, record_options: &[&str], replay_options: &[&str], expected: &str) {
    let Some(exe) = prepare(&FILTERS, Style::Fentry) else {
        return;
    };
    let work = Work::new(&format!("e2e-filters-{name}"));
    let plain = untraced(&work, &exe, &[], FILTERS.status);
    let data = record(&work, &exe, record_options, &[], &plain);
    let mut problems = Vec::new();
    let mut all = vec!["replay", "--color", "never"];
    all.extend(replay_options);
    all.push(&data);
    let (out, _) = fntrace_ok(&work.dir, &all);
    let replay = Replay::parse(&out);
    let what = format!("filters: fntrace record {record_options:?} + replay {replay_options:?}");
    check(&mut problems, &what, expected, &replay.canonical());
    if !record_options.is_empty() {
        let shown = live(&work, &exe, record_options, &plain, &mut problems);
        let shown = Replay::parse(&shown).canonical();
        if shown != replay.canonical() {
            problems.push(format!(
                "filters: fntrace live {record_options:?} differs from record + replay ('-' replay, '+' live):\n{}",
                diff(&replay.canonical(), &shown)
            ));
        }
    }
    finish(problems);
}

#[test]
fn filters_none() {
    filters_test("none", &[], &[], "filters.expected");
}

/// `record -P` is the kernel's filter: only these functions are patched,
/// and traced.
#[test]
fn filters_record_patch() {
    filters_test(
        "record-P",
        &["-P", "inner", "-P", "slow"],
        &[],
        "filters.F.expected",
    );
}

/// `record -F` is uftrace's: these functions and what they call (#21),
/// the same as `replay -F` shows of a whole recording.
#[test]
fn filters_record_filter() {
    filters_test(
        "record-F",
        &["-F", "inner", "-F", "slow"],
        &[],
        "filters.F-subtree.expected",
    );
    filters_test(
        "replay-F-two",
        &[],
        &["-F", "inner", "-F", "slow"],
        "filters.F-subtree.expected",
    );
}

#[test]
fn filters_replay_filter() {
    filters_test("replay-F", &[], &["-F", "inner"], "filters.replay-F.expected");
}

/// `record -N` and `replay -N` are documented alike: "Do not trace these
/// functions (nor what they call)", "Hide these functions and what they
/// call".
#[test]
fn filters_record_notrace() {
    filters_test("record-N", &["-N", "inner"], &[], "filters.N.expected");
}

#[test]
fn filters_replay_notrace() {
    filters_test("replay-N", &[], &["-N", "inner"], "filters.N.expected");
}

#[test]
fn filters_depth() {
    filters_test("depth", &["-D", "2"], &[], "filters.D2.expected");
}

/// `replay -D` shows of a whole recording what `record -D` keeps (#21).
#[test]
fn filters_replay_depth() {
    filters_test("replay-depth", &[], &["-D", "2"], "filters.D2.expected");
}

#[test]
fn filters_trace_off() {
    filters_test(
        "trace-off",
        &["-T", "stop@trace_off"],
        &[],
        "filters.trace_off.expected",
    );
}

#[test]
fn filters_graph_function() {
    filters_test(
        "graph-function",
        &["--graph-function", "outer"],
        &[],
        "filters.graph-function.expected",
    );
}

/// `replay -t` keeps the calls that lasted long enough and the calls that
/// led to them, nested, as uftrace does: nap() (30 ms) in slow() in main().
#[test]
fn filters_replay_time_filter() {
    filters_test("replay-t", &[], &["-t", "10ms"], "filters.replay-t.expected");
}

/// `replay -C inner`: the calls of inner (not what it calls) and the calls
/// that led to them; slow() and stop() led to none.
#[test]
fn filters_replay_callers() {
    filters_test("replay-C", &[], &["-C", "inner"], "filters.replay-C.expected");
}

/// `replay -H inner`: inner's calls are gone, its callees move up.
#[test]
fn filters_replay_hide() {
    filters_test("replay-H", &[], &["-H", "inner"], "filters.replay-H.expected");
}

/// `-D` counts from the call `-F` selects.
#[test]
fn filters_replay_filter_depth() {
    filters_test(
        "replay-FD",
        &[],
        &["-F", "outer", "-D", "2"],
        "filters.replay-FD.expected",
    );
}

/// `filters` recorded whole (fentry) in a work directory named `name`;
/// none when the compiler is missing.
fn filters_recorded(name: &str) -> Option<(Work, String)> {
    let exe = prepare(&FILTERS, Style::Fentry)?;
    let work = Work::new(name);
    let plain = untraced(&work, &exe, &[], FILTERS.status);
    let data = record(&work, &exe, &[], &[], &plain);
    Some((work, data))
}

/// `graph` in uftrace's layout (#21): every call path of `filters` merged
/// into one tree, and under `leaf` each of the three paths that reach it
/// (main→outer→inner 4 times, main→outer 2, main→slow 1), as the source
/// makes them. Times are replaced by `x` (the tree's shape and counts are
/// the truth checked; `report` checks the times).
#[test]
fn graph_call_tree() {
    let Some((work, data)) = filters_recorded("e2e-graph-tree") else {
        return;
    };
    let untimed = |text: String| -> String {
        let mut lines = Vec::new();
        for line in text.lines() {
            let line = match line.split_once(" : ") {
                Some((time, rest)) if !time.trim().is_empty() => format!("x : {rest}"),
                Some((_, rest)) => format!("  : {rest}"),
                None => match line.split_once(", time ") {
                    Some((hits, _)) => format!("{hits}, time x"),
                    None => line.to_string(),
                },
            };
            lines.push(line.trim_end().to_string());
        }
        lines.join("\n") + "\n"
    };
    let mut problems = Vec::new();
    let (out, _) = fntrace_ok(&work.dir, &["graph", &data]);
    check(&mut problems, "graph", "filters.tree.expected", &untimed(out));
    let (out, _) = fntrace_ok(&work.dir, &["graph", &data, "leaf"]);
    check(
        &mut problems,
        "graph leaf",
        "filters.tree-leaf.expected",
        &untimed(out),
    );
    let (out, _) = fntrace_ok(&work.dir, &["graph", &data, "outer", "-N", "inner"]);
    check(
        &mut problems,
        "graph outer -N inner",
        "filters.tree-outer-N.expected",
        &untimed(out),
    );
    finish(problems);
}

/// Every reader narrows alike (#21): on one recording of `filters`, for
/// each set of options, the calls of each function that `replay` shows,
/// `report` and `graph` count and `dump --chrome` exports are those the
/// program's source makes (see filters.c: main calls outer twice, slow
/// once, stop once; outer calls inner and leaf; inner calls leaf twice;
/// slow calls nap and leaf).
#[test]
fn filters_every_reader_narrows_alike() {
    let Some((work, data)) = filters_recorded("e2e-filters-readers") else {
        return;
    };
    type Case = (&'static [&'static str], &'static [(&'static str, u64)]);
    let cases: &[Case] = &[
        (
            &[],
            &[
                ("main", 1),
                ("outer", 2),
                ("inner", 2),
                ("leaf", 7),
                ("slow", 1),
                ("nap", 1),
                ("stop", 1),
            ],
        ),
        (&["-F", "inner"], &[("inner", 2), ("leaf", 4)]),
        (
            &["-N", "inner"],
            &[
                ("main", 1),
                ("outer", 2),
                ("leaf", 3),
                ("slow", 1),
                ("nap", 1),
                ("stop", 1),
            ],
        ),
        (
            &["-H", "inner"],
            &[
                ("main", 1),
                ("outer", 2),
                ("leaf", 7),
                ("slow", 1),
                ("nap", 1),
                ("stop", 1),
            ],
        ),
        (&["-C", "inner"], &[("main", 1), ("outer", 2), ("inner", 2)]),
        (&["-C", "nap"], &[("main", 1), ("slow", 1), ("nap", 1)]),
        (
            &["-D", "2"],
            &[("main", 1), ("outer", 2), ("slow", 1), ("stop", 1)],
        ),
        (&["-t", "10ms"], &[("main", 1), ("slow", 1), ("nap", 1)]),
        (
            &["-F", "outer", "-D", "2"],
            &[("outer", 2), ("inner", 2), ("leaf", 2)],
        ),
        (&["-F", "slow", "-N", "nap"], &[("slow", 1), ("leaf", 1)]),
        (
            &["--match", "regex", "-F", "^(in|ou)"],
            &[("outer", 2), ("inner", 2), ("leaf", 6)],
        ),
    ];
    let mut problems = Vec::new();
    for (options, expected) in cases {
        let expected: BTreeMap<String, u64> = expected.iter().map(|(n, c)| (n.to_string(), *c)).collect();
        let run = |command: &[&str]| -> String {
            let mut all = command.to_vec();
            all.extend(*options);
            all.push(&data);
            fntrace_ok(&work.dir, &all).0
        };
        let mut readers: Vec<(&str, BTreeMap<String, u64>)> = Vec::new();
        let mut shown = BTreeMap::new();
        for line in run(&["replay", "--color", "never"]).lines().skip(1) {
            let text = line.split_once('|').map_or("", |(_, t)| t.trim());
            if text.ends_with("();") || text.ends_with("() {") {
                *shown
                    .entry(text[..text.find('(').unwrap()].to_string())
                    .or_default() += 1;
            }
        }
        readers.push(("replay", shown));
        let report: serde_json::Value = serde_json::from_str(&run(&["report", "--json"])).unwrap();
        let counted = report.as_array().unwrap().iter();
        let counted = counted.map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["calls"].as_u64().unwrap(),
            )
        });
        readers.push(("report", counted.collect()));
        let mut graphed = BTreeMap::new();
        for line in run(&["graph", "--gprof"]).lines() {
            if let Some((name, rest)) = line.split_once(": ").filter(|_| !line.starts_with(' ')) {
                let calls = rest.split(' ').next().unwrap().parse().unwrap();
                graphed.insert(name.to_string(), calls);
            }
        }
        readers.push(("graph", graphed));
        let chrome: serde_json::Value = serde_json::from_str(&run(&["dump", "--chrome"])).unwrap();
        let mut exported = BTreeMap::new();
        for ev in chrome["traceEvents"].as_array().unwrap() {
            if ev["ph"] == "B" || ev["ph"] == "X" {
                *exported
                    .entry(ev["name"].as_str().unwrap().to_string())
                    .or_default() += 1;
            }
        }
        readers.push(("dump --chrome", exported));
        for (reader, counts) in readers {
            if counts != expected {
                problems.push(format!(
                    "{reader} {options:?}: {counts:?}, the source makes {expected:?}"
                ));
            }
        }
    }
    finish(problems);
}

/// Only nap() (30 ms), slow() and main() last 10 ms or more; the
/// comparison is by names (durations are normalised away).
#[test]
fn filters_time_filter() {
    filters_test("time", &["-t", "10ms"], &[], "filters.time.expected");
}

/// `--tracer profile` gives nanoseconds however short the run (the writer
/// refreshes the clock's calibration only every second; the table is
/// written with a calibration of its own): `nap()` sleeps 30 ms, and
/// `main`, which calls it, lies within the span the process recorded
/// (`process.json`'s clock points, in ns). Read as nanoseconds, ticks of a
/// TSC faster than 1 GHz would not.
#[test]
fn profile_times_are_nanoseconds() {
    for style in [Style::Fentry, Style::Patchable, Style::Xray] {
        let Some(exe) = prepare(&FILTERS, style) else {
            continue;
        };
        let what = format!("profile [{}]", style.name());
        let work = Work::new(&format!("e2e-profile-{}", style.name()));
        let plain = untraced(&work, &exe, &[], 0);
        let data = record(&work, &exe, &["--tracer", "profile"], &[], &plain);
        let (json, _) = fntrace_ok(&work.dir, &["report", "--json", &data]);
        let rows: serde_json::Value = serde_json::from_str(&json).expect("report --json");
        let row = |name: &str| -> (u64, u64) {
            let r = rows
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["name"] == name))
                .unwrap_or_else(|| panic!("{what}: no {name} in {json}"));
            (r["calls"].as_u64().unwrap(), r["total_ns"].as_u64().unwrap())
        };
        let process = std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().path().join("process.json"))
            .find(|p| p.exists())
            .expect("process.json");
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(process).unwrap()).unwrap();
        let span = info["clock"]["mono1_ns"].as_u64().unwrap() - info["clock"]["mono0_ns"].as_u64().unwrap();
        let (nap_calls, nap) = row("nap");
        let (_, main) = row("main");
        assert_eq!(nap_calls, 1, "{what}");
        assert!(nap >= 30_000_000, "{what}: nap {nap} ns");
        assert!(
            nap <= main && main <= span,
            "{what}: nap {nap} ns, main {main} ns, recorded {span} ns"
        );
    }
}

// ---------------------------------------------------------------------------
// Errors with the real runtime
// ---------------------------------------------------------------------------

/// A program built without instrumentation (issue 19): traced through its
/// functions' own first instructions, with the calls its structure makes
/// (main -> a -> b -> leaf, three rounds, then leaf) and its own output.
#[test]
fn program_without_instrumentation() {
    if !have("gcc") {
        common::skip("program_without_instrumentation", "no gcc");
        return;
    }
    runtime();
    let work = Work::new("e2e-plain");
    let exe = work.path("plain");
    let source = programs().join("e2e/nested.c");
    for opt in ["-O0", "-O2"] {
        let mut cmd = Command::new("gcc");
        cmd.arg(opt).arg(&source).arg("-o").arg(&exe);
        let out = run(&mut cmd, DEADLINE);
        assert!(out.status.success(), "{cmd:?}: {}", text(&out.stderr));
        let out = fntrace_in(&work.dir, &["record", "-o", "plain.data", "--", "./plain"]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{opt}: {stderr}");
        assert_eq!(text(&out.stdout), "nested: 3 rounds, total 32\n", "{opt}");
        let (json, _) = fntrace_ok(&work.dir, &["report", "--json", "plain.data"]);
        // Its own functions, and its call of printf in libc (library calls
        // are traced by default).
        assert_eq!(
            report_counts(&json),
            "   3  a\n   3  b\n   4  leaf\n   1  main\n   1  printf\n",
            "{opt}: {stderr}"
        );
    }
}

/// A real recording whose thread file is cut inside its third chunk:
/// replay shows the events of the first two chunks, says where the damage
/// is in one line on stderr, and exits 0.
#[test]
fn truncated_thread_file() {
    let Some(exe) = prepare(&NESTED, Style::Fentry) else {
        return;
    };
    let work = Work::new("e2e-truncated");
    // 1000 rounds: about 6000 events, in chunks of 4 KiB (64 KiB per thread).
    let plain = untraced(&work, &exe, &["1000"], 0);
    let data = record(&work, &exe, &["--buffer-size", "64K"], &["1000"], &plain);
    let (full, _) = fntrace_ok(&work.dir, &["replay", "--color", "never", &data]);
    let full = Replay::parse(&full);
    assert_eq!(full.threads.len(), 1, "one thread: {full:?}");
    let (tid, full_lines) = &full.threads[0];

    let process = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("a process directory");
    let pname = process.file_name().unwrap().to_str().unwrap().to_string();
    let file = process.join(format!("t{tid}.events"));
    let bytes = std::fs::read(&file).unwrap();
    // The chunks, read from their headers (docs/FORMAT.md): magic, len at 16.
    let mut chunks = Vec::new();
    let mut at = 0;
    while at + 32 <= bytes.len() {
        assert_eq!(&bytes[at..at + 4], b"FNTC", "chunk magic at {at}");
        let len = u32::from_le_bytes(bytes[at + 16..at + 20].try_into().unwrap()) as usize;
        chunks.push((at, len));
        at += 32 + len;
    }
    assert_eq!(at, bytes.len(), "the file is whole chunks");
    assert!(chunks.len() >= 4, "want 4 chunks or more, got {chunks:?}");
    let (third, third_len) = chunks[2];
    let cut = third + 32 + third_len / 2 + 3;
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(cut as u64).unwrap();
    drop(f);

    let out = fntrace_in(&work.dir, &["replay", "--color", "never", &data]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one damage line: {stderr}");
    let note = format!("fntrace: warning: {pname}/t{tid}.events: offset {third}: ");
    assert!(stderr.starts_with(&note), "expected '{note}...', got: {stderr}");

    // The expected output: the full replay's lines up to the last event of
    // the second chunk (a one-line call is two events; one cut in half
    // shows as its opening line).
    let mut events = (chunks[0].1 + chunks[1].1) / 8;
    let mut expected = Vec::new();
    for line in full_lines {
        let cost = if line.ends_with(';') { 2 } else { 1 };
        if events >= cost {
            expected.push(line.clone());
            events -= cost;
        } else {
            if events == 1 {
                let graph = line.split_once('|').map_or("", |(_, g)| g);
                expected.push(format!(
                    "{BLANK} |{} {{",
                    graph.strip_suffix(';').unwrap_or(graph)
                ));
            }
            break;
        }
    }
    let cut_replay = Replay::parse(&text(&out.stdout));
    let expected = Replay {
        other: full.other.clone(),
        threads: vec![(*tid, expected)],
    };
    assert!(
        cut_replay == expected,
        "replay of the cut file ('-' expected, '+' actual):\n{}",
        diff(&expected.canonical(), &cut_replay.canonical())
    );
}

const SPIN: Program = Program {
    name: "spin",
    cxx: false,
    libs: &[],
    status: 0,
    graph: None,
};

/// Ctrl-C (SIGINT to the foreground group) during `record`: the program
/// dies of the signal as it would untraced, the runtime writes its buffers
/// first, and fntrace completes `info.json` and exits with 128 + 2.
#[test]
fn ctrl_c_writes_the_trace() {
    let Some(exe) = prepare(&SPIN, Style::Fentry) else {
        return;
    };
    let work = Work::new("e2e-ctrl-c");
    let data = work.path("data");
    let mut child = fntrace()
        .args(["record", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&exe)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("fntrace record");
    // Wait for the program's first line, then let it run a little.
    let mut first = [0u8; 6];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    assert_eq!(&first, b"start\n");
    std::thread::sleep(Duration::from_millis(300));
    kill_group(child.id(), 2);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            kill_group(child.id(), 9);
            panic!("fntrace record did not end after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(status.code(), Some(130), "fntrace's exit status");
    let (info, _) = fntrace_ok(&work.dir, &["info", data.to_str().unwrap()]);
    assert!(info.contains("killed by signal 2"), "{info}");
    // Only the runtime's final flush marks the process ended.
    let ended = info.lines().find(|l| l.trim_start().starts_with("ended"));
    assert!(ended.is_some_and(|l| l.ends_with(": yes")), "{info}");
    let (replay, _) = fntrace_ok(&work.dir, &["replay", data.to_str().unwrap()]);
    let leaves = replay.lines().filter(|l| l.ends_with("leaf();")).count();
    let works = replay.lines().filter(|l| l.ends_with("} /* work */")).count();
    assert!(
        works >= 1 && leaves >= 1000 * works,
        "{works} work calls, {leaves} leaf calls"
    );
}
