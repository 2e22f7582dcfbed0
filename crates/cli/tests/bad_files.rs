//! Files that are not what a reader expects (issue 16): a FIFO, a
//! character device (`/dev/zero`), a directory or a socket in the place of
//! `info.json`, `process.json`, `functions.tsv`, `profile.tsv` or a thread
//! file, or a file larger than the readers' limits; and `fntrace list` on
//! the same. Every reader refuses such a file with a line that names it,
//! in bounded time and memory (`docs/FORMAT.md`, "Limits").

mod common;

use std::fs::{self, File};
use std::os::unix::net::UnixListener;
use std::path::Path;

use common::readers::every_reader;
use common::tracedata::{chunk, DataDir, T0};
use common::{assert_fails, fntrace_bounded, run, Work};

/// The kinds of files that are not regular files.
const SPECIAL: &[&str] = &["fifo", "zero", "directory", "socket"];

/// Puts a file of kind `kind` at `path` (which must not exist).
fn special(path: &Path, kind: &str) {
    match kind {
        "fifo" => {
            run(std::process::Command::new("mkfifo").arg(path));
        }
        "zero" => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        "directory" => fs::create_dir(path).unwrap(),
        "socket" => drop(UnixListener::bind(path).unwrap()),
        _ => unreachable!("{kind}"),
    }
}

/// A small good trace: process 1, thread 1, `main` calling `f`.
fn good(work: &Work, name: &str) -> DataDir {
    let d = DataDir::new(work, name);
    d.info(&["./prog"], "function_graph", 0, 1_000_000);
    d.process(1, &["./prog"], "function_graph", &["main", "f"]);
    let mut c = chunk(1, 0);
    c.entry(0, T0).entry(1, T0 + 10).exit(1, T0 + 20).exit(0, T0 + 30);
    d.thread(1, 1, &[&c]);
    d
}

/// The files a reader opens, as damage notes name them.
const FILES: &[&str] = &[
    "info.json",
    "p1/process.json",
    "p1/functions.tsv",
    "p1/profile.tsv",
    "p1/t1.events",
];

#[test]
fn special_files_in_a_data_directory() {
    let work = Work::new("bad-files-special");
    for file in FILES {
        for kind in SPECIAL {
            let d = good(&work, &format!("{}-{kind}.data", file.replace('/', "-")));
            let path = d.dir.join(file);
            let _ = fs::remove_file(&path);
            special(&path, kind);
            for run in every_reader(d.path()) {
                let stderr = run.notes();
                assert!(
                    stderr.contains(&format!("{file}: is a ")) && stderr.contains(", not a regular file"),
                    "{:?} with {file} a {kind}: {stderr}",
                    run.args
                );
            }
        }
    }
}

/// A sparse file of `len` bytes (no disk space used).
fn sparse(path: &Path, len: u64) {
    let _ = fs::remove_file(path);
    File::create(path).unwrap().set_len(len).unwrap();
}

#[test]
fn files_larger_than_the_limits() {
    let work = Work::new("bad-files-large");
    for (file, len) in [
        ("info.json", (64 << 20) + 1),
        ("p1/process.json", (64 << 20) + 1),
        ("p1/functions.tsv", (1 << 30) + 1),
        ("p1/profile.tsv", (1 << 30) + 1),
    ] {
        let d = good(&work, &format!("{}.data", file.replace('/', "-")));
        sparse(&d.dir.join(file), len);
        for run in every_reader(d.path()) {
            let stderr = run.notes();
            assert!(
                stderr.contains(&format!("{file}: {len} bytes, more than the ")),
                "{:?}: {stderr}",
                run.args
            );
        }
    }
    // A thread file is streamed: its size is no limit, and a chunk that
    // claims more than the file has is damage.
    let d = good(&work, "events.data");
    let events = d.dir.join("p1/t1.events");
    File::options()
        .write(true)
        .open(&events)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    for run in every_reader(d.path()) {
        assert!(run.notes().contains("p1/t1.events: offset "), "{:?}", run.args);
    }
}

#[test]
fn list_refuses_what_is_not_a_regular_file() {
    let work = Work::new("bad-files-list");
    for kind in SPECIAL {
        let path = work.path(kind);
        special(&path, kind);
        let out = fntrace_bounded(&["list", path.to_str().unwrap()]);
        assert_fails(&out, 1, ", not a regular file");
        assert_fails(&out, 1, path.to_str().unwrap());
    }
    let big = work.path("big");
    sparse(&big, (4 << 30) + 1);
    let out = fntrace_bounded(&["list", big.to_str().unwrap()]);
    assert_fails(&out, 1, "bytes, more than the 4 GiB");
}
