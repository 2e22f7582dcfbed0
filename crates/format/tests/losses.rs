//! `Losses`: what a data directory lost, from its thread files and its
//! `process.json` files, on data directories written with the crate's own
//! encoders.

mod common;

use std::fs;
use std::path::Path;

use common::TempDir;
use fntrace_format::chunk::FLAG_FLIGHT;
use fntrace_format::layout::{self, FUNCTIONS, PROCESS};
use fntrace_format::write::ChunkBuilder;
use fntrace_format::{open, Clock, FunctionEntry, Losses, ProcessInfo};

fn write_process(root: &Path, pid: u32, info: ProcessInfo, threads: &[(u32, Vec<u8>)]) {
    let dir = root.join(layout::process_dir(pid, 0));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(PROCESS), info.to_json()).unwrap();
    let f = FunctionEntry {
        fid: 0,
        module: "/abs/prog".into(),
        address: 0x1000,
        size: 0x10,
        name: "f".into(),
    };
    fs::write(dir.join(FUNCTIONS), f.to_line()).unwrap();
    for (tid, bytes) in threads {
        fs::write(dir.join(layout::thread_file(*tid)), bytes).unwrap();
    }
}

fn info(pid: u32) -> ProcessInfo {
    ProcessInfo {
        version: 1,
        pid,
        exe: "/abs/prog".into(),
        clock: Clock::monotonic(0),
        ..ProcessInfo::default()
    }
}

#[test]
fn every_source_of_loss_is_counted_once() {
    let dir = TempDir::new("losses");
    // p1: 6 events dropped (chunk 1's header), chunk 2 not written (the
    // disk was full: the runtime counted its 4 events, 10 in all), one word
    // of chunk 3 never written, 3 calls not traced.
    let mut c0 = ChunkBuilder::new(1, 0, 0);
    c0.entry(0, 1).exit(0, 2);
    let mut c1 = ChunkBuilder::new(1, 1, 10);
    c1.set_lost(6);
    c1.entry(0, 11).exit(0, 12);
    let mut c3 = ChunkBuilder::new(1, 3, 30);
    c3.entry(0, 31).exit(0, 32).entry(0, 33);
    let mut bytes: Vec<u8> = [c0, c1].iter().flat_map(ChunkBuilder::bytes).collect();
    let mut last = c3.bytes();
    // The third event word (after the 32-byte header) was never written.
    last[48..56].fill(0);
    bytes.extend(last);
    let mut p1 = info(1);
    p1.lost = 10;
    p1.untraced = 3;
    p1.write_error = Some("cannot write t1.events: No space left on device (os error 28)".into());
    write_process(dir.path(), 1, p1, &[(1, bytes)]);
    // p2: the flight recorder kept chunks 5 and 6 only; the runtime has
    // an old count (it died): the files' 2 dropped events are more.
    let mut k5 = ChunkBuilder::new(2, 5, 0);
    k5.set_flags(FLAG_FLIGHT).entry(0, 1);
    let mut k6 = ChunkBuilder::new(2, 6, 5);
    k6.set_flags(FLAG_FLIGHT).set_lost(2).exit(0, 6);
    let bytes = [k5, k6].iter().flat_map(ChunkBuilder::bytes).collect();
    write_process(dir.path(), 2, info(2), &[(2, bytes)]);

    let trace = open(dir.path()).unwrap();
    let mut all = Losses::new();
    let mut each = Vec::new();
    for process in &trace.processes {
        let one = Losses::scan(process, &[]);
        each.push(one.clone());
        all.merge(one);
    }
    assert_eq!(
        (
            each[0].events,
            each[0].calls,
            each[0].lost,
            each[0].dropped,
            each[0].unwritten
        ),
        (6, 3, 10 + 1, 6, 1)
    );
    assert_eq!(
        (each[0].missing_chunks, each[0].flight_chunks, each[0].untraced),
        (1, 0, 3)
    );
    assert_eq!(
        each[0].write_errors,
        ["p1: cannot write t1.events: No space left on device (os error 28)"]
    );
    assert_eq!(
        (
            each[1].events,
            each[1].lost,
            each[1].flight_chunks,
            each[1].missing_chunks
        ),
        (2, 2, 5, 0)
    );
    assert_eq!((all.events, all.lost, all.untraced, all.calls), (8, 13, 3, 4));
    assert!((all.lost_fraction() - 13.0 / 21.0).abs() < 1e-12);
    assert!((all.untraced_fraction() - 3.0 / 7.0).abs() < 1e-12);
    assert!(!all.is_empty());

    // Selecting no thread of a process still counts what its runtime said.
    let p1 = &trace.processes[0];
    let none = Losses::scan(p1, &[999]);
    assert_eq!((none.events, none.lost, none.untraced), (0, 10, 3));
}

#[test]
fn a_whole_trace_has_no_losses() {
    let dir = TempDir::new("no-losses");
    let mut c = ChunkBuilder::new(1, 0, 0);
    c.entry(0, 1).exit(0, 2);
    write_process(dir.path(), 1, info(1), &[(1, c.bytes())]);
    let trace = open(dir.path()).unwrap();
    let losses = Losses::scan(&trace.processes[0], &[]);
    assert!(losses.is_empty(), "{losses:?}");
    assert_eq!((losses.events, losses.lost_fraction()), (2, 0.0));
}
