//! The traced program never breaks (issue 16), however it treats its own
//! control flow: signal handlers that call traced code at any instruction
//! (the tracer's own included), an alternate signal stack above the
//! thread's stack, coroutines that switch stacks inside traced calls
//! (`swapcontext`, a hand-written switch), `vfork` + `exec` beside a busy
//! thread, `pthread_cancel` through C++ frames. Each program of
//! `tests/programs/hostile/` runs in every entry-site style (gcc
//! `-fpatchable-function-entry=5`, gcc `-pg -mfentry`, clang
//! `-fpatchable-function-entry=5`): under `fntrace record` its stdout and
//! exit status must be the untraced run's, and the trace must hold every
//! call the program counted itself (its stderr or stdout says how many),
//! with no damage and nothing lost.
//!
//! The signal storms are the timing races: before the fix, every run of
//! them aborted; each style runs them several times, and once for about a
//! second into the flight recorder (no trace to keep, the same paths).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::procs::{run, runtime, text};
use common::styles::Style;
use common::tally::{near, number_after, Tally};
use common::{fntrace, programs, Work};

/// How long a program or `fntrace` may run.
const DEADLINE: Duration = Duration::from_secs(120);

/// Builds `tests/programs/hostile/NAME` in `style` into `work`.
fn build(work: &Work, name: &str, style: Style, libs: &[&str]) -> Option<PathBuf> {
    let cxx = name.ends_with(".cc");
    let stem = name.split('.').next().expect("a name");
    let source = programs().join("hostile").join(name);
    let mut args = vec!["-O2"];
    args.extend(libs);
    let exe = style.build(
        &source,
        &work.path(&format!("{stem}-{}", style.name())),
        cxx,
        &args,
    )?;
    runtime();
    Some(exe)
}

/// The program alone.
fn untraced(exe: &Path, args: &[&str]) -> Output {
    run(Command::new(exe).args(args), DEADLINE)
}

/// `fntrace record OPTIONS -o DIR -- EXE ARGS`; the run's output and the
/// data directory.
fn record(work: &Work, tag: &str, options: &[&str], exe: &Path, args: &[&str]) -> (Output, PathBuf) {
    let dir = work.path(&format!("{tag}.data"));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cmd = fntrace();
    cmd.arg("record")
        .args(options)
        .arg("-o")
        .arg(&dir)
        .arg("--")
        .arg(exe)
        .args(args);
    (run(&mut cmd, DEADLINE), dir)
}

/// Asserts that the traced run behaved as the untraced one: same stdout,
/// same exit status, nothing from fntrace about an abort.
fn same_behaviour(what: &str, traced: &Output, alone: &Output) {
    let err = text(&traced.stderr);
    assert_eq!(
        traced.status.code(),
        alone.status.code(),
        "{what}: exit status; stderr:\n{err}"
    );
    assert_eq!(
        text(&traced.stdout),
        text(&alone.stdout),
        "{what}: stdout; stderr:\n{err}"
    );
    assert!(!err.contains("aborting"), "{what}: {err}");
}

/// Every call of the recursion is there, and every handler call: a
/// handler's calls are traced, or counted as not traced (when the signal
/// interrupted the tracer's generic path, both the handler and its leaf),
/// or said lost. The run's stderr says how many signals it handled.
fn check_storm(what: &str, traced: &Output, dir: &Path, iterations: u64) {
    let handled = number_after(&text(&traced.stderr), "handled ");
    let t = Tally::of(dir);
    let lost = t.assert_whole_but_said(what, handled);
    let (rec, handler, leaf) = (t.calls("rec"), t.calls("on_signal"), t.calls("hleaf"));
    assert!(
        near(rec, iterations * 101, lost),
        "{what}: rec {rec}, lost {lost}"
    );
    assert!(
        near(leaf, handler, lost),
        "{what}: handler {handler} and leaf {leaf}"
    );
    assert!(
        near(handler + t.untraced / 2, handled, lost),
        "{what}: handler calls {handler} + {} not traced, {handled} handled, {lost} lost",
        t.untraced / 2
    );
    assert!(handled > 0, "{what}: no signal arrived");
}

/// The profile tracer's table after a storm: every call of the recursion
/// counted, and every handler call (counted, or not traced when the signal
/// interrupted the tracer's generic path); the recursion's total time is
/// its outermost calls' (inside the run), its self times add up.
fn check_profile_storm(what: &str, traced: &Output, dir: &Path, iterations: u64) {
    let handled = number_after(&text(&traced.stderr), "handled ");
    let trace = fntrace_format::open(dir).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(trace.damage.is_empty(), "{what}: {:?}", trace.damage);
    let mut rows = std::collections::HashMap::new();
    let mut untraced = 0;
    for p in &trace.processes {
        untraced += p.info.untraced;
        for row in p.profile.as_deref().unwrap_or_default() {
            assert!(
                row.min_ns <= row.max_ns && row.self_ns <= row.total_ns,
                "{what}: {row:?}"
            );
            rows.insert(p.functions.name(row.fid), *row);
        }
    }
    let calls = |f: &str| rows.get(f).map_or(0, |r| r.calls);
    assert_eq!(calls("rec"), iterations * 101, "{what}: rec");
    assert_eq!(calls("hleaf"), calls("on_signal"), "{what}: handler and leaf");
    assert_eq!(
        calls("on_signal") + untraced / 2,
        handled,
        "{what}: handler calls, {untraced} not traced"
    );
    assert!(handled > 0, "{what}: no signal arrived");
    // rec's total: its outermost calls, all inside main's; the self times
    // add up to the time of the threads' outermost calls (each row rounded
    // down to ns): main's, killer's, and the library calls made before
    // main (a -pg build's start-up calls __monstartup and __cxa_atexit).
    assert!(rows["rec"].total_ns <= rows["main"].total_ns, "{what}: {rows:?}");
    let roots: u64 = ["main", "killer", "__monstartup", "__cxa_atexit"]
        .iter()
        .filter_map(|f| rows.get(*f))
        .map(|r| r.total_ns)
        .sum();
    let selfs: u64 = rows.values().map(|r| r.self_ns).sum();
    assert!(
        selfs.abs_diff(roots) <= rows.len() as u64 + 2,
        "{what}: self times {selfs} ns, outermost calls {roots} ns: {rows:?}"
    );
}

/// A signal storm whose handler calls traced code: an interval timer every
/// 100 us, and another thread sending signals as fast as it can; in XRay
/// builds too (the exit sleds' fast path), with arguments recorded (their
/// fast path), with the `function` tracer and with the `profile` tracer.
#[test]
fn signal_handlers_calling_traced_code() {
    let work = Work::new("hostile-signals");
    for style in Style::ENTRY_STYLES.into_iter().chain([Style::Xray]) {
        let Some(exe) = build(&work, "signals.c", style, &["-pthread"]) else {
            continue;
        };
        for (mode, runs) in [("timer", 3), ("kill", 2)] {
            let alone = untraced(&exe, &[mode]);
            for i in 0..runs {
                let what = format!("{} {mode} run {i}", style.name());
                let (traced, dir) = record(&work, mode, &["--buffer-size", "64M"], &exe, &[mode]);
                same_behaviour(&what, &traced, &alone);
                check_storm(&what, &traced, &dir, 20_000);
            }
        }
        // With arguments recorded (integers in registers: the fast paths,
        // XRay's entry sleds' too), the storm reads whole as before.
        {
            let alone = untraced(&exe, &["kill"]);
            let what = format!("{} with -A", style.name());
            let options = ["--buffer-size", "64M", "-A", "rec@arg1/i32", "-A", "hleaf@arg1"];
            let (traced, dir) = record(&work, "args", &options, &exe, &["kill"]);
            same_behaviour(&what, &traced, &alone);
            check_storm(&what, &traced, &dir, 20_000);
        }
        let alone = untraced(&exe, &["timer"]);
        let what = format!("{} function tracer", style.name());
        let (traced, dir) = record(
            &work,
            "function",
            &["--tracer", "function", "--buffer-size", "64M"],
            &exe,
            &["timer"],
        );
        same_behaviour(&what, &traced, &alone);
        check_storm(&what, &traced, &dir, 20_000);
        // Longer with the killer thread: on a busy machine it may not run
        // at all during a short recursion.
        for (mode, iterations) in [("timer", 20_000), ("kill", 100_000)] {
            let args = [mode, &iterations.to_string()];
            let alone = untraced(&exe, &args);
            let what = format!("{} profile {mode}", style.name());
            let (traced, dir) = record(&work, "profile", &["--tracer", "profile"], &exe, &args);
            same_behaviour(&what, &traced, &alone);
            check_profile_storm(&what, &traced, &dir, iterations);
        }
        // About a second of storm, into the flight recorder.
        let long = ["timer", "300000"];
        let alone = untraced(&exe, &long);
        let (traced, dir) = record(&work, "long", &["--flight-recorder", "4M"], &exe, &long);
        same_behaviour(&format!("{} long storm", style.name()), &traced, &alone);
        assert!(Tally::of(&dir).damage.is_empty());
    }
}

/// A handler on an alternate signal stack mapped above the thread's stack:
/// the frames it interrupted are not gone.
#[test]
fn alternate_signal_stack_above_the_thread_stack() {
    let work = Work::new("hostile-altstack");
    for style in Style::ENTRY_STYLES {
        let Some(exe) = build(&work, "altstack.c", style, &["-pthread"]) else {
            continue;
        };
        let alone = untraced(&exe, &[]);
        assert!(
            text(&alone.stdout).contains("off the alternate stack 0"),
            "{}",
            text(&alone.stdout)
        );
        for i in 0..2 {
            let what = format!("{} run {i}", style.name());
            let (traced, dir) = record(&work, "alt", &["--buffer-size", "64M"], &exe, &[]);
            same_behaviour(&what, &traced, &alone);
            check_storm(&what, &traced, &dir, 20_000);
        }
    }
}

/// Coroutines switching stacks in the middle of traced calls, with
/// swapcontext and with a hand-written switch; traced whole, and with the
/// switching function left out (`-F '*' -F '!gswitch'`).
#[test]
fn coroutines_switching_stacks() {
    let work = Work::new("hostile-coro");
    for style in Style::ENTRY_STYLES {
        let Some(exe) = build(&work, "coro.c", style, &[]) else {
            continue;
        };
        for mode in ["ucontext", "asm"] {
            let alone = untraced(&exe, &[mode]);
            let truth = text(&alone.stderr);
            for (tag, filter) in [
                ("all", &[][..]),
                ("no-switch", &["-P", "*", "-P", "!gswitch"][..]),
            ] {
                let what = format!("{} {mode} {tag}", style.name());
                let (traced, dir) = record(&work, tag, filter, &exe, &[mode]);
                same_behaviour(&what, &traced, &alone);
                let t = Tally::of(&dir);
                t.assert_whole(&what);
                for f in ["walk", "step", "leaf"] {
                    assert_eq!(t.calls(f), number_after(&truth, &format!("{f} ")), "{what}: {f}");
                }
                let switches = if tag == "all" {
                    number_after(&truth, "gswitch ")
                } else {
                    0
                };
                assert_eq!(t.calls("gswitch"), switches, "{what}: gswitch");
            }
        }
    }
}

/// vfork + exec while another thread records: the parent's recording goes
/// on, whole.
#[test]
fn vfork_and_exec() {
    let work = Work::new("hostile-vfork");
    for style in Style::ENTRY_STYLES {
        let Some(exe) = build(&work, "vfork.c", style, &["-pthread"]) else {
            continue;
        };
        let alone = untraced(&exe, &[]);
        let (traced, dir) = record(&work, "vfork", &["--buffer-size", "64M"], &exe, &[]);
        let what = style.name();
        same_behaviour(what, &traced, &alone);
        let out = text(&alone.stdout);
        let t = Tally::of(&dir);
        t.assert_whole(what);
        for f in ["before_fork", "after_fork", "side_leaf"] {
            assert_eq!(t.calls(f), number_after(&out, &format!("{f} ")), "{what}: {f}");
        }
    }
}

/// pthread_cancel through traced C++ frames runs every destructor and
/// releases every lock.
#[test]
fn cancellation_through_cxx_frames() {
    let work = Work::new("hostile-cancel");
    for style in Style::ENTRY_STYLES {
        let Some(exe) = build(&work, "cancel.cc", style, &["-pthread"]) else {
            continue;
        };
        let alone = untraced(&exe, &[]);
        assert_eq!(text(&alone.stdout), "canceled 6 destroyed 60 free locks 6\n");
        for i in 0..3 {
            let what = format!("{} run {i}", style.name());
            let (traced, dir) = record(&work, "cancel", &[], &exe, &[]);
            same_behaviour(&what, &traced, &alone);
            let t = Tally::of(&dir);
            t.assert_whole(&what);
            assert_eq!(t.calls("_Z5levelii"), 60, "{what}: level");
            assert_eq!(t.calls("_Z5blocki"), 6, "{what}: block");
        }
    }
}
