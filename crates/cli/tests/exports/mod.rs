//! What the export tests (`export.rs`, `export_e2e.rs`) read back:
//! `fntrace dump --chrome` checked event by event, `dump --folded`,
//! `report --json` and the call openings of `replay`, to compare them.
#![allow(dead_code)]

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::fntrace_output;

/// `fntrace ARGS...`: must succeed; returns stdout and stderr.
pub fn ok(args: &[&str]) -> (String, String) {
    let out = fntrace_output(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "fntrace {args:?}: {stderr}");
    (String::from_utf8(out.stdout).expect("UTF-8 output"), stderr)
}

/// A function's name without the `()` replay adds to a name without
/// parameters.
pub fn bare(name: &str) -> String {
    name.strip_suffix("()").unwrap_or(name).to_string()
}

/// What `dump --chrome` wrote, checked.
pub struct Chrome {
    pub json: Value,
    /// Per thread `(pid, tid)`: the calls in order, as `(depth, name)`.
    pub openings: BTreeMap<(u64, u64), Vec<(usize, String)>>,
    /// Per function: its `B`, `X` and function-tracer `i` events.
    pub calls: BTreeMap<String, u64>,
    /// `process_name` and `thread_name` metadata events by `(pid, tid)`
    /// (`tid` 0 for a process).
    pub names: BTreeMap<(u64, u64), String>,
    /// Every event, in order.
    pub events: Vec<Value>,
}

impl Chrome {
    /// Parses `text` and checks it: the fields of every event, times with
    /// 3 decimals, every `B` closed by an `E` of the same name on its
    /// thread, later, in order, times never going back within a thread.
    pub fn parse(text: &str) -> Chrome {
        let json: Value = serde_json::from_str(text).expect("the output is JSON");
        let events = json["traceEvents"].as_array().expect("traceEvents").clone();
        assert!(json["metadata"].is_object(), "metadata");
        for line in text.lines().filter(|l| l.contains("\"ts\":")) {
            let ts = line.split("\"ts\":").nth(1).unwrap();
            let num: String = ts
                .chars()
                .take_while(|c| *c == '-' || *c == '.' || c.is_ascii_digit())
                .collect();
            let (_, frac) = num.split_once('.').unwrap_or_else(|| panic!("ts {num}: {line}"));
            assert_eq!(frac.len(), 3, "3 decimals: {line}");
        }
        let mut c = Chrome {
            json,
            openings: BTreeMap::new(),
            calls: BTreeMap::new(),
            names: BTreeMap::new(),
            events: events.clone(),
        };
        let mut stacks: BTreeMap<(u64, u64), Vec<(String, f64)>> = BTreeMap::new();
        let mut last: BTreeMap<(u64, u64), f64> = BTreeMap::new();
        for (i, e) in events.iter().enumerate() {
            let ph = e["ph"].as_str().expect("ph");
            let pid = e["pid"].as_u64().expect("pid");
            // An `E` has no name: it closes its thread's last `B`.
            let name = match ph {
                "E" => {
                    assert!(e.get("name").is_none(), "{e}");
                    String::new()
                }
                _ => e["name"].as_str().expect("name").to_string(),
            };
            if ph == "M" {
                let tid = e["tid"].as_u64().unwrap_or(0);
                let shown = e["args"]["name"].as_str().expect("args.name").to_string();
                c.names.insert((pid, tid), shown);
                continue;
            }
            let key = (pid, e["tid"].as_u64().expect("tid"));
            let ts = e["ts"].as_f64().expect("ts");
            let stack = stacks.entry(key).or_default();
            match ph {
                "B" | "E" => {
                    assert!(e.get("cat").is_none(), "no category: {e}");
                    let prev = last.insert(key, ts).unwrap_or(f64::MIN);
                    assert!(ts >= prev, "time goes back on {key:?}: {e}");
                    if ph == "B" {
                        c.openings
                            .entry(key)
                            .or_default()
                            .push((stack.len(), name.clone()));
                        *c.calls.entry(name.clone()).or_default() += 1;
                        stack.push((name, ts));
                    } else {
                        let (open, start) = stack.pop().unwrap_or_else(|| panic!("E without B: {e}"));
                        assert!(ts >= start);
                        // `events` names each `E` by the `B` it closes.
                        c.events[i]["name"] = Value::String(open);
                    }
                }
                "X" => {
                    assert!(e["dur"].as_f64().expect("dur") >= 0.0);
                    *c.calls.entry(name).or_default() += 1;
                }
                "i" => {
                    assert_eq!(e["s"], "t", "{e}");
                    // The function tracer's entries name their caller.
                    if e["args"]["caller"].is_string() {
                        *c.calls.entry(name).or_default() += 1;
                    }
                }
                other => panic!("event type {other}: {e}"),
            }
        }
        for (key, stack) in &stacks {
            assert!(stack.is_empty(), "B without E on {key:?}: {stack:?}");
        }
        c
    }

    /// The events named `name`.
    pub fn named(&self, name: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["name"] == name).collect()
    }

    /// The process or thread name: `tid` 0 for the process.
    pub fn name_of(&self, pid: u64, tid: u64) -> Option<&str> {
        self.names.get(&(pid, tid)).map(String::as_str)
    }
}

/// `fntrace dump --chrome ARGS...`, checked; and its stderr.
pub fn chrome(args: &[&str]) -> (Chrome, String) {
    let mut all = vec!["dump", "--chrome"];
    all.extend(args);
    let (out, err) = ok(&all);
    (Chrome::parse(&out), err)
}

/// `fntrace dump --folded ARGS...`: `(stack, ns)` lines.
pub fn folded(args: &[&str]) -> Vec<(String, u64)> {
    let mut all = vec!["dump", "--folded"];
    all.extend(args);
    let (out, _) = ok(&all);
    out.lines()
        .map(|l| {
            let (stack, ns) = l.rsplit_once(' ').unwrap_or_else(|| panic!("folded line {l:?}"));
            (
                stack.to_string(),
                ns.parse().unwrap_or_else(|_| panic!("value in {l:?}")),
            )
        })
        .collect()
}

/// `fntrace report --json DIR`: per function `(calls, self_ns)`.
pub fn report(dir: &str) -> BTreeMap<String, (u64, u64)> {
    let (out, _) = ok(&["report", "--json", dir]);
    let json: Value = serde_json::from_str(&out).expect("JSON");
    json.as_array()
        .expect("array")
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            // Every call entered: those with times, and those whose exit
            // was lost.
            (
                r["name"].as_str().unwrap().to_string(),
                (n("calls") + n("exit_lost"), n("self_ns")),
            )
        })
        .collect()
}

/// `fntrace replay DIR`: per thread, the calls in order as `(depth,
/// name)`, from the lines that open one (`f() {`, `f();`).
pub fn replay_openings(dir: &str) -> BTreeMap<u64, Vec<(usize, String)>> {
    let (out, _) = ok(&["replay", "--color", "never", dir]);
    let mut threads: BTreeMap<u64, Vec<(usize, String)>> = BTreeMap::new();
    for line in out.lines() {
        let Some((head, body)) = line.split_once("|  ") else {
            continue;
        };
        let Some(tid) = head.trim_start().split(')').next().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let text = body.trim_start();
        let indent = body.len() - text.len();
        if text.starts_with('}') || text.starts_with("/*") {
            continue;
        }
        let name = text
            .strip_suffix(" {")
            .or_else(|| text.strip_suffix(';'))
            .unwrap_or(text);
        threads.entry(tid).or_default().push((indent / 2, bare(name)));
    }
    threads
}

/// The calls of a `dump --chrome` per tid, names as [`replay_openings`]
/// gives them.
pub fn chrome_openings(c: &Chrome) -> BTreeMap<u64, Vec<(usize, String)>> {
    c.openings
        .iter()
        .map(|((_, tid), calls)| (*tid, calls.iter().map(|(d, n)| (*d, bare(n))).collect()))
        .collect()
}
