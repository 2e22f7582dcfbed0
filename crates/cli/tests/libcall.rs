//! Library calls (#19): the program's calls into shared libraries that no
//! compiler prepared are traced at the callee, behind a guard on the
//! caller's return address (`docs/RUNTIME.md`, "Library calls").
//!
//! The program (`programs/libcall/main.c`) calls libc and its own plain
//! library `libmid.so` a known number of times, from two threads too, and
//! prints how often it called each: the truth every count is compared
//! with. It is built as users build: with a lazy PLT (gcc), with
//! `-fno-plt -z now` (calls through the GOT, no PLT: uftrace's #1777), and
//! by clang; a Rust program calls libc through the GOT as rustc does.
//! Each traced run prints what the untraced run prints.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::attach::{self, Attach, Target};
use common::{cc, fntrace_output, program, require, run, Work};

/// The library-call program as `name`, against `libmid.so`.
fn build(work: &Work, name: &str, compiler: &str, flags: &[&str]) -> PathBuf {
    fntrace_testkit::build_libcall(work, name, compiler, flags)
}

/// The counts the program printed (`name=N` words of its last line).
fn truth(stdout: &str) -> BTreeMap<String, u64> {
    stdout
        .lines()
        .last()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|w| {
            let (name, n) = w.split_once('=')?;
            Some((name.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// Records `exe` with `options` into `data`; returns what it printed,
/// checked equal to what the untraced program prints.
fn record(exe: &Path, data: &Path, options: &[&str]) -> String {
    let alone = run(&mut Command::new(exe));
    let mut args = vec!["record", "-o", data.to_str().unwrap()];
    args.extend(options);
    args.extend(["--", exe.to_str().unwrap()]);
    let out = fntrace_output(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout, alone, "the traced program printed something else");
    stdout
}

/// Calls per function of the recording (`report --json`), by name.
fn calls(data: &Path) -> BTreeMap<String, u64> {
    common::report_calls(data, &[])
}

fn replay(data: &Path) -> String {
    let out = fntrace_output(&["replay", data.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the program calls in libraries and counts, with the count's name.
/// `memcpy`: the program's 30 calls, not strdup's tail calls of it inside
/// libc (strdup being traced, they reach memcpy with a hijacked return
/// address: `docs/RUNTIME.md`, "Library calls").
const COUNTED: &[&str] = &["malloc", "free", "getpid", "strdup", "mid_len", "memcpy"];

#[test]
fn the_programs_library_calls_are_traced_exactly() {
    let work = Work::new("libcall-exact");
    let builds: [(&str, &str, &[&str]); 3] = [
        ("plt", "gcc", &[]),
        ("noplt", "gcc", &["-fno-plt", "-Wl,-z,now"]),
        ("clang", "clang-16", &[]),
    ];
    for (name, compiler, flags) in builds {
        let exe = build(&work, name, compiler, flags);
        let data = work.path(&format!("{name}.data"));
        let truth = truth(&record(&exe, &data, &[]));
        let calls = calls(&data);
        for f in COUNTED {
            assert_eq!(calls.get(*f), truth.get(*f), "{name}: calls of {f}: {calls:?}");
        }
        // The program's own callback, called by qsort in libc.
        assert_eq!(calls.get("cmp"), truth.get("cmp"), "{name}: {calls:?}");
        assert_eq!(calls.get("qsort"), Some(&1), "{name}");
        assert_eq!(calls.get("pthread_create"), Some(&2), "{name}");
        assert_eq!(calls.get("pthread_join"), Some(&2), "{name}");
        // Called by libraries only, or inside libmid: not the program's.
        for f in ["mid_count", "strlen", "__libc_start_main"] {
            assert!(!calls.contains_key(f), "{name}: {f} traced: {calls:?}");
        }
        // qsort's calls of cmp nest under it.
        let replay = replay(&data);
        let lines: Vec<&str> = replay.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.ends_with("qsort() {"))
            .unwrap_or_else(|| panic!("{name}: no qsort() {{ in\n{replay}"));
        assert!(lines[at + 1].ends_with("cmp();"), "{name}:\n{replay}");
        for f in ["printf();", "getpid();", "free();"] {
            assert!(replay.contains(f), "{name}: {f} not in\n{replay}");
        }
    }
}

#[test]
fn no_libcall_leaves_them_out_and_nest_libcall_follows_libraries() {
    let work = Work::new("libcall-modes");
    let exe = build(&work, "prog", "gcc", &[]);
    let data = work.path("none.data");
    let truth = truth(&record(&exe, &data, &["--no-libcall"]));
    let none = calls(&data);
    assert_eq!(none.get("cmp"), truth.get("cmp"));
    for f in COUNTED.iter().chain(&["qsort", "printf"]) {
        assert!(!none.contains_key(*f), "{f} traced: {none:?}");
    }

    let data = work.path("nested.data");
    record(&exe, &data, &["--nest-libcall"]);
    let nested = calls(&data);
    // mid_len's strlen (in libmid, by a tail call from mid_count): the
    // IFUNC's implementation (`__strlen_avx2`...) named as it is called.
    assert_eq!(nested.get("strlen"), truth.get("mid_len"), "{nested:?}");
    // The program's calls are all there; libc's own calls of them are not
    // (strdup's malloc), those of other libraries may be (the dynamic
    // linker's, for each thread's TLS).
    for f in ["getpid", "strdup", "mid_len", "free", "memcpy"] {
        assert_eq!(nested.get(f), truth.get(f), "{f}: {nested:?}");
    }
    assert!(nested.get("malloc") >= truth.get("malloc"), "{nested:?}");
    let both = nested.get("malloc").unwrap() - truth["malloc"];
    assert!(both < truth["strdup"], "libc's own mallocs traced: {nested:?}");
    for bad in ["--no-libcall --nest-libcall", "--nest-libcall=1"] {
        let mut args = vec!["record"];
        args.extend(bad.split(' '));
        args.push(exe.to_str().unwrap());
        let out = fntrace_output(&args);
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
}

#[test]
fn a_library_is_traced_whole_when_a_pattern_names_it() {
    let work = Work::new("libcall-module");
    let exe = build(&work, "prog", "gcc", &[]);
    let data = work.path("mid.data");
    let truth = truth(&record(&exe, &data, &["-F", "*:mod:libmid"]));
    let whole = calls(&data);
    // Its own functions, internal ones too; nothing else.
    assert_eq!(whole.get("mid_len"), truth.get("mid_len"));
    assert_eq!(whole.get("mid_count"), truth.get("mid_len"));
    assert_eq!(whole.len(), 2, "{whole:?}");
    // A plain pattern selects a library's function only as a library call.
    let data = work.path("getpid.data");
    record(&exe, &data, &["-F", "getpid", "-F", "cmp"]);
    let named = calls(&data);
    assert_eq!(named.keys().collect::<Vec<_>>(), ["cmp", "getpid"]);
    assert_eq!(named.get("getpid"), truth.get("getpid"));
    // One that selects nothing the runtime would trace is refused.
    for pattern in ["mid_count", "nosuch:mod:libc"] {
        let out = fntrace_output(&["record", "-F", pattern, "--", exe.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{pattern}: {err}");
        assert!(
            err.contains(&format!("-F '{pattern}' matches no function")),
            "{err}"
        );
    }
    let out = fntrace_output(&[
        "record",
        "--no-libcall",
        "-F",
        "getpid",
        "--",
        exe.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_rust_program_calling_through_the_got() {
    let work = Work::new("libcall-rust");
    require("rustc");
    let exe = work.path("getpid_rs");
    run(Command::new("rustc")
        .args(["-O", "--edition=2021", "-o", exe.to_str().unwrap()])
        .arg(program("libcall/getpid.rs")));
    let data = work.path("rs.data");
    let truth = truth(&record(&exe, &data, &[]));
    let calls = calls(&data);
    assert_eq!(calls.get("getpid"), truth.get("getpid"), "{calls:?}");
    // std's calls too: its own code is the program's.
    assert!(calls.contains_key("write"), "{calls:?}");
}

/// `fntrace attach` into a running plain program (`attach/work.c`, with
/// its library `libattachlib.so`, both plain): its calls into the
/// library (`lib_twice`, under `mid`) and into libc (`usleep`) are traced
/// with its own functions, every `mid` frame holding one `leaf` and one
/// `lib_twice`; after the detach, its code, its library's and libc's are
/// a fresh process's byte for byte, and its results were never wrong.
#[test]
fn attached_library_calls_and_every_byte_given_back() {
    common::procs::runtime();
    let work = Work::new("libcall-attach");
    let bin = attach::build_workload(&work, "gcc", &[], &[]);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    let dir = work.path("a.data");
    let filter = ["-P", "mid", "-P", "leaf", "-P", "lib_twice", "-P", "usleep"];
    let attached = Attach::with_libcalls(target.pid, &dir, &filter);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(target.cmd("tick"), "ok");
    let said = attached.detach();
    // The four functions' sites, each its own bytes again.
    assert!(said.contains(": 4 sites given back their bytes"), "{said}");
    let text = attach::replay(&dir);
    // Each thread's complete mid() frames, what they called in order.
    let mut frames: BTreeMap<&str, Vec<Vec<&str>>> = BTreeMap::new();
    let mut open: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for line in text.lines() {
        let Some((tid, rest)) = line.split_once(')') else {
            continue;
        };
        let Some(call) = rest.split('|').nth(1).map(str::trim) else {
            continue;
        };
        match call {
            "mid() {" => {
                open.insert(tid, Vec::new());
            }
            "} /* mid */" => {
                if let Some(inside) = open.remove(tid) {
                    frames.entry(tid).or_default().push(inside);
                }
            }
            other => {
                if let Some(inside) = open.get_mut(tid) {
                    inside.push(other);
                }
            }
        }
    }
    // The program's sites and the library's are turned on (and off) in a
    // batch each, site by site: the first and last frames of a thread may
    // miss a call; between, every frame has both.
    let both = ["leaf();", "lib_twice();"];
    let mut whole = 0;
    for (tid, frames) in &frames {
        let first = frames.iter().position(|f| f == &both).unwrap_or(frames.len());
        let last = frames.iter().rposition(|f| f == &both).unwrap_or(0);
        for (i, f) in frames.iter().enumerate() {
            let edge = i < first || i > last;
            let part = f.is_empty() || f == &["leaf();"] || f == &["lib_twice();"];
            assert!(f == &both || (edge && part), "thread {tid}, frame {i}: {f:?}");
        }
        whole += last.saturating_sub(first);
    }
    assert!(
        whole > 10,
        "{whole} mid() frames with their library call:\n{text}"
    );
    assert!(text.contains("usleep();"), "{text}");
    let (_, bad, _, _) = target.report();
    assert_eq!(bad, 0, "wrong results while attached");
    let libc = "/libc.so.6";
    attach::assert_code_equal(
        target.pid,
        fresh.pid,
        &["/work", "/libattachlib.so", libc],
        "after the detach",
    );
    assert_eq!(target.quit().1, 0);
    fresh.quit();
}

/// A library traced whole (`-F '*:mod:LIB'`: every function, every
/// caller, the library's own calls and its thread start and exit code
/// included) never changes what the program does: libc under the
/// threaded program, libstdc++ and libc under a C++ program that throws
/// and catches. The unwinder's library is refused by name (its functions
/// read their own return addresses while they walk the stack).
#[test]
fn a_library_traced_whole_never_breaks_the_program() {
    let work = Work::new("libcall-whole");
    let exe = build(&work, "prog", "gcc", &[]);
    let data = work.path("whole.data");
    let truth = truth(&record(&exe, &data, &["-F", "*:mod:libc"]));
    let whole = calls(&data);
    // libc's own work appears (strdup's malloc and memcpy), and the
    // program's calls are all there.
    assert!(whole.get("malloc") > truth.get("malloc"), "{whole:?}");
    assert_eq!(whole.get("strdup"), truth.get("strdup"), "{whole:?}");
    let cxx = work.path("cxx");
    let source = program("e2e/cxx_exception.cc");
    cc("g++", &["-O2", &source, "-o", cxx.to_str().unwrap()]);
    for (module, called) in [("libstdc++", "__cxa_throw"), ("libc", "printf")] {
        let data = work.path(&format!("{module}.data"));
        record(&cxx, &data, &["-F", &format!("*:mod:{module}")]);
        let traced = calls(&data);
        assert!(traced.contains_key(called), "{module}: {traced:?}");
    }
    let out = fntrace_output(&["record", "-F", "*:mod:libgcc_s", "--", cxx.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("matches no function"));
}
