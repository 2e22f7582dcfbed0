//! `record --srcline` and the readers' `--srcline` (#21 item 4): each
//! function's source file and line, kept in the data directory, shown
//! after the binary is gone, and the same as binutils' `addr2line` says of
//! the function's first instruction (the independent reading).

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use common::procs::{run, runtime, text};
use common::{cc, fntrace_ok, require, Work};

const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// `addr2line`'s `FILE:LINE` for each function symbol of `exe` among `names`.
fn addr2line(exe: &str, names: &[&str]) -> BTreeMap<String, String> {
    require("nm");
    require("addr2line");
    let nm = text(&run(Command::new("nm").arg(exe), LIMIT).stdout);
    let mut out = BTreeMap::new();
    for line in nm.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [address, kind, name] = w[..] else { continue };
        if !names.contains(&name) || !"tT".contains(kind) {
            continue;
        }
        let place = run(
            Command::new("addr2line").args(["-e", exe, &format!("0x{address}")]),
            LIMIT,
        );
        out.insert(name.to_string(), text(&place.stdout).trim().to_string());
    }
    out
}

/// `examples/demo.c` built with `-O1 -pg -mfentry` and `flags` in `work`.
fn demo(work: &Work, flags: &[&str]) -> String {
    let exe = work.path("demo").to_str().unwrap().to_string();
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo.c");
    let source = source.canonicalize().unwrap();
    let mut args = flags.to_vec();
    args.extend(["-O1", "-pg", "-mfentry", source.to_str().unwrap(), "-o", &exe]);
    cc("gcc", &args);
    exe
}

#[test]
fn source_lines_outlive_the_binary() {
    runtime();
    let work = Work::new("srcline");
    let exe = demo(&work, &["-g"]);
    let exe = exe.as_str();
    let names = ["main", "count_primes", "fib", "apply", "square", "cube"];
    let truth = addr2line(exe, &names);
    assert_eq!(truth.len(), names.len(), "{truth:?}");
    let data = work.path("demo.data");
    let data = data.to_str().unwrap();
    fntrace_ok(&["record", "--srcline", "--no-libcall", "-o", data, exe]);
    std::fs::remove_file(exe).unwrap();

    // replay: `name() { /* FILE:LINE */` or `name(); /* FILE:LINE */`.
    let (replay, _) = fntrace_ok(&["replay", "--srcline", data]);
    let mut shown = BTreeMap::new();
    for line in replay.lines().skip(1) {
        let text = line.split_once('|').map_or("", |(_, t)| t.trim());
        if let Some((call, place)) = text.split_once(" /* ").filter(|_| !text.starts_with('}')) {
            let name = call[..call.find('(').unwrap()].to_string();
            shown.insert(name, place.trim_end_matches(" */").to_string());
        }
    }
    assert_eq!(shown, truth, "{replay}");
    // Without the option, no place.
    let (plain, _) = fntrace_ok(&["replay", data]);
    assert!(!plain.contains("/* /"), "{plain}");
    // graph: `(1) main [FILE:LINE]`.
    let (graph, _) = fntrace_ok(&["graph", "--srcline", data]);
    let main = graph.lines().find(|l| l.contains("(1) main")).unwrap();
    assert!(
        main.ends_with(&format!("(1) main [{}]", truth["main"])),
        "{graph}"
    );
}

/// A binary without DWARF: the recording says there is nothing to keep.
#[test]
fn without_dwarf_it_says_so() {
    runtime();
    let work = Work::new("srcline-none");
    let exe = demo(&work, &[]);
    let exe = exe.as_str();
    let data = work.path("demo.data");
    let (_, err) = fntrace_ok(&[
        "record",
        "--srcline",
        "--no-libcall",
        "-o",
        data.to_str().unwrap(),
        exe,
    ]);
    assert!(
        err.contains("--srcline: no function has a source line (built without -g?)"),
        "{err}"
    );
}
