//! Signals to `fntrace record` and `fntrace live` (SIGTERM from a service
//! manager, `kill`, `timeout`): fntrace passes them to the traced program,
//! waits for it, completes `info.json` and exits with the program's status
//! (128 + N when signal N killed it). The program is never left running
//! behind fntrace, and gets each signal once.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::attach::Target;
use common::{fntrace, procs, Work};
use serde_json::Value;

/// Calls `tick()` and prints `ready PID` once its handlers are in place
/// (with an argument: its own for SIGTERM, SIGINT, SIGHUP and SIGQUIT;
/// without: the defaults), then calls `tick()` until a signal comes; with handlers it
/// then waits a little (a second copy of the signal would be counted),
/// says which signal and how many, and exits with 10 + the signal.
const PROGRAM: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static volatile sig_atomic_t got, count;
static void on(int s) { got = s; count++; }
static volatile int sink;
__attribute__((noinline)) int tick(int i) { sink = i; return i + 1; }
int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        struct sigaction sa = {0};
        sa.sa_handler = on;
        int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
        for (int i = 0; i < 4; i++) sigaction(sigs[i], &sa, NULL);
    }
    int i = tick(0);
    printf("ready %d\n", getpid());
    fflush(stdout);
    for (;; i = tick(i)) {
        if (got) {
            usleep(200000);
            printf("got %d count %d\n", got, count);
            return 10 + got;
        }
        usleep(1000);
    }
}
"#;

fn build(work: &Work) -> PathBuf {
    common::build_c(work, "sig", PROGRAM, &["-O1", "-pg", "-mfentry"])
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Runs `fntrace COMMAND -o DIR ./sig [handle]` until the program is
/// ready, sends `signal` to fntrace alone, and returns fntrace's exit code,
/// the rest of its standard output (the program's, and `live`'s replay) and
/// the program's pid, which must be gone by then.
fn signal_fntrace(work: &Work, args: &[&str], handle: bool, signal: i32) -> (Option<i32>, String, i32) {
    let mut cmd = fntrace();
    cmd.args(args).arg("./sig").current_dir(&work.dir);
    if handle {
        cmd.arg("handle");
    }
    let mut target = Target::spawn(&mut cmd);
    procs::kill_one(target.child.id(), signal);
    let status = procs::wait_for(&mut target.child, Duration::from_secs(60));
    if Path::new(&format!("/proc/{}", target.pid)).exists() {
        procs::kill_one(target.pid as u32, 9);
        panic!("signal {signal}: fntrace ended ({status}) and left the program running");
    }
    let mut rest = String::new();
    target.stdout.read_to_string(&mut rest).unwrap();
    (status.code(), rest, target.pid)
}

#[test]
fn record_passes_signals_on() {
    procs::runtime();
    let work = Work::new("record-signals");
    build(&work);
    // A program that handles them: it gets each once and its status is
    // fntrace's.
    for (signal, name) in [(15, "SIGTERM"), (2, "SIGINT"), (1, "SIGHUP"), (3, "SIGQUIT")] {
        let dir = work.path(&format!("{name}.data"));
        let args = ["record", "-o", dir.to_str().unwrap()];
        let (code, rest, _) = signal_fntrace(&work, &args, true, signal);
        assert_eq!(code, Some(10 + signal), "{name}: {rest}");
        assert_eq!(rest, format!("got {signal} count 1\n"), "{name}");
        let info = json(&dir.join("info.json"));
        assert_eq!(info["exit_status"], 10 + signal, "{name}: {info}");
        assert!(info["end_unix_ns"].as_u64().is_some(), "{name}: {info}");
    }
    // A program that leaves SIGTERM at its default: it dies of it, after the
    // runtime wrote its buffers; fntrace exits 128 + 15.
    let dir = work.path("default.data");
    let (code, rest, pid) = signal_fntrace(&work, &["record", "-o", dir.to_str().unwrap()], false, 15);
    assert_eq!(code, Some(143), "{rest}");
    let info = json(&dir.join("info.json"));
    assert_eq!(info["signal"], 15, "{info}");
    assert_eq!(info["exit_status"], Value::Null, "{info}");
    let process = json(&dir.join(format!("p{pid}/process.json")));
    assert_eq!(process["ended"], true, "{process}");
    let replay = common::fntrace_ok(&["replay", dir.to_str().unwrap()]).0;
    assert!(replay.contains("tick();"), "{replay}");
}

#[test]
fn live_passes_signals_on() {
    procs::runtime();
    let work = Work::new("live-signals");
    build(&work);
    let trace = work.path("live.txt");
    let args = ["live", "--color", "never", "-o", trace.to_str().unwrap()];
    let (code, rest, _) = signal_fntrace(&work, &args, true, 15);
    assert_eq!(code, Some(25), "{rest}");
    assert_eq!(rest, "got 15 count 1\n", "the program's output, alone");
    let replay = std::fs::read_to_string(&trace).unwrap();
    assert!(replay.contains("tick();"), "the replay: {replay}");
}

/// Ctrl-C on a terminal: the terminal sends SIGINT to the whole foreground
/// process group, the program included; fntrace must not send it a second
/// one. The terminal is a real pseudo-terminal (`script`). `script` runs
/// the command through `$SHELL -c`, and dash (Debian's `/bin/sh`) stays as
/// fntrace's parent in the foreground group, where the Ctrl-C kills it:
/// hence `exec`, and the shell named.
#[test]
fn terminal_ctrl_c_reaches_the_program_once() {
    procs::runtime();
    common::require("script");
    let work = Work::new("record-ctrl-c");
    build(&work);
    let command = format!(
        "exec {} record -o tty.data ./sig handle",
        env!("CARGO_BIN_EXE_fntrace")
    );
    let mut script = std::process::Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .current_dir(&work.dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = script.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(script.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert!(line.starts_with("ready "), "{line}");
    std::io::Write::write_all(&mut stdin, b"\x03").unwrap();
    let status = procs::wait_for(&mut script, Duration::from_secs(60));
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("got 2 count 1\r\n"), "{rest:?}");
    assert_eq!(status.code(), Some(12), "{rest:?}");
    let info = json(&work.path("tty.data/info.json"));
    assert_eq!(info["exit_status"], 12, "{info}");
}

/// A terminating signal at the very start of `main`, before the runtime's
/// writer thread may have run at all: the runtime's handler still gets the
/// final flush (the writer counts as running from its start), so the trace
/// is whole and `process.json` says the process ended. Twenty times: before
/// the fix about a third of such runs lost the trace's end.
#[test]
fn signal_at_start_still_writes_the_trace() {
    procs::runtime();
    let work = Work::new("record-signal-at-start");
    let source = "#include <signal.h>\n\
        __attribute__((noinline)) int first(int x) { return x + 1; }\n\
        int main(void) { volatile int v = first(1); (void)v; raise(SIGTERM); return 0; }\n";
    common::build_c(&work, "early", source, &["-O1", "-pg", "-mfentry"]);
    for run in 0..20 {
        let dir = work.path("early.data");
        let out = procs::run(
            fntrace()
                .args(["record", "-o", dir.to_str().unwrap(), "./early"])
                .current_dir(&work.dir),
            Duration::from_secs(60),
        );
        assert_eq!(
            out.status.code(),
            Some(143),
            "run {run}: {}",
            procs::text(&out.stderr)
        );
        assert_eq!(json(&dir.join("info.json"))["signal"], 15, "run {run}");
        let info = json(&common::process_dir(&dir).join("process.json"));
        assert_eq!(info["ended"], true, "run {run}: {info}");
        let replay = common::fntrace_ok(&["replay", dir.to_str().unwrap()]).0;
        assert!(replay.contains("first();"), "run {run}: {replay}");
    }
}
