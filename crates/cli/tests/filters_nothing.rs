//! A filter pattern that matches no function is a one-line error in every
//! command that takes one, as in `fntrace list`, unless `--force` (for
//! functions of libraries loaded later): `record` and `live` against the
//! program and the libraries it loads, `replay` against the trace,
//! `attach` against the modules the process has mapped (before touching
//! it), `ctl filter|notrace` against the functions the runtime knows (the
//! filter in force stays).

mod common;

use std::path::Path;
use std::time::Duration;

use common::attach::{build_workload, ctl, has_runtime, patched, replay, Attach, Target};
use common::procs::{self, text};
use common::{assert_fails, build_c, cc, fntrace, fntrace_ok, fntrace_output, Work};

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

/// A library built with patchable sites, and programs that load it.
const LIBRARY: &str = "int libfunc(int x) { return x * 2; }\nint libother(int x) { return x + 1; }\n";
const USER: &str = "int libfunc(int);\nint main(void) { return libfunc(2) - 4; }\n";

/// Builds `libfl.so` (patchable) and `prog` (`prog_flags`) loading it
/// through `link`: `$ORIGIN` in a `DT_RUNPATH`, or nothing (found through
/// `LD_LIBRARY_PATH`).
fn build_with_library(work: &Work, prog_flags: &[&str], link: &[&str]) -> String {
    let lib_src = work.path("fl.c");
    std::fs::write(&lib_src, LIBRARY).unwrap();
    let lib = work.path("libfl.so");
    let lib_args = [lib_src.to_str().unwrap(), "-O0", "-shared", "-fPIC"];
    cc(
        "gcc",
        &[
            &lib_args[..],
            &["-fpatchable-function-entry=5", "-o", lib.to_str().unwrap()],
        ]
        .concat(),
    );
    let dir = format!("-L{}", work.dir.display());
    let mut args = vec!["-O0", dir.as_str(), "-lfl"];
    args.extend(prog_flags);
    args.extend(link);
    build_c(work, "prog", USER, &args).display().to_string()
}

fn assert_ok(out: &std::process::Output) {
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn record_and_live_take_a_pattern_of_a_library_the_program_loads() {
    procs::runtime();
    let work = Work::new("filters-nothing-library");
    // The program has no sites of its own: its library has.
    let prog = build_with_library(&work, &[], &["-Wl,-rpath,$ORIGIN"]);
    let data = work.path("l.data");
    let data = data.to_str().unwrap();
    for pattern in ["libfunc", "libf*:mod:libfl", "*:mod:libfl.so", "!libother"] {
        assert_ok(&fntrace_output(&["record", "-o", data, "-F", pattern, &prog]));
    }
    let out = fntrace_output(&["record", "-o", data, "-F", "libfunc", &prog]);
    assert_ok(&out);
    let (shown, _) = fntrace_ok(&["replay", data]);
    assert!(shown.contains("libfunc();"), "{shown}");
    // (Standard output is a pipe here: the trace follows on standard error.)
    let (_, shown) = fntrace_ok(&["live", "-F", "libfunc", &prog]);
    assert!(shown.contains("libfunc();"), "{shown}");
    // Nothing is run, nothing is written, for a pattern of no function.
    std::fs::remove_dir_all(data).unwrap();
    for pattern in ["libfnuc", "main:mod:libfl", "libfunc:mod:libm"] {
        for command in ["record", "live"] {
            let out = match command {
                "live" => fntrace_output(&["live", "-F", pattern, &prog]),
                _ => fntrace_output(&["record", "-o", data, "-F", pattern, &prog]),
            };
            assert_fails(
                &out,
                1,
                &format!("-F '{pattern}' matches no function of {prog} or the libraries it loads"),
            );
            assert!(text(&out.stderr).contains("--force to record anyway"));
        }
        let out = fntrace_output(&["record", "-o", data, "-T", &format!("{pattern}@trace_on"), &prog]);
        assert_fails(&out, 1, &format!("-T '{pattern}' matches no function"));
    }
    assert!(!Path::new(data).exists(), "nothing recorded");
    assert_ok(&fntrace_output(&[
        "record", "-o", data, "--force", "-F", "libfnuc", &prog,
    ]));
}

/// The library found as the loader finds it: through `LD_LIBRARY_PATH`
/// of the environment fntrace passes on.
#[test]
fn record_finds_libraries_through_ld_library_path() {
    procs::runtime();
    let work = Work::new("filters-nothing-ld-library-path");
    let prog = build_with_library(&work, &["-fpatchable-function-entry=5"], &[]);
    let data = work.path("p.data");
    let data = data.to_str().unwrap();
    let record_with = |options: &[&str], pattern: &str, library_path: Option<&Path>| {
        let mut cmd = fntrace();
        cmd.args(["record", "-o", data])
            .args(options)
            .args(["-F", pattern, &prog]);
        match library_path {
            Some(dir) => cmd.env("LD_LIBRARY_PATH", dir),
            None => cmd.env_remove("LD_LIBRARY_PATH"),
        };
        procs::run(&mut cmd, Duration::from_secs(120))
    };
    let record = |pattern: &str, library_path: Option<&Path>| record_with(&[], pattern, library_path);
    let out = record("libfunc", Some(&work.dir));
    assert_ok(&out);
    let (shown, _) = fntrace_ok(&["replay", data]);
    assert!(shown.contains("libfunc();"), "{shown}");
    assert_fails(
        &record("libfnuc", Some(&work.dir)),
        1,
        "-F 'libfnuc' matches no function",
    );
    // Without it the library is not found (nor would the program start):
    // the pattern matches none of its functions. It names the program's
    // import, a library call, which is taken: the program then fails to
    // start as it does untraced.
    assert_fails(
        &record_with(&["--no-libcall"], "libfunc", None),
        1,
        "-F 'libfunc' matches no function",
    );
    let out = record("libfunc", None);
    assert_eq!(out.status.code(), Some(127));
    assert!(text(&out.stderr).contains("libfl.so: cannot open shared object file"));
}

/// The workload of the attach tests, with its library, both built with
/// patchable sites, running; and a fresh one to compare its code with.
fn workload(work: &Work) -> (Target, Target) {
    procs::runtime();
    let patchable = ["-fpatchable-function-entry=5"];
    let bin = build_workload(work, "gcc", &patchable, &patchable);
    (Target::start(&bin, work), Target::start(&bin, work))
}

/// `attach` refuses a pattern of no function before it touches the
/// process, and takes one of its library.
#[test]
fn attach_refuses_a_pattern_that_matches_nothing() {
    let work = Work::new("filters-nothing-attach");
    let (mut target, fresh) = workload(&work);
    let pid = target.pid.to_string();
    let dir = work.path("a.data");
    let d = dir.to_str().unwrap();
    for (option, pattern) in [
        ("-F", "lib_twcie"),
        ("-N", "nope*"),
        ("--graph-function", "mdi"),
        ("-F", "mid:mod:libattachlib"),
    ] {
        let out = fntrace_output(&["attach", &pid, "-o", d, option, pattern]);
        assert_fails(
            &out,
            1,
            &format!("{option} '{pattern}' matches no function of process {pid} (work)"),
        );
    }
    assert!(
        !dir.exists() && !has_runtime(target.pid),
        "process {pid} was touched"
    );
    common::attach::assert_same_code(target.pid, fresh.pid, "after the refusals");
    let (rounds, bad, _, _) = target.report();
    assert!(rounds > 0 && bad == 0);

    // A function of the library, by a module pattern, is taken.
    let attach = Attach::start(target.pid, &dir, &["-F", "lib_twice:mod:libattachlib"]);
    std::thread::sleep(Duration::from_millis(200));
    attach.detach();
    let shown = replay(&dir);
    assert!(shown.contains("lib_twice();"), "{shown}");
    assert!(!shown.contains("mid") && !shown.contains("leaf"), "{shown}");
    assert_eq!(target.report().1, 0);
}

/// `ctl filter|notrace` refuses a pattern of no function the runtime
/// knows, and the filter in force stays; `--force` sets it; an empty
/// filter is all.
#[test]
fn ctl_refuses_a_pattern_that_matches_nothing() {
    let work = Work::new("filters-nothing-ctl");
    let (mut target, _fresh) = workload(&work);
    let pid = target.pid.to_string();
    let dir = work.path("c.data");
    let attach = Attach::start(target.pid, &dir, &["-F", "lib_twice"]);
    let before = ctl(target.pid, &["status"]);
    for (verb, pattern) in [
        ("filter", "typo"),
        ("notrace", "nope*"),
        ("filter", "mid:mod:libc"),
    ] {
        let out = fntrace_output(&["ctl", &pid, verb, "leaf", pattern]);
        assert_fails(
            &out,
            1,
            &format!("{verb} '{pattern}' matches no function of process {pid}; the filter in force stays"),
        );
        assert_eq!(ctl(target.pid, &["status"]), before, "the filter changed");
    }
    // Still traced as before.
    std::thread::sleep(Duration::from_millis(200));
    attach.detach();
    let shown = replay(&dir);
    assert!(shown.contains("lib_twice();"), "{shown}");
    assert!(!shown.contains("mid") && !shown.contains("leaf"), "{shown}");

    let attach = Attach::start(target.pid, &work.path("d.data"), &[]);
    let all = patched(&ctl(target.pid, &["status"]));
    assert_eq!(patched(&ctl(target.pid, &["--force", "filter", "typo"])), 0);
    assert_eq!(patched(&ctl(target.pid, &["filter", "lib_twice"])), 1);
    assert_eq!(patched(&ctl(target.pid, &["filter", ""])), all);
    assert_eq!(patched(&ctl(target.pid, &["notrace", ""])), all);
    attach.detach();
    assert_eq!(target.report().1, 0);
}
