//! `fntrace attach` refusing what it must refuse (one line, the process
//! left running and untouched), and the sessions' other endings and
//! tracers: C++ exceptions while attached, the process exiting, `fntrace
//! ctl PID detach`, `--tracer profile` per session. The harness is
//! `common/attach.rs`.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use common::attach::*;
use common::{fntrace, fntrace_ok, procs, Work};

/// A program that sleeps until killed (no instrumentation needed).
const SLEEPER: &str = "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n";

/// Starts `bin` (in its own process group) and waits until it runs.
fn spawn_sleeper(bin: &Path) -> Child {
    let child = Command::new(bin).process_group(0).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    child
}

/// Whether process `pid` is running (not stopped, not a zombie).
fn running(pid: u32) -> bool {
    matches!(state_letter(pid as i32), Some('S' | 'R'))
}

/// Every refusal is one line, exit status 1, and leaves the process
/// running, untouched (no runtime mapped).
#[test]
fn attach_errors() {
    procs::runtime();
    let work = Work::new("attach-errors");
    let attach = |pid: u32| {
        common::fntrace_output(&[
            "attach",
            &pid.to_string(),
            "-o",
            work.path("e.data").to_str().unwrap(),
        ])
    };

    // No such process.
    common::assert_fails(&attach(99_999_999), 1, "no process with PID");

    // No patchable sites: the workload built without instrumentation, and
    // without the symbols and unwind data its functions are found by.
    let plain = build_workload(&work, "gcc", &[], &[]);
    common::strip_functions(&plain);
    let mut target = Target::start(&plain, &work);
    common::assert_fails(&attach(target.pid as u32), 1, "has no patchable sites");
    assert!(!has_runtime(target.pid));
    assert_eq!(target.report().1, 0);

    // Not attached: ctl says so.
    let out = common::fntrace_output(&["ctl", &target.pid.to_string(), "status"]);
    common::assert_fails(&out, 1, "is not attached");
    drop(target);

    // Another architecture: a 32-bit x86 program (from Debian's i686
    // cross compiler, static: gcc-multilib, which would link it dynamically,
    // cannot be installed beside the MIPS and AArch64 cross compilers).
    let sleeper_c = work.path("sleeper.c");
    std::fs::write(&sleeper_c, SLEEPER).unwrap();
    let m32 = work.path("sleeper32");
    common::cc(
        "i686-linux-gnu-gcc",
        &[
            "-static",
            "-pg",
            sleeper_c.to_str().unwrap(),
            "-o",
            m32.to_str().unwrap(),
        ],
    );
    let mut child = spawn_sleeper(&m32);
    common::assert_fails(&attach(child.id()), 1, "32-bit x86");
    assert!(running(child.id()));
    child.kill().unwrap();
    child.wait().unwrap();

    // A static program: no dynamic loader to load the runtime with.
    let stat = work.path("sleeper-static");
    common::cc(
        "gcc",
        &[
            "-static",
            "-pg",
            "-mfentry",
            sleeper_c.to_str().unwrap(),
            "-o",
            stat.to_str().unwrap(),
        ],
    );
    let mut child = spawn_sleeper(&stat);
    common::assert_fails(&attach(child.id()), 1, "statically linked");
    assert!(running(child.id()));

    // A stopped process is left stopped.
    let dynamic = work.path("sleeper");
    common::cc(
        "gcc",
        &[
            "-pg",
            "-mfentry",
            sleeper_c.to_str().unwrap(),
            "-o",
            dynamic.to_str().unwrap(),
        ],
    );
    let mut stopped = spawn_sleeper(&dynamic);
    procs::kill_group(stopped.id(), 19);
    std::thread::sleep(Duration::from_millis(50));
    common::assert_fails(&attach(stopped.id()), 1, "stopped");
    procs::kill_group(stopped.id(), 18);
    std::thread::sleep(Duration::from_millis(50));
    assert!(running(stopped.id()));
    assert!(!has_runtime(stopped.id() as i32));

    // No permission: fntrace as another user (as root: nobody), or a
    // process of root's (as another user).
    let victim = if procs::uid() == 0 { stopped.id() } else { 1 };
    let mut cmd = if procs::uid() == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_fntrace"));
        c
    } else {
        fntrace()
    };
    cmd.args(["attach", &victim.to_string(), "-o", "/tmp/fntrace-nobody.data"]);
    let out = procs::run(&mut cmd, Duration::from_secs(60));
    common::assert_fails(&out, 1, "permission denied");
    assert!(
        procs::text(&out.stderr).contains("ptrace"),
        "{}",
        procs::text(&out.stderr)
    );
    assert!(running(stopped.id()) && !has_runtime(stopped.id() as i32));
    for c in [&mut child, &mut stopped] {
        c.kill().unwrap();
        c.wait().unwrap();
    }

    // Usage errors of ctl.
    let out = common::fntrace_output(&["ctl", "1", "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let out = common::fntrace_output(&["ctl", &std::process::id().to_string(), "depth", "abc"]);
    common::assert_fails(&out, 1, "depth takes a number");
}

/// C++ exceptions thrown through traced frames while attached: the runtime
/// hooks the unwinder's entry points in the GOT (it interposes nothing in a
/// process it was injected into), so every hijacked return address is put
/// back before the unwinder reads the stack. Without that the process dies
/// in `std::terminate`.
#[test]
fn exceptions_while_attached() {
    procs::runtime();
    let work = Work::new("attach-throw");
    let bin = work.path("throw");
    common::cc(
        "g++",
        &[
            "-O2",
            "-pg",
            "-mfentry",
            &common::program("attach/throw.cc"),
            "-o",
            bin.to_str().unwrap(),
            "-lpthread",
        ],
    );
    let mut target = Target::start(&bin, &work);
    for cycle in 0..3 {
        let dir = work.path(&format!("t{cycle}.data"));
        let attach = Attach::start(target.pid, &dir, &[]);
        std::thread::sleep(Duration::from_millis(300));
        attach.detach();
        let text = replay(&dir);
        assert!(text.contains("thrower(int)"), "{text}");
        let (rounds, bad, _, _) = target.report();
        assert_eq!(bad, 0);
        assert!(rounds > 0);
    }
    assert_eq!(target.quit().1, 0);
}

/// The process ends while attached: `fntrace attach` ends with it, and the
/// trace (written by the runtime's exit handler) is whole.
#[test]
fn target_exits_while_attached() {
    procs::runtime();
    let work = Work::new("attach-exit");
    let bin = build(&work, &FENTRY);
    let target = Target::start(&bin, &work);
    let pid = target.pid;
    let dir = work.path("exit.data");
    let mut attach = Attach::start(pid, &dir, &[]);
    std::thread::sleep(Duration::from_millis(150));
    // The path the test computes is the session's: there while attached.
    assert!(control_socket(pid).exists(), "no control socket while attached");
    assert_eq!(target.quit().1, 0);
    let out = attach.wait();
    let said = procs::text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("exited"), "{said}");
    assert!(!control_socket(pid).exists(), "the stale socket was left");
    assert!(check_calls(&replay(&dir), false).0 > 0);
    let info = fntrace_ok(&["info", dir.to_str().unwrap()]).0;
    assert!(info.contains("exited while attached"), "{info}");
}

/// A process traced since its start (`fntrace record`) and one attached
/// already are refused; `fntrace ctl PID detach` ends an attach session.
#[test]
fn attach_refuses_traced_processes() {
    procs::runtime();
    let work = Work::new("attach-traced");
    let bin = build(&work, &PATCHABLE);
    let attach = |pid: i32, dir: &str| {
        common::fntrace_output(&["attach", &pid.to_string(), "-o", work.path(dir).to_str().unwrap()])
    };

    let mut recorded = Target::spawn(
        fntrace()
            .args(["record", "-o", work.path("rec.data").to_str().unwrap()])
            .arg(&bin)
            .current_dir(&work.dir),
    );
    common::assert_fails(&attach(recorded.pid, "x.data"), 1, "is already traced");
    assert!(!work.path("x.data").exists(), "a data directory was left");
    assert_eq!(recorded.report().1, 0);

    let target = Target::start(&bin, &work);
    let mut first = Attach::start(target.pid, &work.path("a.data"), &[]);
    common::assert_fails(&attach(target.pid, "b.data"), 1, "is already attached");
    assert!(ctl(target.pid, &["detach"]).contains("restored="));
    let out = first.wait();
    assert!(out.status.success(), "{}", procs::text(&out.stderr));
    // attach says how it ended, as for Ctrl-C and --duration.
    let said = procs::text(&out.stderr);
    let line = format!(
        "fntrace: detached from {} by 'fntrace ctl {0} detach'",
        target.pid
    );
    assert!(said.contains(&line), "{said}");
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.path("a.data/info.json")).unwrap()).unwrap();
    assert_eq!(info["attach"]["ended_by"], "detached");
    let fresh = Target::start(&bin, &work);
    assert_same_code(target.pid, fresh.pid, "after ctl detach");
}

/// Each attach session has its own counts: `--tracer profile` twice on one
/// process; parked() returns exactly once per `tick`, so its calls are
/// known in each session.
#[test]
fn profile_per_session() {
    procs::runtime();
    let work = Work::new("attach-profile");
    let bin = build(&work, &FENTRY);
    let mut target = Target::start(&bin, &work);
    let calls_of_parked = |dir: &Path| -> u64 {
        let report = fntrace_ok(&["report", dir.to_str().unwrap()]).0;
        let line = report
            .lines()
            .find(|l| l.trim_end().ends_with(" parked"))
            .unwrap_or_else(|| panic!("{report}"));
        line.split_whitespace().nth(4).unwrap().parse().unwrap()
    };
    // Session 1: parked() was entered before the attach (not traced); the
    // first tick ends that call and enters a traced one; each later tick
    // ends one traced call. Session 2 begins with that call open.
    for (session, ticks, expected) in [(1, 3, 2), (2, 2, 2)] {
        let dir = work.path(&format!("p{session}.data"));
        let attach = Attach::start(target.pid, &dir, &["--tracer", "profile"]);
        for _ in 0..ticks {
            target.cmd("tick");
        }
        attach.detach();
        assert_eq!(calls_of_parked(&dir), expected, "session {session}");
    }
    assert_eq!(target.quit().1, 0);
}

/// Ctrl-C at any moment of an attach ends with the process detached (or
/// never attached): never with fntrace gone and the session left open.
#[test]
fn interrupt_at_any_moment() {
    procs::runtime();
    let work = Work::new("attach-interrupt");
    let bin = build(&work, &PATCHABLE);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    for delay in [0, 2, 5, 10, 20, 40, 80] {
        let dir = work.path(&format!("i{delay}.data"));
        let child = fntrace()
            .args(["attach", &target.pid.to_string(), "-o", dir.to_str().unwrap()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        procs::kill_group(child.id(), 2);
        // A SIGINT that comes before fntrace's `main` sets its handler is
        // lost where SIGINT is ignored (a non-interactive shell ignores it
        // in what it starts in the background, and the ignore is
        // inherited): Ctrl-C again, as a user would, while it still runs.
        let mut child = child;
        let mut last = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if last.elapsed() > Duration::from_secs(3) {
                procs::kill_group(child.id(), 2);
                last = std::time::Instant::now();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().unwrap();
        let said = procs::text(&out.stderr);
        // Killed by the signal: it came before fntrace's `main` set its
        // handler, the first thing it does (nothing was touched).
        let before_main = std::os::unix::process::ExitStatusExt::signal(&out.status) == Some(2);
        assert!(
            out.status.success() || said.contains("interrupted before attaching") || before_main,
            "delay {delay} ms: {said}"
        );
        let status = common::fntrace_output(&["ctl", &target.pid.to_string(), "status"]);
        common::assert_fails(&status, 1, "is not attached");
        assert_same_code(target.pid, fresh.pid, &format!("delay {delay} ms"));
    }
    assert_eq!(target.report().1, 0);
}
