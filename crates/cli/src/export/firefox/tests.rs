//! Tests of the Firefox export on synthetic data directories written with
//! fntrace-format's encoders.

use crate::trace::Demangle;
use std::fs;
use std::path::{Path, PathBuf};

use fntrace_format::layout;
use fntrace_format::meta::{Clock, ModuleInfo, ProcessInfo, VERSION};
use fntrace_format::write::ChunkBuilder;
use fntrace_format::FunctionEntry;
use serde_json::Value as Json;

use super::*;

const T0: u64 = 5_000_000_000;
const UNIX0: u64 = 1_709_296_496_789_000_000;
const BASE: u64 = 0x40_1000;

/// A data directory of one test, removed when dropped.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("fntrace-firefox-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// `p<pid>/` started at monotonic `start` (the clock is `monotonic`:
/// ticks are ns), function `i` at `BASE + i * 0x100`.
fn process(dir: &Path, pid: u32, argv: &[&str], start: u64, functions: &[&str]) {
    let sub = dir.join(layout::process_dir(pid, 0));
    fs::create_dir_all(&sub).unwrap();
    let n = functions.len() as u64;
    let info = ProcessInfo {
        version: VERSION,
        pid,
        exe: "/work/prog".into(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        tracer: "function_graph".into(),
        start_unix_ns: UNIX0 + (start - T0),
        clock: Clock::monotonic(start),
        sites: n,
        patched: n,
        modules: vec![ModuleInfo {
            path: "/work/prog".into(),
            bias: 0,
            sites: n,
        }],
        ended: true,
        ..ProcessInfo::default()
    };
    fs::write(sub.join(layout::PROCESS), info.to_json()).unwrap();
    let table: String = (0..)
        .zip(functions)
        .map(|(fid, name)| {
            let (module, address, size) = ("/work/prog".into(), BASE + u64::from(fid) * 0x100, 0x100);
            FunctionEntry {
                fid,
                module,
                address,
                size,
                name: name.to_string(),
            }
            .to_line()
        })
        .collect();
    fs::write(sub.join(layout::FUNCTIONS), table).unwrap();
}

fn thread(dir: &Path, pid: u32, tid: u32, chunks: &[&ChunkBuilder]) {
    let bytes: Vec<u8> = chunks.iter().flat_map(|c| c.bytes()).collect();
    fs::write(
        dir.join(layout::process_dir(pid, 0))
            .join(layout::thread_file(tid)),
        bytes,
    )
    .unwrap();
}

/// Every thread of `trace` to Firefox JSON.
fn write_all(trace: &Trace, out: &mut Vec<u8>, demangle: Demangle) -> FirefoxStats {
    let threads: Vec<(&Process, Vec<u32>)> = trace.processes.iter().map(|p| (p, p.tids.clone())).collect();
    let progress = Progress::new(&threads, Default::default(), 1, "test");
    write_firefox(trace, &threads, out, demangle, &progress).unwrap()
}

fn convert(dir: &Path, demangle: Demangle) -> (Json, FirefoxStats) {
    let trace = fntrace_format::read::open(dir).unwrap();
    let mut out = Vec::new();
    let stats = write_all(&trace, &mut out, demangle);
    (serde_json::from_slice(&out).unwrap(), stats)
}

fn thread_of<'a>(profile: &'a Json, tid: &str) -> &'a Json {
    let threads = profile["threads"].as_array().unwrap();
    threads.iter().find(|t| t["tid"] == tid).unwrap()
}

fn string(th: &Json, index: &Json) -> String {
    th["stringArray"][index.as_u64().unwrap() as usize]
        .as_str()
        .unwrap()
        .to_string()
}

fn ns(ms: &Json) -> u64 {
    (ms.as_f64().unwrap() * 1e6).round() as u64
}

/// `(name, start ns, end ns or None, data)` of each marker.
fn markers(th: &Json) -> Vec<(String, u64, Option<u64>, Json)> {
    let m = &th["markers"];
    (0..m["length"].as_u64().unwrap() as usize)
        .map(|i| {
            let end = (m["phase"][i] == 1).then(|| ns(&m["endTime"][i]));
            (
                string(th, &m["name"][i]),
                ns(&m["startTime"][i]),
                end,
                m["data"][i].clone(),
            )
        })
        .collect()
}

/// The functions of stack `index`, outermost first.
fn stack(th: &Json, index: &Json) -> Vec<String> {
    let mut names = Vec::new();
    let mut at = index.as_u64();
    while let Some(i) = at.map(|i| i as usize) {
        let func = &th["frameTable"]["func"][th["stackTable"]["frame"][i].as_u64().unwrap() as usize];
        names.insert(
            0,
            string(th, &th["funcTable"]["name"][func.as_u64().unwrap() as usize]),
        );
        at = th["stackTable"]["prefix"][i].as_u64();
    }
    names
}

/// `(time ns, stack, weight)` of each sample.
fn samples(th: &Json) -> Vec<(u64, Vec<String>, i64)> {
    let s = &th["samples"];
    let mut time = 0.0;
    (0..s["length"].as_u64().unwrap() as usize)
        .map(|i| {
            time += s["timeDeltas"][i].as_f64().unwrap();
            (
                (time * 1e6).round() as u64,
                stack(th, &s["stack"][i]),
                s["weight"][i].as_i64().unwrap(),
            )
        })
        .collect()
}

fn calls<'a>(
    all: &'a [(String, u64, Option<u64>, Json)],
    name: &str,
) -> Vec<&'a (String, u64, Option<u64>, Json)> {
    all.iter()
        .filter(|m| m.0 == name && m.3["type"] == "FunctionCall")
        .collect()
}

fn s(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Two processes: calls with recursion, an unwind, lost events and an
/// unfinished call in `p100`; time-filter calls, trigger marks and the
/// function tracer's entries in `p200`.
fn sample_trace(name: &str) -> Scratch {
    let dir = scratch(name);
    process(
        &dir,
        100,
        &["./prog", "6"],
        T0,
        &["main", "fib", "_ZN3foo3barEv", "leaf"],
    );
    let mut c = ChunkBuilder::new(100, 0, T0);
    c.entry(0, T0 + 1000)
        .entry(1, T0 + 2000)
        .entry(1, T0 + 3000)
        .exit(1, T0 + 4000);
    c.exit(1, T0 + 6000)
        .entry(2, T0 + 7000)
        .lost(5, T0 + 7500)
        .entry(3, T0 + 8000);
    c.exit(2, T0 + 9000).exit(0, T0 + 10_000);
    thread(&dir, 100, 100, &[&c]);
    let mut c = ChunkBuilder::new(101, 0, T0);
    c.entry(1, T0 + 2500).entry(3, T0 + 3500).exit(3, T0 + 4500);
    let mut d = ChunkBuilder::new(101, 2, T0 + 4600);
    d.set_lost(3).entry(3, T0 + 5000).exit(3, T0 + 5200);
    thread(&dir, 100, 101, &[&c, &d]);

    let t1 = T0 + 100_000;
    process(&dir, 200, &["./child"], t1, &["outer", "inner"]);
    let mut c = ChunkBuilder::new(200, 0, t1);
    c.call(1, T0 + 115_000, 2000).call(0, T0 + 120_000, 10_000);
    c.mark(false, T0 + 121_000).mark(true, T0 + 122_000);
    thread(&dir, 200, 200, &[&c]);
    let mut c = ChunkBuilder::new(201, 0, t1);
    c.entry_caller(1, T0 + 105_000, BASE + 0x10)
        .entry_caller(0, T0 + 106_000, 1);
    thread(&dir, 200, 201, &[&c]);
    dir
}

#[test]
fn processes_threads_and_meta() {
    let dir = sample_trace("processes");
    let (p, stats) = convert(&dir, Demangle::Full);
    assert_eq!(p["meta"]["product"], "fntrace");
    assert_eq!(p["meta"]["startTime"].as_f64().unwrap(), UNIX0 as f64 / 1e6);
    assert_eq!((stats.processes, stats.threads, stats.calls), (2, 4, 10));
    assert_eq!((stats.lost, stats.lost_chunks), (8, 1));
    assert!(stats.damage.is_empty(), "{:?}", stats.damage);
    let ids = |tid: &str| {
        let t = thread_of(&p, tid);
        (
            t["pid"].clone(),
            t["processName"].clone(),
            t["name"].clone(),
            t["isMainThread"].clone(),
        )
    };
    let j = |v: &str| Json::from(v);
    assert_eq!(
        ids("100"),
        (j("100"), j("./prog 6"), j("./prog 6"), Json::from(true))
    );
    assert_eq!(
        ids("101"),
        (j("100"), j("./prog 6"), j("thread 101"), Json::from(false))
    );
    assert_eq!(
        ids("200"),
        (j("200"), j("./child"), j("./child"), Json::from(true))
    );
    assert_eq!(ids("201").2, "thread 201");
    assert_eq!(ns(&thread_of(&p, "200")["processStartupTime"]), 100_000);
    // Frames are addresses in the module's library, named by its symbols.
    assert!(p["libs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["name"] == "prog" && l["path"] == "/work/prog"));
    let t = thread_of(&p, "100");
    assert!(t["frameTable"]["address"]
        .as_array()
        .unwrap()
        .contains(&Json::from(BASE + 0x100)));
    assert!(t["funcTable"]["resource"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r.as_i64() >= Some(0)));
    // The trace info marker opens each process's main thread.
    let info = &markers(t)[0];
    assert_eq!((info.0.as_str(), info.1, info.2), ("trace info", 0, None));
    assert_eq!(string(t, &info.3["command"]), "./prog 6");
    assert_eq!(string(t, &info.3["clock"]), "monotonic");
    assert_eq!(string(t, &info.3["started"]), "2024-03-01T12:34:56.789Z");
}

#[test]
fn calls_are_interval_markers() {
    let dir = sample_trace("calls");
    let (p, _) = convert(&dir, Demangle::Full);
    let t = thread_of(&p, "100");
    let all = markers(t);
    let count = |name| calls(&all, name).len();
    assert_eq!(
        [count("main"), count("fib"), count("foo::bar()"), count("leaf")],
        [1, 2, 1, 1]
    );
    let span = |name, i: usize| {
        let m = calls(&all, name)[i];
        (
            m.1,
            m.2.unwrap(),
            string(t, &m.3["end"]),
            m.3["depth"].as_f64().unwrap(),
        )
    };
    // Open when 5 events were lost (at 7500): their ends are unknown.
    assert_eq!(span("main", 0), (1000, 10_000, "exit lost".into(), 0.0));
    assert_eq!(span("fib", 0), (3000, 4000, "returned".into(), 2.0));
    assert_eq!(span("fib", 1), (2000, 6000, "returned".into(), 1.0));
    assert_eq!(span("foo::bar()", 0), (7000, 9000, "exit lost".into(), 1.0));
    assert_eq!(span("leaf", 0), (8000, 9000, "unwound".into(), 2.0));
    // A call's marker carries its stack.
    assert_eq!(
        stack(t, &calls(&all, "leaf")[0].3["cause"]["stack"]),
        s(&["main", "foo::bar()", "leaf"])
    );
    let lost: Vec<_> = all.iter().filter(|m| m.0 == "events lost").collect();
    assert_eq!(
        (lost.len(), lost[0].1, lost[0].2, lost[0].3["count"].as_f64()),
        (1, 7500, None, Some(5.0))
    );

    let t = thread_of(&p, "101");
    let all = markers(t);
    assert_eq!(
        span_of(t, calls(&all, "fib")[0]),
        (2500, 5200, "exit lost".into())
    );
    assert_eq!(calls(&all, "leaf").len(), 2);
    let lost: Vec<f64> = all
        .iter()
        .filter(|m| m.0 == "events lost")
        .map(|m| m.3["count"].as_f64().unwrap())
        .collect();
    assert_eq!(lost, [0.0, 3.0]);

    // Time-filter calls, nested; trigger marks.
    let t = thread_of(&p, "200");
    let all = markers(t);
    assert_eq!(
        span_of(t, calls(&all, "outer")[0]),
        (110_000, 120_000, "returned".into())
    );
    assert_eq!(
        span_of(t, calls(&all, "inner")[0]),
        (113_000, 115_000, "returned".into())
    );
    assert_eq!(calls(&all, "inner")[0].3["depth"].as_f64(), Some(1.0));
    let marks: Vec<(&str, u64)> = all
        .iter()
        .filter(|m| m.0.starts_with("tracing"))
        .map(|m| (m.0.as_str(), m.1))
        .collect();
    assert_eq!(marks, [("tracing off", 121_000), ("tracing on", 122_000)]);

    // The function tracer's entries, with their callers.
    let t = thread_of(&p, "201");
    let entries: Vec<(String, u64, String)> = markers(t)
        .into_iter()
        .filter(|m| m.3["type"] == "FunctionEntry")
        .map(|m| (m.0, m.1, string(t, &m.3["caller"])))
        .collect();
    assert_eq!(
        entries,
        [
            ("inner".into(), 105_000, "outer+0x10".into()),
            ("outer".into(), 106_000, "0x1".into())
        ]
    );
    assert_eq!(t["samples"]["length"], 0);
}

fn span_of(t: &Json, m: &(String, u64, Option<u64>, Json)) -> (u64, u64, String) {
    (m.1, m.2.unwrap(), string(t, &m.3["end"]))
}

#[test]
fn samples_carry_the_stacks_weighted_by_time() {
    let dir = sample_trace("samples");
    let (p, stats) = convert(&dir, Demangle::Full);
    let t = thread_of(&p, "100");
    assert_eq!(t["samples"]["weightType"], "samples");
    let expected = [
        (1000, s(&["main"]), 1000),
        (2000, s(&["main", "fib"]), 1000),
        (3000, s(&["main", "fib", "fib"]), 1000),
        (4000, s(&["main", "fib"]), 2000),
        (6000, s(&["main"]), 1000),
        (7000, s(&["main", "foo::bar()"]), 500),
        // The loss: what ran until the next event is unknown.
        (7500, s(&[]), 500),
        (8000, s(&["main", "foo::bar()", "leaf"]), 1000),
        (9000, s(&["main"]), 1000),
        (10_000, s(&[]), 0),
    ];
    assert_eq!(samples(t), expected);
    // CPU deltas (µs): the time of the stack before each sample.
    assert_eq!(
        t["samples"]["threadCPUDelta"],
        serde_json::json!([0, 1, 1, 1, 2, 1, 0, 0, 1, 1])
    );
    let expected = [
        (2500, s(&["fib"]), 1000),
        (3500, s(&["fib", "leaf"]), 1000),
        (4500, s(&["fib"]), 100),
        // 3 events lost at 4600.
        (4600, s(&[]), 400),
        (5000, s(&["fib", "leaf"]), 200),
        (5200, s(&[]), 0),
    ];
    assert_eq!(samples(thread_of(&p, "101")), expected);
    let expected = [
        (110_000, s(&["outer"]), 3000),
        (113_000, s(&["outer", "inner"]), 2000),
        (115_000, s(&["outer"]), 5000),
        (120_000, s(&[]), 0),
    ];
    assert_eq!(samples(thread_of(&p, "200")), expected);
    assert_eq!(stats.samples, 10 + 6 + 4);
}

#[test]
fn names_long_gaps_and_empty_traces() {
    let dir = sample_trace("names");
    let (p, _) = convert(&dir, Demangle::No);
    assert_eq!(calls(&markers(thread_of(&p, "100")), "_ZN3foo3barEv").len(), 1);

    // A stack held longer than a weight can say is split.
    let dir = scratch("long");
    process(&dir, 300, &["./slow"], T0, &["main"]);
    let mut c = ChunkBuilder::new(300, 0, T0);
    c.entry(0, T0).exit(0, T0 + 3_000_000_000);
    thread(&dir, 300, 300, &[&c]);
    let (p, _) = convert(&dir, Demangle::Full);
    let got = samples(thread_of(&p, "300"));
    let max = i64::from(i32::MAX);
    let rest = 3_000_000_000 - max;
    let expected = [
        (0, s(&["main"]), max),
        (max as u64, s(&["main"]), rest),
        (3_000_000_000, s(&[]), 0),
    ];
    assert_eq!(got, expected);

    // A damaged time 584 years on: the stretch weighs i32::MAX ns, not
    // the billions of samples it would take.
    let dir = scratch("damaged");
    process(&dir, 500, &["./slow"], T0, &["main", "f"]);
    let mut c = ChunkBuilder::new(500, 0, T0);
    c.entry(0, T0).entry(1, u64::MAX);
    thread(&dir, 500, 500, &[&c]);
    let (p, stats) = convert(&dir, Demangle::Full);
    let got = samples(thread_of(&p, "500"));
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].0, got[0].1.clone(), got[0].2), (0, s(&["main"]), max));
    assert_eq!((got[1].1.clone(), got[1].2), (s(&[]), 0));
    assert_eq!(stats.damage.len(), 1, "{:?}", stats.damage);
    assert!(
        stats.damage[0].starts_with("p500/t500.events: 1 stretch with one stack weighs only 2147483647 ns")
    );

    // No events: nothing is written.
    let dir = scratch("empty");
    process(&dir, 400, &["./idle"], T0, &["main"]);
    let trace = fntrace_format::read::open(&dir).unwrap();
    let mut out = Vec::new();
    let stats = write_all(&trace, &mut out, Demangle::Full);
    assert_eq!((stats.events, out.len(), stats.processes), (0, 0, 1));
}

#[test]
fn only_the_selected_threads() {
    let dir = sample_trace("selected");
    let trace = fntrace_format::read::open(&dir).unwrap();
    let p100 = trace.processes.iter().find(|p| p.info.pid == 100).unwrap();
    let threads = vec![(p100, vec![101])];
    let progress = Progress::new(&threads, Default::default(), 1, "test");
    let mut out = Vec::new();
    let stats = write_firefox(&trace, &threads, &mut out, Demangle::Full, &progress).unwrap();
    assert_eq!((stats.processes, stats.threads, stats.calls), (1, 1, 3));
    let p: Json = serde_json::from_slice(&out).unwrap();
    let tids: Vec<&Json> = p["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["tid"])
        .collect();
    assert_eq!(tids, [&Json::from("101")]);
    // The process's info marker is on the first thread kept.
    assert_eq!(markers(thread_of(&p, "101"))[0].0, "trace info");
}
