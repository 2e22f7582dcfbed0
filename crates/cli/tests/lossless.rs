//! Nothing lost, nothing silent (issue 17), on the runtime's side: the
//! default recording keeps every event however far threads run ahead of
//! the writer; `--lossy` drops and says so; a 100,000-deep recursion is
//! recorded whole, a deeper one said; a forked child that ends with
//! `_exit`, `_Exit`, `abort` or a fault keeps what it recorded; the flight
//! recorder's dumps all read back. Each program of
//! `tests/programs/lossless/` says in its output how many calls it made:
//! the trace is compared with that, event by event (`common::tally`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::procs::{run, runtime, text};
use common::styles::Style;
use common::tally::{number_after, Tally};
use common::{fntrace, programs, Work};

const DEADLINE: Duration = Duration::from_secs(300);

fn build(work: &Work, name: &str) -> PathBuf {
    let source = programs().join("lossless").join(name);
    let stem = name.trim_end_matches(".c");
    let exe = Style::Patchable
        .build(&source, &work.path(stem), false, &["-O2", "-pthread"])
        .expect("gcc");
    runtime();
    exe
}

fn record(work: &Work, tag: &str, options: &[&str], exe: &Path, args: &[&str]) -> (Output, PathBuf) {
    let dir = work.path(&format!("{tag}.data"));
    let _ = std::fs::remove_dir_all(&dir);
    let out = run(
        fntrace()
            .arg("record")
            .args(options)
            .arg("-o")
            .arg(&dir)
            .arg("--")
            .arg(exe)
            .args(args),
        DEADLINE,
    );
    (out, dir)
}

/// Two threads at full speed, 20 million events, with the default settings
/// and the smallest buffers there are (64 KiB a thread): the threads wait
/// for the writer rather than lose anything. With `--lossy` the same run
/// loses events, and `record` says how many, what part of the trace, why
/// and what avoids it.
#[test]
fn the_default_keeps_every_event() {
    let work = Work::new("lossless-flood");
    let exe = build(&work, "flood.c");
    for (tag, options) in [("default", &[][..]), ("small", &["--buffer-size", "64K"][..])] {
        let (out, dir) = record(&work, tag, options, &exe, &["5000000"]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{tag}: {stderr}");
        assert!(!stderr.contains("incomplete"), "{tag}: {stderr}");
        let t = Tally::of(&dir);
        t.assert_whole(tag);
        assert_eq!(
            t.calls("leaf"),
            number_after(&text(&out.stdout), "leaf "),
            "{tag}"
        );
    }
    let (out, dir) = record(
        &work,
        "lossy",
        &["--lossy", "--buffer-size", "64K"],
        &exe,
        &["5000000"],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let t = Tally::of(&dir);
    assert!(t.lost > 0, "a 64 KiB buffer at full speed keeps up? {stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("fntrace: warning: the trace is incomplete: "))
        .unwrap_or_else(|| panic!("no loss said: {stderr}"));
    assert!(
        line.contains(&format!(": {} of ", t.lost))
            && line.contains(" events lost (")
            && line.contains("%: the buffers were full")
            && line.contains("without --lossy"),
        "{line}"
    );
}

/// A recursion 100,000 deep is recorded whole; 200,000 deep, the calls
/// past the runtime's 131,072 are counted and said.
#[test]
fn deep_recursion_whole_or_said() {
    let work = Work::new("lossless-deep");
    let exe = build(&work, "deep.c");
    let (out, dir) = record(&work, "deep", &[], &exe, &["100000"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success() && !stderr.contains("incomplete"), "{stderr}");
    let t = Tally::of(&dir);
    t.assert_whole("100,000 deep");
    assert_eq!(t.calls("down"), 100_001);
    let (out, dir) = record(&work, "deeper", &[], &exe, &["200000"]);
    let stderr = text(&out.stderr);
    let t = Tally::of(&dir);
    let limit = fntrace_format::limits::MAX_NESTING as u64;
    // The thread's start routine holds one frame of the stack.
    assert_eq!(t.calls("down") + t.untraced, 200_001, "{stderr}");
    assert!(t.calls("down") >= limit - 2, "{}", t.calls("down"));
    assert!(
        stderr.contains(&format!("{} calls not traced (", t.untraced))
            && stderr.contains(&format!("of the calls: nested deeper than {limit} calls")),
        "{stderr}"
    );
}

/// A forked child that ends with `_exit`, `_Exit`, `abort` or a fault
/// keeps its calls, and ends as it would have.
#[test]
fn children_that_end_abruptly_keep_their_calls() {
    let work = Work::new("lossless-ends");
    let exe = build(&work, "ends.c");
    for how in ["_exit", "_Exit", "abort", "segv"] {
        let alone = run(Command::new(&exe).arg(how), DEADLINE);
        let (out, dir) = record(&work, how, &[], &exe, &[how]);
        assert_eq!(
            text(&out.stdout),
            text(&alone.stdout),
            "{how}: {}",
            text(&out.stderr)
        );
        assert_eq!(out.status.code(), alone.status.code(), "{how}");
        let t = Tally::of(&dir);
        assert!(t.damage.is_empty() && t.lost == 0, "{how}: {t:?}");
        assert_eq!((t.calls("work"), t.calls("leaf")), (1, 1000), "{how}");
    }
}

/// The flight recorder dumps on SIGUSR2 (the program waits until the dump
/// is in its thread file), then the program goes on and exits: both dumps
/// read back, no damage.
#[test]
fn flight_recorder_dumps_all_read_back() {
    let work = Work::new("lossless-flight");
    let exe = build(&work, "flight.c");
    let (out, dir) = record(&work, "flight", &["--flight-recorder", "256K"], &exe, &["1000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = Tally::of(&dir);
    t.assert_whole("flight");
    assert_eq!(t.calls("leaf"), number_after(&text(&out.stdout), "leaf "));
}
