//! `fntrace attach` over gcc's runs of one-byte NOPs while threads are
//! inside them (issue 16, case 2). gcc's `-fpatchable-function-entry=5`
//! emits five one-byte NOPs; the workload (`programs/attach/nops.c`) parks
//! two threads *between* two of them — each in a signal handler that
//! interrupted it at `hot+1..hot+4` — before every attach and before every
//! detach, and lets them go once the code was rewritten: they resume inside
//! the run. Two more threads run through it all the time. Before the fix
//! (the run made one 5-byte NOP, live) the first resumed thread died. Two
//! hundred attaches in all, with the punned call's first displacement (one
//! byte written per switch) and with two others (four more bytes, written
//! at the attach and given back at the detach); after the last detach of
//! each, the code is byte for byte a fresh process's.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::attach::{assert_code_equal, ctl, parse_report, Attach, Target};
use common::{cc, procs, Work};

/// Attach `cycles` times to one running workload, with threads parked
/// inside the NOP run at every rewrite.
fn cycles(work: &Work, bin: &Path, pun_from: &str, cycles: usize) {
    let fresh = Target::spawn(Command::new(bin).current_dir(&work.dir));
    let mut target = Target::spawn(
        Command::new(bin)
            .current_dir(&work.dir)
            .env("FNTRACE_PUN_FROM", pun_from),
    );
    for cycle in 0..cycles {
        let dir = work.path(&format!("c{pun_from}-{cycle}.data"));
        assert_eq!(target.cmd("park"), "parked");
        let attach = Attach::start(target.pid, &dir, &[]);
        assert_eq!(target.cmd("release"), "released", "cycle {cycle}");
        std::thread::sleep(Duration::from_millis(10));
        // Off, so that threads run through the run again (on, its first
        // bytes are a call's), and park there for the detach.
        ctl(target.pid, &["tracing", "off"]);
        assert_eq!(target.cmd("park"), "parked");
        let said = attach.detach();
        assert!(said.contains("recording to"), "{said}");
        assert_eq!(target.cmd("release"), "released", "cycle {cycle}");
        let (rounds, bad, parks, _) = parse_report(&target.cmd("report"));
        assert_eq!(bad, 0, "cycle {cycle}: wrong results");
        assert!(rounds > 0);
        assert_eq!(parks, 4 * (cycle as u64 + 1), "cycle {cycle}");
    }
    assert_code_equal(target.pid, fresh.pid, &["/work"], "after the last detach");
    let (_, bad, _, value) = target.quit();
    let (_, _, _, fresh_value) = fresh.quit();
    assert_eq!(bad, 0);
    assert_eq!(value, fresh_value);
}

#[test]
fn attach_over_nop_runs_with_threads_inside() {
    procs::runtime();
    let work = Work::new("attach-nops");
    let bin = work.path("work");
    let src = common::program("attach/nops.c");
    cc(
        "gcc",
        &[
            "-O2",
            "-Wall",
            "-fpatchable-function-entry=5",
            &src,
            "-o",
            bin.to_str().unwrap(),
            "-pthread",
        ],
    );
    cycles(&work, &bin, "0", 120);
    cycles(&work, &bin, "1", 40);
    cycles(&work, &bin, "700", 40);
}
