//! The exports of real traces: programs of `tests/programs/e2e/` built for
//! tracing and recorded with the runtime, then `dump --chrome`, `dump
//! --folded` and `flamegraph` compared with `replay` and `report` of the
//! same data. (The runtime is built as `e2e.rs` builds it: `cargo build -p
//! fntrace-runtime` with the profile of the `fntrace` under test, unless
//! `FNTRACE_RUNTIME` names one.)

mod common;
mod exports;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::procs::runtime;
use common::{build_o0, programs, Work};
use exports::{chrome, chrome_openings, folded, ok, replay_openings, report};

/// Builds `tests/programs/e2e/NAME.c` with `flags` and records `ARGS`;
/// returns the data directory.
fn record(work: &Work, name: &str, flags: &[&str], args: &[&str]) -> String {
    let exe = work.path(name);
    let source = programs().join(format!("e2e/{name}.c"));
    build_o0("gcc", &source, &exe, flags);
    runtime();
    let data = work.path("trace.data").display().to_string();
    let exe = exe.display().to_string();
    let mut cmd = vec!["record", "-o", &data, "--", &exe];
    cmd.extend(args);
    let (_, err) = ok(&cmd);
    assert_eq!(err, "", "record said something");
    data
}

/// Every check of a recorded trace; returns the Chrome JSON.
fn check(data: &str) -> exports::Chrome {
    let (c, err) = chrome(&[data]);
    assert_eq!(err, "");
    assert_eq!(
        chrome_openings(&c),
        replay_openings(data),
        "calls per thread, as replay shows them"
    );
    let report = report(data);
    let calls: BTreeMap<String, u64> = report.iter().map(|(n, (calls, _))| (n.clone(), *calls)).collect();
    assert_eq!(c.calls, calls, "calls per function, as report counts them");
    let meta = &c.json["metadata"];
    assert_eq!(meta["lost_events"], 0);
    assert!(
        ["tsc", "monotonic"].contains(&meta["clock_source"].as_str().unwrap()),
        "{meta}"
    );

    let stacks = folded(&[data]);
    let mut by_leaf: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, ns) in &stacks {
        *by_leaf
            .entry(stack.rsplit(';').next().unwrap().to_string())
            .or_default() += ns;
    }
    for (name, (_, self_ns)) in &report {
        assert_eq!(
            by_leaf.get(name).copied().unwrap_or(0),
            *self_ns,
            "self time of {name}"
        );
    }
    c
}

#[test]
fn nested_program() {
    let work = Work::new("export-e2e-nested");
    let data = record(&work, "nested", &["-fpatchable-function-entry=5"], &["200"]);
    let c = check(&data);
    for f in ["main", "a", "b", "leaf"] {
        assert!(c.calls.contains_key(f), "{f} in {:?}", c.calls);
    }
    assert_eq!(c.calls["a"], 200);
    assert_eq!(c.calls["leaf"], 201);
    assert!(c.json["metadata"]["command"]
        .as_str()
        .unwrap()
        .ends_with("nested 200"));
    let stacks = folded(&[&data]);
    assert!(stacks.iter().any(|(s, _)| s == "main;a;b;leaf"), "{stacks:?}");
    // The last `leaf` is main's own call. Its stack has a line only if it
    // took time: folded stacks leave out stacks of no self time, and a
    // coarse clock (a VM without a TSC) can time a 10 ns call as 0.
    let (pid, _) = c.openings.keys().next().unwrap();
    let main_thread = &c.openings[&(*pid, *pid)];
    assert!(main_thread.contains(&(1, "leaf".to_string())), "{main_thread:?}");
    let leafs = c.named("leaf");
    let last_leaf = leafs[leafs.len() - 1];
    let took = match last_leaf["ph"].as_str() {
        Some("E") => last_leaf["ts"].as_f64().unwrap() - leafs[leafs.len() - 2]["ts"].as_f64().unwrap(),
        _ => last_leaf["dur"].as_f64().unwrap(),
    };
    let timed = took > 0.0;
    assert_eq!(
        stacks.iter().any(|(s, _)| s == "main;leaf"),
        timed,
        "main's own leaf call ({last_leaf}) in {stacks:?}"
    );

    for extra in [&[][..], &["--flamechart"][..]] {
        let svg: PathBuf = work.path("out.svg");
        let mut args = vec!["flamegraph", "-o", svg.to_str().unwrap(), &data];
        args.extend(extra);
        ok(&args);
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.trim_end().ends_with("</svg>"));
        for f in ["main", "a"] {
            assert!(text.contains(&format!("<title>{f} (")), "{f} in {extra:?}");
        }
    }
}

#[test]
fn threads_program() {
    let work = Work::new("export-e2e-threads");
    let data = record(
        &work,
        "threads",
        &["-pg", "-mfentry", "-mrecord-mcount", "-pthread"],
        &[],
    );
    let c = check(&data);
    assert_eq!(c.openings.len(), 3, "three threads: {:?}", c.openings.keys());
    let pid = c.openings.keys().next().unwrap().0;
    assert_eq!(c.name_of(pid, pid), Some("main"));
    assert_eq!(c.calls["square"], 3);
    assert_eq!(c.calls["twice"], 4);
    let per_thread = folded(&[&data, "--per-thread"]);
    let threads: std::collections::BTreeSet<&str> = per_thread
        .iter()
        .map(|(s, _)| s.split(';').next().unwrap())
        .collect();
    assert_eq!(threads.len(), 3, "{threads:?}");
}
