//! Children (#21 item 8): by default every process the command starts is
//! traced, each in its own directory; `--no-follow` traces the command
//! alone, and its children run untraced and write nothing. The processes
//! are known independently: the program prints each one's pid.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{fntrace, Work};

/// The process directories of a data directory, by the pid in their name.
fn pids_recorded(data: &Path) -> BTreeSet<String> {
    std::fs::read_dir(data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.trim_start_matches('p')
                .split('.')
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// `pid KIND N` lines of the program's output: KIND -> N.
fn pids_printed(stdout: &str) -> std::collections::BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "pid").then(|| (w.next().unwrap().to_string(), w.next().unwrap().to_string()))
        })
        .collect()
}

#[test]
fn children_are_followed_unless_no_follow() {
    common::procs::runtime();
    let work = Work::new("follow");
    let exe = work.path("family");
    common::cc(
        "gcc",
        &[
            "-O1",
            "-pg",
            "-mfentry",
            &common::program("c/family.c"),
            "-o",
            exe.to_str().unwrap(),
        ],
    );
    let alone = std::process::Command::new(&exe).output().unwrap();
    let record = |name: &str, extra: &[&str]| {
        let data = work.path(name);
        let out = fntrace()
            .args(["record", "--no-libcall", "-o", data.to_str().unwrap()])
            .args(extra)
            .arg("--")
            .arg(&exe)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        // The same output as untraced, but for the pids.
        let shape = |s: &str| {
            s.lines()
                .map(|l| {
                    l.split(" in ")
                        .next()
                        .unwrap()
                        .split_whitespace()
                        .take(2)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(shape(&stdout), shape(&String::from_utf8_lossy(&alone.stdout)));
        let replay = common::fntrace_output(&["replay", data.to_str().unwrap()]);
        assert!(replay.status.success());
        (
            pids_printed(&stdout),
            pids_recorded(&data),
            String::from_utf8_lossy(&replay.stdout).into_owned(),
        )
    };

    let (printed, recorded, replay) = record("all.data", &[]);
    let all: BTreeSet<String> = printed.values().cloned().collect();
    assert_eq!(printed.len(), 3, "{printed:?}");
    assert_eq!(recorded, all, "a directory for each process");
    assert_eq!(replay.matches("work();").count(), 3, "{replay}");

    let (printed, recorded, replay) = record("one.data", &["--no-follow"]);
    assert_eq!(printed.len(), 3, "{printed:?}");
    assert_eq!(
        recorded,
        BTreeSet::from([printed["root"].clone()]),
        "the command's alone"
    );
    assert_eq!(replay.matches("work();").count(), 1, "{replay}");
}
