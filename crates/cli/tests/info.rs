//! `fntrace info`: the run, each process, and every damage note.

mod common;

use common::scenarios;
use common::tracedata::{expect_file, DataDir};
use common::{assert_fails, fntrace_ok, fntrace_output, Work};

/// `fntrace info DIR` with the directory's path replaced by `DIR`.
fn info(d: &DataDir) -> (String, String) {
    let (out, stderr) = fntrace_ok(&["info", d.path()]);
    (out.replace(d.path(), "DIR"), stderr)
}

/// `fntrace info DIR` on a trace with nothing to show: what it found on
/// stdout, then one error line and exit status 1.
fn info_nothing(d: &DataDir, why: &str) -> String {
    let out = fntrace_output(&["info", d.path()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("fntrace: error: ") && stderr.contains(why),
        "{stderr}"
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn processes_threads_and_losses() {
    let work = Work::new("info-threads");
    let d = scenarios::threads(&work);
    d.edit_process(100, |p| p.lost = 8);
    let (out, err) = info(&d);
    assert_eq!(err, "");
    expect_file("info_threads.txt", &out);
}

#[test]
fn damage_is_listed() {
    let work = Work::new("info-damage");
    let d = scenarios::truncated(&work);
    // A second process whose process.json is corrupt.
    let bad = d.process(900, &["./prog"], "function_graph", &["main"]);
    std::fs::write(bad.join("process.json"), "{ \"version\": 1, \"pid\": ").unwrap();
    d.edit_process(500, |p| {
        p.clock = fntrace_format::meta::Clock {
            source: "tsc".into(),
            tick0: 1000,
            mono0_ns: 5_000_000_000,
            tick1: 3_001_000,
            mono1_ns: 5_001_000_000,
            tsc_hz: None,
        };
        p.ended = false;
    });
    let (out, err) = info(&d);
    assert_eq!(err, "");
    expect_file("info_damage.txt", &out);
    assert!(out.contains("p900/process.json: cannot parse: "), "{out}");
}

#[test]
fn signal_and_unfinished_runs() {
    let work = Work::new("info-signal");
    let d = DataDir::new(&work, "signal.data");
    let mut run = fntrace_format::meta::RunInfo::from_json(
        r#"{"version": 1, "command": ["./crash"], "tracer": "function"}"#,
    )
    .unwrap();
    run.signal = Some(11);
    run.end_unix_ns = Some(2_000_000_000);
    run.start_unix_ns = 1_000_000_000;
    std::fs::write(d.dir.join("info.json"), run.to_json()).unwrap();
    let out = info_nothing(&d, "no process was recorded");
    assert!(
        out.contains("exit status         : killed by signal 11 (SIGSEGV)\n"),
        "{out}"
    );
    assert!(out.contains("duration            : 1.000  s\n"), "{out}");
    assert!(out.contains("none recorded"), "{out}");

    run.signal = None;
    run.end_unix_ns = None;
    std::fs::write(d.dir.join("info.json"), run.to_json()).unwrap();
    let out = info_nothing(&d, "no process was recorded");
    assert!(out.contains("the run did not end"), "{out}");
}

#[test]
fn not_a_data_directory() {
    let work = Work::new("info-errors");
    let out = fntrace_output(&["info", work.dir.to_str().unwrap()]);
    assert_fails(&out, 1, "not a fntrace data directory");
    let out = fntrace_output(&["info", "/nonexistent/x.data"]);
    assert_fails(&out, 1, "cannot read");
    // The system's reason, once.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        "fntrace: error: /nonexistent/x.data: cannot read: No such file or directory (os error 2)\n"
    );
}
