//! A filter pattern that matches no function is a one-line error in every
//! command that takes one, as in `fntrace list`, unless `--force` (for
//! `record` and `live`, whose functions may be in libraries).

mod common;

use common::{assert_fails, build_c, fntrace_output, Work};

const PROGRAM: &str = "int work(int x) { return x + 1; }\nint main(void) { return work(1) - 2; }\n";

#[test]
fn record_and_live_refuse_a_pattern_that_matches_nothing() {
    let work = Work::new("filters-nothing");
    let prog = build_c(&work, "prog", PROGRAM, &["-O0", "-fpatchable-function-entry=5"]);
    let prog = prog.to_str().unwrap();
    let data = work.path("x.data");
    let data = data.to_str().unwrap();
    for (option, pattern) in [
        ("-F", "wrok"),
        ("-N", "mian*"),
        ("--graph-function", "nope"),
        ("-T", "nope@trace_on"),
    ] {
        for command in ["record", "live"] {
            let out = match command {
                "live" => fntrace_output(&["live", option, pattern, prog]),
                _ => fntrace_output(&["record", "-o", data, option, pattern, prog]),
            };
            assert_fails(
                &out,
                1,
                &format!(
                    "{option} '{}' matches no function of",
                    pattern.split('@').next().unwrap()
                ),
            );
        }
    }
    assert!(!work.path("x.data").exists(), "nothing recorded");
    // A pattern that matches, and --force.
    let out = fntrace_output(&["record", "-o", data, "-F", "work", "-F", "!mai?", prog]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = fntrace_output(&["record", "-o", data, "--force", "-F", "wrok", prog]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn replay_refuses_a_pattern_that_matches_nothing() {
    let work = Work::new("filters-nothing-replay");
    let prog = build_c(&work, "prog", PROGRAM, &["-O0", "-fpatchable-function-entry=5"]);
    let data = work.path("r.data");
    let data = data.to_str().unwrap();
    let out = fntrace_output(&["record", "-o", data, prog.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    for option in ["-F", "-N"] {
        let out = fntrace_output(&["replay", option, "wrok", data]);
        assert_fails(&out, 1, &format!("{option} 'wrok' matches no function in"));
    }
}
