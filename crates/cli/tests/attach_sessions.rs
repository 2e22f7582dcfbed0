//! One `fntrace attach` per process, and the control directory kept clean:
//! a second attach to a process is refused at once, naming the fntrace
//! that has it, and the first goes on with its own settings; the sockets
//! (and settings and lock files) left by processes that died, or whose pid
//! now belongs to a process without a session, are removed by the next
//! `fntrace attach` or `fntrace ctl`, while a live session's stays. The
//! harness is `common/attach.rs`.

mod common;

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::attach::*;
use common::{fntrace, procs, Work};

/// `fntrace attach PID -o DIR ARGS` run to its end (a refusal).
fn attach_output(pid: i32, dir: &Path, args: &[&str]) -> std::process::Output {
    let pid = pid.to_string();
    let mut all = vec!["attach", pid.as_str(), "-o", dir.to_str().unwrap()];
    all.extend(args);
    common::fntrace_output(&all)
}

/// The control directory's file `NAME` (`PID.sock`, `PID.conf`, `PID.lock`).
fn control_file(name: &str) -> PathBuf {
    control_socket(0).with_file_name(name)
}

/// A socket file nobody listens on, as a runtime that died leaves it.
fn dead_socket(path: &Path) {
    let _ = std::fs::remove_file(path);
    drop(UnixListener::bind(path).unwrap());
    assert!(path.exists());
}

#[test]
fn second_attach_is_refused_by_name() {
    procs::runtime();
    let work = Work::new("attach-twice");
    let bin = build(&work, &PATCHABLE);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    let first = Attach::start(target.pid, &work.path("a.data"), &["-P", "mid"]);
    let started = Instant::now();
    let out = attach_output(target.pid, &work.path("b.data"), &["-P", "leaf"]);
    common::assert_fails(
        &out,
        1,
        &format!("is already attached by fntrace attach (pid {})", first.child.id()),
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the refusal took {:?}",
        started.elapsed()
    );
    assert!(
        !work.path("b.data").exists(),
        "the refused attach made its directory"
    );
    target.cmd("tick");
    // SIGTERM to the first: it detaches, with its own settings throughout.
    let mut first = first;
    procs::kill_group(first.child.id(), 15);
    let out = first.wait();
    let said = procs::text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("fntrace: detached from"), "{said}");
    let text = replay(&work.path("a.data"));
    assert!(text.contains("mid();"), "no mid(); line:\n{text}");
    assert!(
        !text.contains("leaf"),
        "the second attach's filter was used:\n{text}"
    );
    assert_same_code(target.pid, fresh.pid, "after the detach");
    assert_eq!(target.report().1, 0);
    // Nothing of either attach is left in the control directory.
    for suffix in ["sock", "conf", "lock"] {
        let file = control_file(&format!("{}.{suffix}", target.pid));
        assert!(!file.exists(), "{} was left", file.display());
    }
}

#[test]
fn stale_control_files_are_removed() {
    procs::runtime();
    let work = Work::new("attach-stale");
    let bin = build(&work, &FENTRY);

    // A process attached by a fntrace that was killed outright: its session
    // stays open, and its socket is not stale.
    let orphan = Target::start(&bin, &work);
    let mut attach = Attach::start(orphan.pid, &work.path("o.data"), &[]);
    procs::kill_group(attach.child.id(), 9);
    let _ = attach.wait();
    assert!(ctl(orphan.pid, &["status"]).contains("tracing=on"));
    // Killed in its turn: its socket is left behind.
    let socket = control_socket(orphan.pid);
    let gone_pid = orphan.pid;
    drop(orphan);
    assert!(socket.exists(), "the dead runtime's socket");
    std::fs::write(control_file(&format!("{gone_pid}.conf")), "FNTRACE_DATA=/x\n").unwrap();

    // A process that never had a session, with a socket of its pid (as
    // when a crashed process's pid is reused), and one that runs the
    // runtime from its start (fntrace record) with one too.
    let reused = Target::start(&bin, &work);
    dead_socket(&control_socket(reused.pid));
    let recorded = Target::spawn(
        fntrace()
            .args(["record", "-o", work.path("rec.data").to_str().unwrap()])
            .arg(&bin)
            .current_dir(&work.dir),
    );
    assert!(has_runtime(recorded.pid));
    dead_socket(&control_socket(recorded.pid));

    // A live session (its fntrace killed too) keeps its socket.
    let live = Target::start(&bin, &work);
    let mut attach = Attach::start(live.pid, &work.path("l.data"), &[]);
    procs::kill_group(attach.child.id(), 9);
    let _ = attach.wait();

    let out = common::fntrace_output(&["ctl", &reused.pid.to_string(), "status"]);
    common::assert_fails(&out, 1, "is not attached");
    for file in [
        socket.clone(),
        control_file(&format!("{gone_pid}.conf")),
        control_socket(reused.pid),
        control_socket(recorded.pid),
    ] {
        assert!(!file.exists(), "{} was not removed", file.display());
    }
    assert!(
        control_socket(live.pid).exists(),
        "the live session's socket was removed"
    );
    assert!(ctl(live.pid, &["detach"]).contains("restored="));

    // `fntrace attach` cleans too.
    dead_socket(&control_socket(gone_pid));
    let attach = Attach::start(reused.pid, &work.path("r.data"), &[]);
    assert!(!control_socket(gone_pid).exists(), "attach left a stale socket");
    attach.detach();
    assert_eq!(reused.quit().1, 0);
}

/// A session that cannot open its socket (here a directory is in its way)
/// says why in the control directory, and `fntrace attach` says it at once
/// in one line, instead of waiting two minutes for an answer that cannot
/// come; the process runs on, and the next attach, the way cleared, works.
#[test]
fn a_session_that_cannot_listen_says_why() {
    use std::os::unix::fs::DirBuilderExt;
    procs::runtime();
    let work = Work::new("attach-cannot-listen");
    let bin = build(&work, &PATCHABLE);
    let mut target = Target::start(&bin, &work);
    let socket = control_socket(target.pid);
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .create(socket.parent().unwrap())
    {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => panic!("{e}"),
        _ => {}
    }
    std::fs::create_dir_all(socket.join("in-the-way")).unwrap();
    let out = attach_output(target.pid, &work.path("a.data"), &[]);
    std::fs::remove_dir_all(&socket).unwrap();
    common::assert_fails(&out, 1, "the runtime could not start: cannot listen on");
    assert!(
        !work.path("a.data").exists(),
        "the failed attach left its directory"
    );
    for suffix in ["conf", "err"] {
        let file = control_file(&format!("{}.{suffix}", target.pid));
        assert!(!file.exists(), "{} was left", file.display());
    }
    target.cmd("tick");
    assert_eq!(target.report().1, 0);
    let attach = Attach::start(target.pid, &work.path("b.data"), &[]);
    target.cmd("tick");
    let said = attach.detach();
    assert!(said.contains("recording to"), "{said}");
    assert_eq!(target.report().1, 0);
}
