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

/// `family.c` built with `-pg -mfentry` in `work`.
fn family(work: &Work) -> std::path::PathBuf {
    let exe = work.path("family");
    let (source, out) = (common::program("c/family.c"), exe.to_str().unwrap());
    common::cc("gcc", &["-O1", "-pg", "-mfentry", &source, "-o", out]);
    exe
}

/// `fntrace record --no-libcall OPTIONS -o WORK/NAME -- sh -c SCRIPT`, which
/// must succeed; the data directory.
fn record_script(work: &Work, name: &str, options: &[&str], script: &str) -> std::path::PathBuf {
    let data = work.path(name);
    let out = fntrace()
        .args(["record", "--no-libcall", "-o", data.to_str().unwrap()])
        .args(options)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    data
}

#[test]
fn children_are_followed_unless_no_follow() {
    common::procs::runtime();
    let work = Work::new("follow");
    let exe = family(&work);
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

/// A child that recorded nothing leaves no directory (#21 item 8): it is
/// listed in `quiet.tsv`, and `info` says how many there were. Under
/// `sh -c 'family; /bin/true'` with only `work` traced, `/bin/true`
/// (whose functions `-F work` leaves alone) ends having written nothing,
/// and so does family's second child before its `exec` (the image after
/// it calls `work`); the shell, the command itself, keeps its directory
/// whatever it holds.
#[test]
fn children_that_record_nothing_leave_no_directory() {
    common::procs::runtime();
    let work = Work::new("follow-quiet");
    let exe = family(&work);
    let script = format!("{} > /dev/null; /bin/true", exe.display());
    let data = record_script(&work, "quiet.data", &["--force", "-F", "work"], &script);
    let quiet = std::fs::read_to_string(data.join("quiet.tsv")).expect("quiet.tsv");
    let lines: Vec<(&str, &str)> = quiet.lines().map(|l| l.split_once('\t').unwrap()).collect();
    let recorded = pids_recorded(&data);
    assert_eq!(lines.len(), 2, "{quiet}");
    let (true_pid, command) = lines[1];
    assert_eq!(command, "/bin/true");
    assert!(!recorded.contains(true_pid), "{true_pid} has a directory");
    // The second child's image before its exec: the image after it has
    // the directory (of the same pid), with its calls of work.
    let (forked, command) = lines[0];
    assert_eq!(command, exe.to_str().unwrap());
    let after = std::fs::read_to_string(data.join(format!("p{forked}/process.json"))).unwrap();
    assert!(after.contains("\"child\""), "{after}");
    // The shell, family and its two children.
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    let (info, _) = common::fntrace_ok(&["info", data.to_str().unwrap()]);
    assert!(
        info.contains("not kept            : 2 child process images that recorded nothing (family 1, true 1; quiet.tsv lists them)"),
        "{info}"
    );
    let (replay, _) = common::fntrace_ok(&["replay", data.to_str().unwrap()]);
    assert_eq!(replay.matches("work();").count(), 3, "{replay}");
}

/// `info` on many processes (#21 item 8): past 8, one line each, the
/// totals first; `--all` describes each in full.
#[test]
fn info_of_many_processes_is_one_line_each() {
    common::procs::runtime();
    let work = Work::new("follow-many");
    let exe = family(&work);
    let script = format!("for i in 1 2 3; do {} > /dev/null; done", exe.display());
    let data = record_script(&work, "many.data", &[], &script);
    // The shell and three families of three.
    let dirs = pids_recorded(&data).len();
    assert!(dirs >= 10, "{dirs}");
    let (info, _) = common::fntrace_ok(&["info", data.to_str().unwrap()]);
    assert!(
        info.contains(&format!("processes           : {dirs}\n")),
        "{info}"
    );
    let lines: Vec<&str> = info.lines().filter(|l| l.starts_with("process p")).collect();
    assert_eq!(lines.len(), dirs, "{info}");
    assert!(lines.iter().all(|l| l.ends_with(" events)")), "{info}");
    assert_eq!(info.matches("  executable").count(), 0, "{info}");
    let (all, _) = common::fntrace_ok(&["info", "--all", data.to_str().unwrap()]);
    assert_eq!(all.matches("  executable").count(), dirs, "{all}");
}
