//! The host does not notice the runtime: errno, recursion, signals, exit
//! status; and the runtime says so when it cannot or will not trace.

mod common;

use std::time::Duration;

use common::{field, run, runtime, Work};

#[test]
fn errno_recursion_signals_and_exit_status() {
    let work = Work::new("host");
    let link = Work::link_runtime();
    let mut args = vec!["-O2", "-fpatchable-function-entry=5", "host.c"];
    args.extend(link.iter().map(String::as_str));
    let program = work.build("gcc", &args, "host");
    let out = run(&work.0, &program, &[], &[], Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().next().unwrap();
    let calls = field(line, "calls");
    assert_eq!(field(line, "errno_kept"), calls, "{line}");
    assert_eq!(field(line, "busy"), calls, "{line}");
    assert_eq!(field(line, "depth_max"), 1, "{line}");
    assert_eq!(field(line, "helper"), 1, "the call from main only: {line}");
    // Every call not made is accounted for: one nested helper() per
    // callback run, and each signal-handler call that interrupted one.
    let (seen, handled) = (field(line, "in_signal"), field(line, "handled"));
    assert!(seen <= handled, "{line}");
    assert_eq!(
        field(line, "recursions"),
        calls + seen + 1 + (handled - seen),
        "{line}"
    );
}

#[test]
fn bad_configuration_is_one_line_and_the_program_runs_untraced() {
    let work = Work::new("badenv");
    let program = work.build(
        "gcc",
        &["-O2", "-fpatchable-function-entry=5", "counts.c"],
        "counts",
    );
    let preload = runtime().display().to_string();
    let plain = run(&work.0, &program, &["10"], &[], Duration::from_secs(20));
    for env in [
        vec![
            ("LD_PRELOAD", preload.as_str()),
            ("FNTRACE_COUNT", "1"),
            ("FNTRACE_FILTER", "[abc"),
        ],
        vec![
            ("LD_PRELOAD", preload.as_str()),
            ("FNTRACE_DISABLE", "1"),
            ("FNTRACE_COUNT", "1"),
        ],
    ] {
        let out = run(&work.0, &program, &["10"], &env, Duration::from_secs(20));
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, plain.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.lines().count() <= 1, "{stderr}");
        assert!(!stderr.contains("fntrace-count"), "{stderr}");
        if env.iter().any(|e| e.0 == "FNTRACE_FILTER") {
            assert!(
                stderr.starts_with("fntrace: bad filter pattern '[abc'"),
                "{stderr}"
            );
        }
    }
}

/// A plain build has no site a compiler left: its functions are taken in
/// as bare sites, nothing of them is written until one is selected, and
/// the program runs as before.
#[test]
fn a_plain_program_runs_as_before() {
    let work = Work::new("nosites");
    let program = work.build("gcc", &["-O2", "counts.c"], "counts");
    let preload = runtime().display().to_string();
    let plain = run(&work.0, &program, &["12"], &[], Duration::from_secs(20));
    let env = [("LD_PRELOAD", preload.as_str()), ("FNTRACE_VERBOSE", "1")];
    let out = run(&work.0, &program, &["12"], &env, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(out.stdout, plain.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The program's 9 functions and those of the libraries it loads (libc
    // and those the runtime needs: taken in for library calls), all bare,
    // none written.
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("fntrace: "))
        .unwrap_or("");
    let count = |what: &str| -> Option<usize> {
        line.split(", ").find_map(|part| {
            let (n, rest) = part.split_once(' ')?;
            (rest == what).then(|| n.parse().ok()).flatten()
        })
    };
    assert!(count("module(s)").is_some_and(|m| m >= 2), "{stderr}");
    assert!(count("sites").is_some_and(|s| s > 9), "{stderr}");
    assert_eq!(count("bare"), count("sites"), "{stderr}");
    assert_eq!(count("converted"), Some(0), "{stderr}");
}
