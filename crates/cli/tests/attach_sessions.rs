//! One `fntrace attach` per process: a second attach to a process is
//! refused at once, naming the fntrace that has it, and the first goes on
//! with its own settings. The harness is `common/attach.rs`.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::attach::*;
use common::{procs, Work};

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

#[test]
fn second_attach_is_refused_by_name() {
    procs::runtime();
    let work = Work::new("attach-twice");
    let bin = build(&work, &PATCHABLE);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    let first = Attach::start(target.pid, &work.path("a.data"), &["-F", "mid"]);
    let started = Instant::now();
    let out = attach_output(target.pid, &work.path("b.data"), &["-F", "leaf"]);
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
    assert!(check_calls(&text, false).1 > 0, "no mid(); line:\n{text}");
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
