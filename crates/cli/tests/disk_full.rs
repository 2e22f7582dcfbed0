//! `fntrace record` into a file system that fills up (a real 1 MiB tmpfs):
//! the program's output and exit status come through unchanged, every event
//! that could not be written is counted as lost and said (record's last
//! line, `info`), `info.json` gets the exit status, `process.json` its end
//! and clock calibration, no temporary file is left and the thread files
//! stay whole chunks.
//!
//! Mounting needs root, or a user namespace (`unshare -rm`): the test runs
//! the recording in a mount namespace of its own (`unshare -m`), so the
//! mount goes with it. Where neither works it says so and passes, unless
//! `CI` is set (CI runs as root): then it fails.

mod common;

use std::path::Path;
use std::process::Command;

use common::{fntrace_ok, procs, Work};
use serde_json::Value;

/// Prints, calls `leaf()` CALLS times (600,000 events, 4.8 MB: more than
/// the file system holds), prints to stderr, exits 3.
const PROGRAM: &str = r#"
#include <stdio.h>
static volatile int sink;
__attribute__((noinline)) void leaf(int i) { sink = i; }
int main(void) {
    printf("start\n");
    fflush(stdout);
    for (int i = 0; i < 300000; i++) leaf(i);
    printf("done %d\n", sink);
    fprintf(stderr, "the program's own error line\n");
    return 3;
}
"#;
const CALLS: u64 = 300_000;

/// Runs the recording in a mount namespace with a 1 MiB tmpfs; false
/// when this machine cannot (not root, no user namespaces).
fn record_on_small_fs(work: &Work, exe: &Path) -> bool {
    let script = r#"
        set -e
        mount -t tmpfs -o size=1m fntrace-test "$MNT"
        set +e
        "$FNTRACE" record --no-libcall -o "$MNT/t.data" -- "$PROG" > "$OUT/stdout" 2> "$OUT/stderr"
        echo $? > "$OUT/status"
        cp -a "$MNT/t.data" "$OUT/copy"
    "#;
    let mnt = work.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let namespace: &[&str] = if procs::uid() == 0 { &["-m"] } else { &["-rm"] };
    let out = procs::run(
        Command::new("unshare")
            .args(namespace)
            .args(["sh", "-c", script])
            .env("MNT", &mnt)
            .env("OUT", &work.dir)
            .env("PROG", exe)
            .env("FNTRACE", env!("CARGO_BIN_EXE_fntrace")),
        std::time::Duration::from_secs(120),
    );
    if work.path("status").exists() {
        return true;
    }
    let why = procs::text(&out.stderr);
    common::skip(
        "disk_full",
        &format!("mounting a tmpfs needs root or user namespaces: {}", why.trim()),
    );
    false
}

#[test]
fn a_full_disk_loses_events_not_the_program() {
    procs::runtime();
    let work = Work::new("disk-full");
    let exe = common::build_c(&work, "many", PROGRAM, &["-O1", "-pg", "-mfentry"]);
    let plain = Command::new(&exe).output().unwrap();
    assert_eq!(plain.status.code(), Some(3));
    if !record_on_small_fs(&work, &exe) {
        return;
    }
    let read = |name: &str| std::fs::read_to_string(work.path(name)).unwrap();
    let stderr = read("stderr");
    assert_eq!(
        read("status").trim(),
        "3",
        "fntrace's exit status; stderr: {stderr}"
    );
    assert_eq!(read("stdout").as_bytes(), plain.stdout, "the program's output");
    assert!(stderr.contains("the program's own error line\n"), "{stderr}");

    let copy = work.path("copy");
    let mut tmp = Vec::new();
    find_tmp(&copy, &mut tmp);
    assert!(tmp.is_empty(), "temporary files left: {tmp:?}");

    let info: Value = json(&copy.join("info.json"));
    assert_eq!(info["exit_status"], 3, "{info}");
    assert!(info["end_unix_ns"].as_u64().is_some(), "{info}");
    let pinfo = json(&common::process_dir(&copy).join("process.json"));
    assert_eq!(pinfo["ended"], true, "{pinfo}");
    let clock = &pinfo["clock"];
    assert!(
        clock["tick1"].as_u64() > clock["tick0"].as_u64(),
        "not calibrated: {pinfo}"
    );
    let lost = pinfo["lost"].as_u64().unwrap();
    assert!(lost > 0, "{pinfo}");
    let error = pinfo["write_error"].as_str().unwrap_or_default();
    assert!(error.contains("No space left on device"), "{pinfo}");

    // What was written reads without damage, and with what was lost it is
    // every event: main() and CALLS calls of leaf(), entry and exit each.
    let dir = copy.to_str().unwrap();
    let (text, warnings) = fntrace_ok(&["info", dir]);
    assert!(!warnings.contains("offset"), "damage: {warnings}");
    let events: u64 = field(&text, "events").parse().unwrap();
    assert_eq!(events + lost, 2 * CALLS + 2, "{text}");
    assert!(field(&text, "exit status") == "3", "{text}");
    assert!(field(&text, "ended") == "yes", "{text}");
    assert!(field(&text, "lost events").contains(&lost.to_string()), "{text}");
    assert!(field(&text, "clock").contains("calibrated over"), "{text}");
    assert!(field(&text, "write error").contains(error), "{text}");

    // Record's last line says it.
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("fntrace: warning: the trace is incomplete: ")
            && last.contains(&format!(": {lost} of "))
            && last.contains(" events lost (")
            && last.contains("No space left on device"),
        "{stderr}"
    );
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The value of `key:` in `info`'s output (first match).
fn field<'t>(text: &'t str, key: &str) -> &'t str {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then_some(v.trim())
        })
        .unwrap_or_else(|| panic!("no {key} in:\n{text}"))
}

fn find_tmp(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            find_tmp(&path, found);
        } else if path.to_string_lossy().ends_with(".tmp") {
            found.push(path.display().to_string());
        }
    }
}
