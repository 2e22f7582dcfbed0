//! `fntrace replay` on synthetic data directories: the function_graph
//! layout, threads merged by time, filters, lost and unwound calls, the
//! function tracer, `--time-filter` calls and damaged files. Expected
//! outputs are in `tests/expected/` (`FNTRACE_BLESS=1` rewrites them).

mod common;

use common::scenarios;
use common::tracedata::expect_file;
use common::{assert_fails, fntrace_ok, fntrace_output, Work};

/// `fntrace replay ARGS...`: must succeed; returns stdout and stderr.
fn replay(args: &[&str]) -> (String, String) {
    let mut all = vec!["replay", "--color", "never"];
    all.extend(args);
    fntrace_ok(&all)
}

#[test]
fn threads_and_processes() {
    let work = Work::new("replay-threads");
    let d = scenarios::threads(&work);
    let (out, err) = replay(&[d.path()]);
    assert_eq!(err, "");
    expect_file("replay_threads.txt", &out);
}

#[test]
fn filters() {
    let work = Work::new("replay-filters");
    let d = scenarios::threads(&work);
    let (out, _) = replay(&[d.path(), "-F", "main", "-N", "ns::worker"]);
    expect_file("replay_filter.txt", &out);
    let (out, _) = replay(&[d.path(), "-N", "a", "-N", "jumper", "--tid", "100"]);
    expect_file("replay_notrace.txt", &out);
    let (out, _) = replay(&[d.path(), "--tid", "101", "--no-demangle"]);
    expect_file("replay_tid.txt", &out);
}

#[test]
fn colour() {
    let work = Work::new("replay-colour");
    let d = scenarios::threads(&work);
    let out = fntrace_output(&["replay", "--color", "always", d.path(), "--tid", "101"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\x1b[31m# 2500.000 us \x1b[0m|  slow();"), "{text}");
    let (plain, _) = replay(&[d.path()]);
    assert!(!plain.contains('\x1b'));
}

#[test]
fn function_tracer() {
    let work = Work::new("replay-function");
    let d = scenarios::function_tracer(&work);
    let (out, err) = replay(&[d.path()]);
    assert_eq!(err, "");
    expect_file("replay_function.txt", &out);
}

#[test]
fn time_filter() {
    let work = Work::new("replay-time-filter");
    let d = scenarios::time_filter(&work);
    let (out, _) = replay(&[d.path()]);
    expect_file("replay_time_filter.txt", &out);
}

#[test]
fn truncated_thread_file() {
    let work = Work::new("replay-truncated");
    let d = scenarios::truncated(&work);
    let (out, err) = replay(&[d.path()]);
    expect_file("replay_truncated.txt", &out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("fntrace: warning: p500/t500.events: offset "),
        "{err}"
    );
}

#[test]
fn profile_trace_has_nothing_to_replay() {
    let work = Work::new("replay-profile");
    let d = scenarios::profile(&work);
    let out = fntrace_output(&["replay", d.path()]);
    assert_fails(&out, 1, "profile tracer");
}

#[test]
fn empty_trace_says_so() {
    let work = Work::new("replay-empty");
    let d = common::tracedata::DataDir::new(&work, "empty.data");
    d.info(&["./prog"], "function_graph", 0, 1000);
    let out = fntrace_output(&["replay", d.path()]);
    assert_fails(&out, 1, "no process was recorded");

    d.process(1, &["./prog"], "function_graph", &["main"]);
    d.thread(1, 1, &[]);
    let out = fntrace_output(&["replay", d.path()]);
    assert_fails(&out, 1, "has no events");
}

#[test]
fn errors() {
    let work = Work::new("replay-errors");
    let out = fntrace_output(&["replay", "/nonexistent/fntrace.data"]);
    assert_fails(&out, 1, "/nonexistent/fntrace.data: cannot read");
    let empty = work.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = fntrace_output(&["replay", empty.to_str().unwrap()]);
    assert_fails(&out, 1, "not a fntrace data directory");
    let d = scenarios::threads(&work);
    let out = fntrace_output(&["replay", "--tid", "999", d.path()]);
    assert_fails(&out, 1, "no thread 999 in the trace");
    let out = fntrace_output(&["report", "--tid", "999", d.path()]);
    assert_fails(&out, 1, "no thread 999 in the trace");
    let out = fntrace_output(&["replay", "-F", "[", empty.to_str().unwrap()]);
    assert_fails(&out, 2, "bad filter pattern");
}
