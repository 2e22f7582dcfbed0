//! `fntrace record` and `fntrace live`: checks at the edge, the data
//! directory (info.json, DIR.old), the environment given to the runtime,
//! and the command's exit status passed on. Most tests preload a stand-in
//! for the runtime (`FNTRACE_RUNTIME`), so they need neither the runtime
//! nor an instrumented program; the last one runs the real runtime
//! (built first if need be).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;

use common::{assert_fails, cc, fntrace, fntrace_output, Work};

/// `fntrace ARGS...` run in `dir` with `FNTRACE_RUNTIME` set to `runtime`.
fn record_in(dir: &Path, runtime: &Path, args: &[&str]) -> Output {
    fntrace()
        .args(args)
        .current_dir(dir)
        .env("FNTRACE_RUNTIME", runtime)
        .stdin(Stdio::null())
        .output()
        .expect("run fntrace")
}

/// A file that stands in for the runtime: the dynamic loader cannot load
/// it, says so and goes on.
fn fake_runtime(work: &Work) -> PathBuf {
    let path = work.path("libfake.so");
    std::fs::write(&path, b"not a library").unwrap();
    path
}

fn info_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("info.json")).unwrap()).unwrap()
}

#[test]
fn command_not_found() {
    let out = fntrace_output(&["record", "--", "/nonexistent"]);
    assert_fails(&out, 127, "/nonexistent: command not found");
    let out = fntrace_output(&["record", "no-such-command-fntrace"]);
    assert_fails(&out, 127, "no-such-command-fntrace: command not found");
    let work = Work::new("record-not-found");
    let text = work.path("notes.txt");
    std::fs::write(&text, "not a program\n").unwrap();
    let out = fntrace_output(&["record", text.to_str().unwrap()]);
    assert_fails(&out, 126, "notes.txt: permission denied");
    std::fs::set_permissions(&text, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = record_in(
        &work.dir,
        &fake_runtime(&work),
        &["record", "--force", "./notes.txt"],
    );
    assert_eq!(out.status.code(), Some(126));
    assert!(String::from_utf8_lossy(&out.stderr).contains("notes.txt: cannot execute: "));
}

#[test]
fn program_without_sites() {
    let work = Work::new("record-nosites");
    let src = work.path("plain.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let exe = work.path("plain");
    cc(
        "gcc",
        &["-O2", src.to_str().unwrap(), "-o", exe.to_str().unwrap()],
    );
    // A plain build is traced through its functions' own code: only one
    // without symbols or unwind data has nothing to patch.
    common::strip_functions(&exe);
    let out = fntrace_output(&["record", "--", exe.to_str().unwrap()]);
    assert_fails(&out, 1, "no patchable sites (");
    assert!(!work.path("fntrace.data").exists());
}

#[test]
fn bad_options_are_usage_errors() {
    for (args, what) in [
        (&["-T", "main"][..], "bad trigger 'main'"),
        (&["-T", "main@trace_maybe"][..], "unknown action 'trace_maybe'"),
        (&["-T", "main@depth=0"][..], "depth=N"),
        (&["-t", "5 parsecs"][..], "bad duration"),
        (&["-t", "1.5ns"][..], "bad duration"),
        (&["--buffer-size", "0"][..], "bad size"),
        (&["--flight-recorder", "4T"][..], "bad size"),
        (&["-F", "a,b"][..], "comma"),
        (&["-D", "0"][..], "--depth"),
        (&["--tracer", "irq"][..], "--tracer"),
    ] {
        let mut all = vec!["record"];
        all.extend(args);
        all.extend(["--", "true"]);
        let out = fntrace_output(&all);
        assert_fails(&out, 2, what);
    }
    let out = fntrace_output(&["record"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn exit_status_and_info_json() {
    let work = Work::new("record-exit");
    let runtime = fake_runtime(&work);
    let out = record_in(
        &work.dir,
        &runtime,
        &["record", "--force", "-D", "5", "-t", "2us", "sh", "-c", "exit 3"],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fntrace: warning: nothing was recorded in fntrace.data"),
        "{stderr}"
    );
    let info = info_json(&work.path("fntrace.data"));
    assert_eq!(info["version"], 1);
    assert_eq!(info["command"], serde_json::json!(["sh", "-c", "exit 3"]));
    assert_eq!(info["tracer"], "function_graph");
    assert_eq!(info["exit_status"], 3);
    assert_eq!(info["signal"], Value::Null);
    assert_eq!(info["options"]["depth"], 5);
    assert_eq!(info["options"]["time_filter_ns"], 2000);
    assert!(info["end_unix_ns"].as_u64().unwrap() >= info["start_unix_ns"].as_u64().unwrap());
    assert_eq!(info["cwd"], work.dir.to_str().unwrap());
}

#[test]
fn killed_by_signal() {
    let work = Work::new("record-signal");
    let runtime = fake_runtime(&work);
    let out = record_in(
        &work.dir,
        &runtime,
        &[
            "record",
            "--force",
            "-o",
            "sig.data",
            "--",
            "sh",
            "-c",
            "kill -SEGV $$",
        ],
    );
    assert_eq!(out.status.code(), Some(139));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fntrace: sh: killed by signal 11 (SIGSEGV)\n"),
        "{stderr}"
    );
    let info = info_json(&work.path("sig.data"));
    assert_eq!(info["signal"], 11);
    assert_eq!(info["exit_status"], Value::Null);
}

#[test]
fn environment_for_the_runtime() {
    let work = Work::new("record-env");
    let runtime = fake_runtime(&work);
    let out = fntrace()
        .args([
            "record",
            "--force",
            "-F",
            "main",
            "-F",
            "work_*",
            "-N",
            "log",
            "-T",
            "main@trace_on,depth=2",
        ])
        .args([
            "-T",
            "f@trace_off",
            "--graph-function",
            "g",
            "-D",
            "3",
            "-t",
            "1.5ms",
            "--tracer",
            "function",
        ])
        .args([
            "--buffer-size",
            "512K",
            "--flight-recorder",
            "4M",
            "--",
            "sh",
            "-c",
            "env | grep -E '^(FNTRACE|LD_PRELOAD)' | sort; echo \"parent $PPID\"",
        ])
        .current_dir(&work.dir)
        .env("FNTRACE_RUNTIME", &runtime)
        .env("LD_PRELOAD", "")
        .env("FNTRACE_STALE", "x")
        .env("FNTRACE_DEPTH", "99")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let env = String::from_utf8(out.stdout).unwrap();
    // The command's parent is fntrace record: the runtime is told its pid
    // (a process whose parent it is not is a child of the command).
    let parent = env.lines().find_map(|l| l.strip_prefix("parent ")).unwrap();
    let data = work.path("fntrace.data");
    let expected = format!(
        "FNTRACE_BUFFER_SIZE=524288\nFNTRACE_DATA={}\nFNTRACE_DEPTH=3\nFNTRACE_FILTER=main,work_*\n\
         FNTRACE_FLIGHT=4194304\nFNTRACE_GRAPH_FUNCTION=g\nFNTRACE_NOTRACE=log\nFNTRACE_RECORDER={parent}\nFNTRACE_RUNTIME={}\n\
         FNTRACE_STALE=x\nFNTRACE_TIME_FILTER=1500000\nFNTRACE_TRACER=function\n\
         FNTRACE_TRIGGERS=main@trace_on,depth=2;f@trace_off\nLD_PRELOAD={}\nparent {parent}\n",
        data.display(),
        runtime.display(),
        runtime.display()
    );
    assert_eq!(env, expected);
}

#[test]
fn old_data_directory_is_kept() {
    let work = Work::new("record-old");
    let runtime = fake_runtime(&work);
    for code in ["1", "2", "3"] {
        let out = record_in(
            &work.dir,
            &runtime,
            &["record", "--force", "sh", "-c", &format!("exit {code}")],
        );
        assert_eq!(out.status.code(), Some(code.parse().unwrap()));
    }
    assert_eq!(info_json(&work.path("fntrace.data"))["exit_status"], 3);
    assert_eq!(info_json(&work.path("fntrace.data.old"))["exit_status"], 2);
    // Anything else in the way is left alone.
    std::fs::create_dir_all(work.path("mine")).unwrap();
    std::fs::write(work.path("mine/notes.txt"), "keep").unwrap();
    let out = record_in(&work.dir, &runtime, &["record", "--force", "-o", "mine", "true"]);
    assert_fails(&out, 1, "mine exists and is not a fntrace data directory");
    assert!(work.path("mine/notes.txt").exists());
}

#[test]
fn missing_runtime() {
    let work = Work::new("record-no-runtime");
    let out = record_in(&work.dir, &work.path("nope.so"), &["record", "--force", "true"]);
    assert_fails(&out, 1, "FNTRACE_RUNTIME=");
    assert!(!work.path("fntrace.data").exists());
}

#[test]
fn live_runs_records_replays_and_cleans_up() {
    let work = Work::new("live-exit");
    let runtime = fake_runtime(&work);
    let out = record_in(
        &work.dir,
        &runtime,
        &[
            "live",
            "--force",
            "--color",
            "never",
            "sh",
            "-c",
            "echo hello; exit 4",
        ],
    );
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no process was recorded"), "{stderr}");
    let out = fntrace_output(&["live", "--", "/nonexistent"]);
    assert_fails(&out, 127, "command not found");
}

/// With the real runtime (built if need be): a program built with `-pg
/// -mfentry` exits 3, and `record` passes that on and keeps it in
/// `info.json`.
#[test]
fn real_runtime_exit_status() {
    common::procs::runtime();
    let work = Work::new("record-real");
    let src = work.path("three.c");
    std::fs::write(
        &src,
        "int work(int x) { return x + 1; }\nint main(void) { return work(2); }\n",
    )
    .unwrap();
    let exe = work.path("three");
    cc(
        "gcc",
        &[
            "-O0",
            "-pg",
            "-mfentry",
            "-mrecord-mcount",
            src.to_str().unwrap(),
            "-o",
            exe.to_str().unwrap(),
        ],
    );
    let out = fntrace()
        .args(["record", "--", "./three"])
        .current_dir(&work.dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = info_json(&work.path("fntrace.data"));
    assert_eq!(info["exit_status"], 3);
    assert_eq!(info["command"], serde_json::json!(["./three"]));
}

/// `live` never writes into the program's output (#21): with standard
/// output a pipe (`prog | gzip`), the program's bytes are all that goes
/// there, and the trace follows on standard error after a note saying so;
/// `-o FILE` puts it in a file instead (and nothing else on standard
/// error); a file that cannot be written is refused before anything runs;
/// on a terminal (`script`'s) the trace follows on standard output, as
/// uftrace's does, without the note.
#[test]
fn live_never_writes_into_the_programs_output() {
    common::procs::runtime();
    let work = Work::new("live-output");
    let src = work.path("talk.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint twice(int x) { return 2 * x; }\n\
         int main(void) { printf(\"payload %d\\n\", twice(21)); return 0; }\n",
    )
    .unwrap();
    let exe = work.path("talk");
    cc(
        "gcc",
        &[
            "-O0",
            "-pg",
            "-mfentry",
            src.to_str().unwrap(),
            "-o",
            exe.to_str().unwrap(),
        ],
    );
    let note = "the trace follows on standard error";
    let run = |args: &[&str]| {
        let out = fntrace().args(args).current_dir(&work.dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (stdout, stderr) = run(&["live", "--color", "never", "--", "./talk"]);
    assert_eq!(stdout, "payload 42\n", "the program's output, alone");
    let (said, trace) = stderr.split_once('\n').unwrap();
    assert!(said.starts_with("fntrace: ") && said.contains(note), "{stderr}");
    assert!(trace.contains("twice();"), "{stderr}");

    let (stdout, stderr) = run(&["live", "--color", "never", "-o", "trace.txt", "--", "./talk"]);
    assert_eq!(stdout, "payload 42\n");
    assert_eq!(stderr, "", "nothing but the program's on standard error");
    let file = std::fs::read_to_string(work.path("trace.txt")).unwrap();
    assert!(file.contains("twice();") && file.contains("main() {"), "{file}");
    // The same calls either way (times and thread ids differ by run).
    let calls = |t: &str| -> Vec<String> {
        t.lines()
            .filter_map(|l| l.split_once('|').map(|(_, f)| f.to_string()))
            .collect()
    };
    assert_eq!(calls(&file), calls(trace), "the same trace either way");

    let out = fntrace_output(&[
        "live",
        "-o",
        "/nonexistent/dir/trace.txt",
        "--",
        exe.to_str().unwrap(),
    ]);
    assert_fails(&out, 1, "cannot write the trace to /nonexistent/dir/trace.txt");
    // Nothing traced, nothing left: a command that is not found.
    let out = fntrace()
        .args(["live", "-o", "gone.txt", "--", "/nonexistent"])
        .current_dir(&work.dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(!work.path("gone.txt").exists(), "no trace file for no trace");

    common::require("script");
    let command = format!(
        "exec {} live --color never -- ./talk",
        env!("CARGO_BIN_EXE_fntrace")
    );
    let out = std::process::Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .current_dir(&work.dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(seen.contains("payload 42") && seen.contains("twice();"), "{seen}");
    assert!(!seen.contains(note), "{seen}");
}

/// A plain build whose functions take each bare form (issue 19): the one
/// that loops back to its entry is left alone, the one-byte one is traced
/// through a trap, and record's last line says both; the program's output
/// is its own, and the patched ones are in the trace.
#[test]
fn bare_forms_are_said_where_the_user_looks() {
    let work = Work::new("record-bare-forms");
    let exe = work.path("forms");
    let src = common::program("c/bare_forms.c");
    cc("gcc", &["-O2", &src, "-o", exe.to_str().unwrap()]);
    let data = work.path("forms.data");
    let out = fntrace_output(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0 7\n");
    assert!(
        stderr.contains(
            "1 selected function could not be patched and was not traced ('fntrace list --sites' says why); \
             1 function traced through a trap, a signal per call"
        ),
        "{stderr}"
    );
    let replay = fntrace_output(&["replay", data.to_str().unwrap()]);
    let replay = String::from_utf8_lossy(&replay.stdout);
    for f in ["main() {", "tiny();", "after();"] {
        assert!(replay.contains(f), "{f} not in:\n{replay}");
    }
    assert!(!replay.contains("spin"), "{replay}");
}

/// A program that installs its own SIGTRAP handler and blocks SIGTRAP
/// (`own_sigtrap.c`): the runtime keeps SIGTRAP its own (`sigguard.rs`),
/// so the program's handler runs for its own trap only, and its traced
/// calls — one through a trap site, one through a jump — never kill it
/// (before the interposition: killed by SIGTRAP at the first call).
#[test]
fn a_program_taking_sigtrap_for_itself_is_not_killed() {
    let work = Work::new("record-own-sigtrap");
    let exe = work.path("own");
    let src = common::program("c/own_sigtrap.c");
    cc("gcc", &["-O2", "-pthread", &src, "-o", exe.to_str().unwrap()]);
    let data = work.path("own.data");
    let out = fntrace_output(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "own=1 calls=1000 sum=1499500\n"
    );
    let calls = calls_of(&data);
    assert_eq!(calls("tiny"), Some(1000));
    assert_eq!(calls("ramp"), Some(1000));
    assert_eq!(calls("on_trap"), Some(1));
}

/// C++ exceptions thrown through bare functions whose displaced bytes end
/// in a call (`bare_throw.cc`), under every tracer: the output is the
/// program's, and every call is counted (the unwinder finds the original
/// return addresses: a displaced call pushes the original one).
#[test]
fn exceptions_through_bare_functions() {
    let work = Work::new("record-bare-throw");
    let exe = work.path("throw");
    let src = common::program("cxx/bare_throw.cc");
    cc("g++", &["-O2", &src, "-o", exe.to_str().unwrap()]);
    for tracer in ["function_graph", "function", "profile"] {
        let data = work.path(&format!("{tracer}.data"));
        let out = fntrace_output(&[
            "record",
            "--tracer",
            tracer,
            "-o",
            data.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{tracer}: {stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "s=6003000\n", "{tracer}");
        let calls = calls_of(&data);
        for name in ["outer(int)", "wrapper(int)", "thrower(int)"] {
            assert_eq!(calls(name), Some(3000), "{tracer}: {name}");
        }
    }
}

/// The calls of each function in the recording `data` (`report --json`),
/// by name.
fn calls_of(data: &std::path::Path) -> impl Fn(&str) -> Option<u64> {
    let report = fntrace_output(&["report", "--json", data.to_str().unwrap()]);
    let rows: serde_json::Value = serde_json::from_slice(&report.stdout).expect("report --json");
    move |name| {
        rows.as_array()?
            .iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r["calls"].as_u64())
    }
}
