//! The synthetic traces the readers' tests share. Times are written as
//! offsets from the process start [`T0`] in nanoseconds.

use fntrace_format::meta::ProfileRow;

use super::tracedata::{address, chunk, DataDir, T0};
use super::Work;

/// Two processes; the first has two threads with nested calls, a leaf
/// call, lost events (a `LOST` event, a gap of chunks, a chunk header's
/// count), a `longjmp`ed call (`UNWIND`), trace_off/trace_on marks, an exit
/// whose entry was not recorded, a call of more than 1 ms, a C++ name, and
/// a call still open at the end.
pub fn threads(work: &Work) -> DataDir {
    let d = DataDir::new(work, "threads.data");
    d.info(&["./prog", "arg"], "function_graph", 0, 3_000_000);
    let functions = [
        "main",
        "a",
        "leaf",
        "b",
        "_ZN2ns6workerEi",
        "jumper",
        "deep",
        "start_routine",
        "slow",
    ];
    let (main, a, leaf, b, worker, jumper, deep, start_routine, slow) = (0, 1, 2, 3, 4, 5, 6, 7, 8);
    d.process(100, &["./prog", "arg"], "function_graph", &functions);

    let mut c0 = chunk(100, 0);
    c0.entry(main, T0)
        .entry(a, T0 + 1000)
        .entry(leaf, T0 + 1500)
        .exit(leaf, T0 + 1690)
        .entry(leaf, T0 + 2000)
        .exit(leaf, T0 + 2300)
        .exit(a, T0 + 3000)
        .entry(b, T0 + 4000)
        .entry(worker, T0 + 4500)
        .exit(worker, T0 + 16_000)
        .exit(b, T0 + 20_000)
        .lost(5, T0 + 21_000);
    // Chunk 1 never reached the file; 3 events were dropped before chunk 2.
    let mut c2 = fntrace_format::write::ChunkBuilder::new(100, 2, T0 + 21_500);
    c2.set_lost(3);
    c2.entry(jumper, T0 + 22_000)
        .entry(deep, T0 + 22_500)
        .unwind(deep, T0 + 25_000)
        .exit(jumper, T0 + 26_000)
        .mark(false, T0 + 27_000)
        .mark(true, T0 + 28_000)
        .entry(leaf, T0 + 29_000)
        .exit(leaf, T0 + 29_100)
        .exit(main, T0 + 150_000);
    d.thread(100, 100, &[&c0, &c2]);

    let mut t = chunk(101, 0);
    t.exit(start_routine, T0 + 100)
        .entry(worker, T0 + 2500)
        .entry(leaf, T0 + 2600)
        .exit(leaf, T0 + 2700)
        .exit(worker, T0 + 3500)
        .entry(slow, T0 + 4000)
        .exit(slow, T0 + 2_504_000)
        .entry(leaf, T0 + 2_600_000);
    d.thread(100, 101, &[&t]);

    d.process(
        200,
        &["./prog", "child"],
        "function_graph",
        &["main", "child_work"],
    );
    d.edit_process(200, |p| {
        p.ppid = 100;
        p.parent = Some("p100".into());
    });
    let mut t = chunk(200, 0);
    t.entry(0, T0 + 50_000)
        .entry(1, T0 + 50_100)
        .exit(1, T0 + 80_000)
        .exit(0, T0 + 90_000);
    d.thread(200, 200, &[&t]);
    d
}

/// The `function` tracer: entries with their callers' addresses.
pub fn function_tracer(work: &Work) -> DataDir {
    let d = DataDir::new(work, "function.data");
    d.info(&["./prog"], "function", 0, 3_000_000);
    d.process(300, &["./prog"], "function", &["main", "a", "leaf"]);
    let mut t = chunk(300, 0);
    t.entry_caller(0, T0 + 1_000_000, 0x7f12_3456_7890)
        .entry_caller(1, T0 + 1_002_000, address(0) + 0x10)
        .entry_caller(2, T0 + 1_003_500, address(1) + 0x5)
        .entry_caller(2, T0 + 2_500_000, address(0) + 0x20);
    d.thread(300, 300, &[&t]);
    d
}

/// `--time-filter`: whole calls (`CALL` events), children first.
pub fn time_filter(work: &Work) -> DataDir {
    let d = DataDir::new(work, "timefilter.data");
    d.info(&["./prog"], "function_graph", 0, 3_000_000);
    d.process(400, &["./prog"], "function_graph", &["main", "worker", "leafy"]);
    let mut t = chunk(400, 0);
    t.call(2, T0 + 30_000, 20_000)
        .call(1, T0 + 60_000, 50_000)
        .call(2, T0 + 1_500_000, 15_000)
        .call(0, T0 + 2_000_000, 1_990_000);
    d.thread(400, 400, &[&t]);
    d
}

/// A thread file cut short inside its second chunk.
pub fn truncated(work: &Work) -> DataDir {
    let d = DataDir::new(work, "truncated.data");
    d.info(&["./prog"], "function_graph", 0, 1_000_000);
    d.process(500, &["./prog"], "function_graph", &["main", "a"]);
    let mut c0 = chunk(500, 0);
    c0.entry(0, T0).entry(1, T0 + 1000).exit(1, T0 + 2000);
    let mut c1 = chunk(500, 1);
    c1.entry(1, T0 + 3000).exit(1, T0 + 4000).exit(0, T0 + 5000);
    let path = d.thread(500, 500, &[&c0, &c1]);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 12]).unwrap();
    d
}

/// Recursion: `fact` calls itself twice over, and `helper` from the
/// innermost call.
pub fn recursion(work: &Work) -> DataDir {
    let d = DataDir::new(work, "recursion.data");
    d.info(&["./fact"], "function_graph", 0, 1_000_000);
    d.process(600, &["./fact"], "function_graph", &["main", "fact", "helper"]);
    let mut t = chunk(600, 0);
    t.entry(0, T0)
        .entry(1, T0 + 100)
        .entry(1, T0 + 200)
        .entry(1, T0 + 300)
        .entry(2, T0 + 350)
        .exit(2, T0 + 370)
        .exit(1, T0 + 400)
        .exit(1, T0 + 500)
        .exit(1, T0 + 600)
        .entry(1, T0 + 700)
        .exit(1, T0 + 710)
        .exit(0, T0 + 1000);
    d.thread(600, 600, &[&t]);
    d
}

/// The `profile` tracer: a table, no events.
pub fn profile(work: &Work) -> DataDir {
    let d = DataDir::new(work, "profile.data");
    d.info(&["./prog"], "profile", 0, 1_000_000);
    d.process(700, &["./prog"], "profile", &["main", "work"]);
    let row = |fid, calls, total_ns, self_ns, min_ns, max_ns| ProfileRow {
        fid,
        calls,
        total_ns,
        self_ns,
        min_ns,
        max_ns,
    };
    d.profile(
        700,
        &[
            row(0, 1, 900_000, 100_000, 900_000, 900_000),
            row(1, 4, 800_000, 800_000, 150_000, 250_000),
        ],
    );
    d
}
