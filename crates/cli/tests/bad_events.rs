//! Thread files with hostile events (issue 16): a `TIME` event 584 years
//! after the one before, calls nested tens of thousands deep, exits that
//! match no open call. Every reader finishes in bounded time and memory
//! with a clean outcome, and memory never grows with a value read from the
//! file (a time gap, a nesting depth) beyond the readers' limits
//! (`docs/FORMAT.md`, "Limits").

mod common;

use common::readers::{every_reader, Run};
use common::tracedata::{chunk, DataDir, T0};
use common::Work;
use fntrace_format::write::ChunkBuilder;
use fntrace_format::FunctionEntry;

/// The function ids of [`trace`].
const MAIN: u32 = 0;
const F: u32 = 1;
const G: u32 = 2;

/// A trace of one thread whose events `fill` writes.
fn trace(work: &Work, fill: impl FnOnce(&mut ChunkBuilder)) -> DataDir {
    let d = DataDir::new(work, "t.data");
    d.info(&["./prog"], "function_graph", 0, 1_000_000);
    d.process(1, &["./prog"], "function_graph", &["main", "f", "g"]);
    let mut c = chunk(1, 0);
    fill(&mut c);
    d.thread(1, 1, &[&c]);
    d
}

fn find<'r>(runs: &'r [Run], args: &[&str]) -> &'r Run {
    runs.iter()
        .find(|r| r.args[..args.len()] == *args)
        .unwrap_or_else(|| panic!("{args:?}"))
}

#[test]
fn a_time_gap_of_584_years() {
    let work = Work::new("bad-events-gap");
    // ENTRY, TIME u64::MAX, ENTRY: 64 bytes.
    let d = trace(&work, |c| {
        c.entry(MAIN, T0).entry(F, u64::MAX);
    });
    let size = std::fs::metadata(d.dir.join("p1/t1.events")).unwrap().len();
    assert_eq!(size, 64);
    let runs = every_reader(d.path());
    let firefox = find(&runs, &["dump", "--firefox"]);
    assert_eq!(firefox.code(), Some(0), "{}", firefox.stderr());
    let profile: serde_json::Value = serde_json::from_str(&firefox.stdout()).unwrap();
    assert_eq!(profile["meta"]["product"], "fntrace");
}

#[test]
fn calls_nested_forty_thousand_deep() {
    let work = Work::new("bad-events-deep");
    const DEPTH: u64 = 40_000;
    let d = trace(&work, |c| {
        for i in 0..DEPTH {
            c.entry(F, T0 + i);
        }
        for i in 0..DEPTH {
            c.exit(F, T0 + DEPTH + i);
        }
    });
    let runs = every_reader(d.path());
    let replay = find(&runs, &["replay"]);
    assert_eq!(replay.code(), Some(0), "{}", replay.stderr());
    let text = replay.stdout();
    assert_eq!(text.lines().count() as u64, 1 + 2 * DEPTH - 1);
    let longest = text.lines().map(str::len).max().unwrap();
    assert!(longest < 200, "a line of {longest} bytes");
    // The indentation stops growing at 64 levels; the depth is written
    // instead.
    let indent = " ".repeat(2 * 64);
    assert!(text.contains(&format!("|  {indent}[depth 100] f() {{\n")));
    assert!(text.contains(&format!("|  {}f() {{\n", " ".repeat(2 * 63))));
    assert!(text.contains("[depth 39999] f();\n"));
    assert!(text.contains("[depth 39998] } /* f */\n"));
    let report = find(&runs, &["report", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&report.stdout()).unwrap();
    assert_eq!(rows[0]["calls"], DEPTH);
}

#[test]
fn calls_nested_deeper_than_the_limit() {
    let work = Work::new("bad-events-deeper");
    let d = trace(&work, |c| {
        for i in 0..135_536 {
            c.entry(F, T0 + i);
        }
    });
    // Every reader that follows calls (not info, which counts events).
    for run in every_reader(d.path()).iter().filter(|r| r.args[0] != "info") {
        assert!(
            run.notes()
                .contains("p1/t1.events: 4464 calls nested deeper than 131072 left out"),
            "{:?}: {}",
            run.args,
            run.stderr()
        );
    }
}

#[test]
fn exits_that_match_no_open_call() {
    let work = Work::new("bad-events-unmatched");
    // Each exit of g would be looked for down the whole stack of f.
    let d = trace(&work, |c| {
        for i in 0..60_000 {
            c.entry(F, T0 + i);
        }
        for i in 0..400_000 {
            c.exit(G, T0 + 60_000 + i);
        }
    });
    let runs = every_reader(d.path());
    for args in [
        &["replay"][..],
        &["report"],
        &["dump", "--chrome"],
        &["dump", "--perfetto"],
    ] {
        let run = find(&runs, args);
        assert_eq!(run.code(), Some(0), "{:?}: {}", run.args, run.stderr());
    }
    // 60,000 stacks of up to 60,000 frames: too much text to fold.
    let folded = find(&runs, &["dump", "--folded"]);
    assert!(folded
        .stderr()
        .contains("bytes of text, more than the 256 MiB limit"));
}

#[test]
fn callers_inside_many_overlapping_functions() {
    // `main` spans the address space and 200,000 small functions lie at its
    // start; every caller address (tracer `function`) is past them, inside
    // `main`: finding it must not walk back over the small ones.
    const N: u32 = 200_000;
    let work = Work::new("bad-events-callers");
    let d = DataDir::new(&work, "t.data");
    d.info(&["./prog"], "function", 0, 1_000_000);
    d.process(1, &["./prog"], "function", &["main"]);
    let entry = |fid, address, size, name: &str| {
        FunctionEntry {
            fid,
            module: "/work/prog".into(),
            address,
            size,
            name: name.into(),
        }
        .to_line()
    };
    let mut table = entry(0, 0x1000, u64::MAX - 0x1000, "main");
    for fid in 1..N {
        table.push_str(&entry(
            fid,
            0x10_0000 + 16 * u64::from(fid),
            8,
            &format!("f{fid}"),
        ));
    }
    std::fs::write(d.dir.join("p1/functions.tsv"), table).unwrap();
    let mut c = chunk(1, 0);
    for i in 0..N {
        c.entry_caller(1 + i % (N - 1), T0 + u64::from(i), 0x1000_0000 + u64::from(i));
    }
    d.thread(1, 1, &[&c]);
    for run in every_reader(d.path()) {
        let ok = run.code() == Some(0) || run.stderr().contains("function tracer");
        assert!(ok, "{:?}: {}", run.args, run.stderr());
    }
}
