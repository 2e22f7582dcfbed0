//! `--demangle=full|simple|no` (#21) on real template-heavy C++ built by
//! g++, side by side with uftrace 0.13 on the same binary: the names
//! `report --demangle simple` counts are uftrace's own (its default is
//! simple), call for call. `programs/cxx/names.cc` holds a name
//! `cpp_demangle` cannot read (`shapes::only_int`, whose return type
//! mangles `std::is_same<...>::value` as `srSt7is_same...`), shown through
//! binutils' `c++filt` (the independent reading compared with here).

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use common::procs::{run, runtime, text};
use common::{cc, fntrace_ok, program, require, Work};

const LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// `names.cc` built with `-pg` (uftrace's mcount, fntrace's too).
fn build(work: &Work) -> String {
    let exe = work.path("names");
    let exe = exe.to_str().unwrap().to_string();
    cc("g++", &["-O1", "-pg", "-o", &exe, &program("cxx/names.cc")]);
    exe
}

/// Per name, the calls `uftrace report` counts in a recording of `exe`.
fn uftrace_calls(work: &Work, exe: &str) -> BTreeMap<String, u64> {
    require("uftrace");
    let data = work.path("uftrace.data");
    let data = data.to_str().unwrap();
    let out = run(
        Command::new("uftrace").args(["record", "--no-libcall", "-d", data, exe]),
        LIMIT,
    );
    assert!(out.status.success(), "uftrace record: {}", text(&out.stderr));
    let out = run(
        Command::new("uftrace").args(["report", "-d", data, "-f", "call"]),
        LIMIT,
    );
    assert!(out.status.success(), "uftrace report: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (calls, name) = l.trim().split_once("  ")?;
            Some((name.trim().to_string(), calls.parse().ok()?))
        })
        .collect()
}

/// Per name, the calls `fntrace report --json ARGS` counts.
fn fntrace_calls(data: &str, args: &[&str]) -> BTreeMap<String, u64> {
    let mut all = vec!["report", "--json"];
    all.extend(args);
    all.push(data);
    let (json, _) = fntrace_ok(&all);
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The symbol of `exe` whose name contains `part`, as `nm` lists it.
fn symbol(exe: &str, part: &str) -> String {
    let out = run(Command::new("nm").arg(exe), LIMIT);
    text(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .find(|s| s.contains(part))
        .unwrap_or_else(|| panic!("no symbol with {part} in {exe}"))
        .to_string()
}

/// `names.cc` built and recorded (its own functions) in a work directory
/// named `name`: the directory, the program and the data directory.
fn recorded(name: &str) -> (Work, String, String) {
    let work = Work::new(name);
    let exe = build(&work);
    runtime();
    let data = work.path("fntrace.data").to_str().unwrap().to_string();
    fntrace_ok(&["record", "--no-libcall", "-o", &data, &exe]);
    (work, exe, data)
}

#[test]
fn simple_names_are_uftraces() {
    let (work, exe, data) = recorded("demangle-simple");
    let data = data.as_str();
    let theirs = uftrace_calls(&work, &exe);
    assert!(theirs.contains_key("shapes::only_int"), "{theirs:?}");
    assert_eq!(fntrace_calls(data, &["--demangle", "simple"]), theirs);
}

#[test]
fn full_simple_and_no() {
    let (_work, exe, data) = recorded("demangle-modes");
    let data = data.as_str();
    // The name cpp_demangle cannot read, as c++filt reads it.
    let mangled = symbol(&exe, "only_int");
    require("c++filt");
    let out = run(Command::new("c++filt").arg(&mangled), LIMIT);
    let full = text(&out.stdout).trim().to_string();
    assert!(full.contains("shapes::only_int<int>(int)"), "{full}");
    let full_names = fntrace_calls(data, &[]);
    assert_eq!(full_names.get(&full), Some(&1), "{full_names:?}");
    assert!(full_names.contains_key("shapes::Box<int>::operator<(shapes::Box<int> const&) const"));
    let symbols = fntrace_calls(data, &["--demangle", "no"]);
    assert_eq!(symbols.get(&mangled), Some(&1), "{symbols:?}");
    assert_eq!(fntrace_calls(data, &["--no-demangle"]), symbols);
    // Every mode counts the same calls, name for name.
    let counts = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    assert_eq!(counts(&full_names), counts(&symbols));
    // A read-time filter matches the name without its parameters, and the
    // replay and the Chrome export name it as asked.
    let (out, _) = fntrace_ok(&["replay", "--demangle", "simple", "-F", "shapes::only_int", data]);
    assert!(
        out.lines()
            .nth(1)
            .is_some_and(|l| l.ends_with("|  shapes::only_int();")),
        "{out}"
    );
    let (json, _) = fntrace_ok(&[
        "dump",
        "--chrome",
        "--demangle",
        "simple",
        "-F",
        "shapes::fill",
        data,
    ]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "B")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"shapes::fill"), "{names:?}");
    assert!(
        names.iter().all(|n| !n.contains('<') && !n.contains('(')),
        "{names:?}"
    );
}
