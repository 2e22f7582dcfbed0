//! What a trace lost, said by every reader, and calls whose exit was lost
//! never counted as time: on a data directory built with the format's
//! encoders (exact numbers), and on a real recording whose buffers were
//! too small, checked against the chunk headers and words of its files.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::tracedata::{dropped_in_a_loop, LOST_IN_A_LOOP as SAID};
use common::{build_c, fntrace_ok, Work};
use serde_json::Value;

#[test]
fn every_reader_says_what_was_lost() {
    let work = Work::new("losses-readers");
    let d = dropped_in_a_loop(&work);
    let dir = d.path();
    let said = format!("{SAID}; 3 calls whose exit was lost, their times not counted");

    let (replay, _) = fntrace_ok(&["replay", "--color", "never", dir]);
    assert!(replay.starts_with(&format!("# {SAID}\n#")), "{replay}");
    // Open at the loss: closed without a duration, never as unwound.
    for name in ["leaf", "work", "main"] {
        let line = format!(
            "    1)               |  {}}} /* {name} (exit lost) */",
            " ".repeat(2 * depth(name))
        );
        assert!(replay.contains(&line), "{line} in\n{replay}");
    }
    assert!(!replay.contains("unwound"), "{replay}");
    assert!(replay.contains("1)   0.010 us    |      leaf();"), "{replay}");

    let (report, _) = fntrace_ok(&["report", dir]);
    assert!(report.starts_with(&format!("# {said}\n")), "{report}");
    let (json, warning) = fntrace_ok(&["report", "--json", dir]);
    assert_eq!(warning, format!("fntrace: warning: {said}\n"));
    let rows: Vec<Value> = serde_json::from_str(&json).unwrap();
    let row = |name: &str| {
        let r = rows.iter().find(|r| r["name"] == name).unwrap();
        let n = |k: &str| r[k].as_u64().unwrap();
        [
            n("calls"),
            n("exit_lost"),
            n("total_ns"),
            n("self_ns"),
            n("max_ns"),
        ]
    };
    // Only the calls entered and left after the loss have times: the
    // 4990 ns of the first leaf were never a leaf's.
    assert_eq!(row("leaf"), [1, 1, 10, 10, 10]);
    assert_eq!(row("work"), [1, 1, 50, 40, 50]);
    assert_eq!(row("main"), [0, 1, 0, 0, 0]);

    // The call tree says it too, from its own reading, and counts the
    // calls open at the loss in no time (main's and work's ends are not
    // known: only leaf's second call and its caller's have times).
    let (tree, _) = fntrace_ok(&["graph", dir]);
    assert!(tree.starts_with(&format!("# {said}\n\n")), "{tree}");
    assert!(!tree.contains("(1) main"), "main's exit was lost: {tree}");
    let (graph, _) = fntrace_ok(&["graph", "--gprof", dir]);
    assert!(graph.starts_with(&format!("# {said}\n\n")), "{graph}");
    assert!(
        graph.contains("leaf: 1 call (1 more whose exit was lost), total 0.010 us"),
        "{graph}"
    );

    let (info, _) = fntrace_ok(&["info", dir]);
    let incomplete = SAID.replace("the trace is incomplete: ", "incomplete          : ");
    assert!(info.contains(&incomplete), "{info}");

    let (chrome, _) = fntrace_ok(&["dump", "--chrome", dir]);
    let chrome: Value = serde_json::from_str(&chrome).unwrap();
    assert_eq!(chrome["metadata"]["incomplete"], said.as_str());
    assert_eq!(chrome["metadata"]["exit_lost_calls"], 3);
    let lost_ends = chrome["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["args"]["exit_lost"] == true)
        .count();
    assert_eq!(lost_ends, 3);

    let perfetto = common::fntrace_output(&["dump", "--perfetto", dir]).stdout;
    for text in [said.as_bytes(), b"exit_lost"] {
        assert!(
            perfetto.windows(text.len()).any(|w| w == text),
            "{:?} in --perfetto",
            String::from_utf8_lossy(text)
        );
    }
    let (firefox, _) = fntrace_ok(&["dump", "--firefox", dir]);
    assert!(
        firefox.contains("trace incomplete") && firefox.contains(SAID),
        "--firefox"
    );
    assert!(firefox.contains("\"exit lost\""), "--firefox");

    // Folded stacks have no header: stderr. A call whose exit was lost has
    // no self time; the second work and its leaf have theirs.
    let (folded, warning) = fntrace_ok(&["dump", "--folded", dir]);
    assert_eq!(warning, format!("fntrace: warning: {SAID}\n"));
    assert_eq!(folded, "main;work 40\nmain;work;leaf 10\n");
    let svg = work.path("fg.svg");
    fntrace_ok(&["flamegraph", dir, "-o", svg.to_str().unwrap()]);
    assert!(
        std::fs::read_to_string(&svg).unwrap().contains(SAID),
        "the subtitle"
    );
}

/// The nesting depth of each function in [`dropped_in_a_loop`].
fn depth(name: &str) -> usize {
    ["main", "work", "leaf"].iter().position(|n| *n == name).unwrap()
}

/// Independent reading of a thread file: per chunk header, its `lost`
/// count, and the function ids of its `ENTRY` words (function_graph:
/// every word is an event, `TIME` and `LOST` with a payload word).
fn raw_counts(path: &Path) -> (u64, u64, BTreeMap<u32, u64>) {
    let bytes = std::fs::read(path).unwrap();
    let (mut lost, mut events, mut entries) = (0u64, 0u64, BTreeMap::new());
    let mut at = 0;
    while at + 32 <= bytes.len() {
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        lost += u64::from(u32::from_le_bytes(bytes[at + 20..at + 24].try_into().unwrap()));
        let len = u32::from_le_bytes(bytes[at + 16..at + 20].try_into().unwrap()) as usize;
        let (mut w, end) = (at + 32, at + 32 + len);
        while w < end {
            let (kind, fid) = (word(w) & 7, (word(w) >> 3 & 0xff_ffff) as u32);
            match kind {
                4 | 5 => w += 8, // TIME, LOST: no event of a function; payload
                0 => {
                    *entries.entry(fid).or_default() += 1;
                    events += 1;
                }
                _ => events += 1,
            }
            w += 8;
        }
        at = end;
    }
    (lost, events, entries)
}

#[test]
fn a_recording_whose_buffers_overflowed() {
    let work = Work::new("losses-record");
    let prog = build_c(
        &work,
        "busy",
        "__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }\n\
         __attribute__((noinline)) int step(int x) { return leaf(x) ^ leaf(x + 1); }\n\
         int main(void) { int s = 0; for (int i = 0; i < 3000000; i++) s += step(i); return s == 42; }\n",
        &["-O1", "-fpatchable-function-entry=5"],
    );
    let data = work.path("busy.data");
    let out = common::fntrace_output(&[
        "record",
        "--lossy",
        "--buffer-size",
        "64K",
        "-o",
        data.to_str().unwrap(),
        prog.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let p = common::process_dir(&data);
    let files: Vec<_> = std::fs::read_dir(&p)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|e| e == "events"))
        .collect();
    assert_eq!(files.len(), 1);
    let (lost, events, entries) = raw_counts(&files[0]);
    assert!(
        lost > 0,
        "a 64 KiB buffer keeps up with 9 million calls: nothing to check; {stderr}"
    );
    let process: Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("process.json")).unwrap()).unwrap();
    assert_eq!(
        process["lost"].as_u64(),
        Some(lost),
        "the runtime counted what the headers hold"
    );

    let said = format!(
        "the trace is incomplete: {lost} of {} events lost (",
        lost + events
    );
    let (replay_head, _) = {
        let out = common::fntrace_output(&["replay", "--color", "never", data.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (text.lines().next().unwrap_or("").to_string(), ())
    };
    assert!(replay_head.starts_with(&format!("# {said}")), "{replay_head}");

    // Every call entered is counted: with a time, or apart.
    let (json, warning) = fntrace_ok(&["report", "--json", data.to_str().unwrap()]);
    assert!(warning.contains(&said), "{warning}");
    let rows: Vec<Value> = serde_json::from_str(&json).unwrap();
    let names = ["main", "step", "leaf"];
    let table = std::fs::read_to_string(p.join("functions.tsv")).unwrap();
    for name in names {
        let fid: u32 = table
            .lines()
            .find(|l| l.ends_with(&format!("\t{name}")))
            .and_then(|l| l.split('\t').next()?.parse().ok())
            .unwrap();
        let r = rows.iter().find(|r| r["name"] == name).unwrap();
        let entered = r["calls"].as_u64().unwrap() + r["exit_lost"].as_u64().unwrap();
        assert_eq!(entered, entries[&fid], "{name}");
    }
    let main = rows.iter().find(|r| r["name"] == "main").unwrap();
    assert_eq!(
        (main["calls"].as_u64(), main["exit_lost"].as_u64()),
        (Some(0), Some(1))
    );
}
