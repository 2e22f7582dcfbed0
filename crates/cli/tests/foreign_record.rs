//! Recording on AArch64 (#22): the AArch64 fntrace and its runtime, built
//! with Debian's Rust (`docs/CROSS.md`), record real AArch64 programs
//! under qemu-user — the programs `record` starts run through
//! `binfmt_misc` as they would on the machine — for both site forms gcc
//! makes there: `-fpatchable-function-entry=2` (the kernel's `mov x9,
//! x30; bl` scheme) and `-pg` (`bl _mcount` after the prologue).
//!
//! - The function tracer against an independent count, the program's
//!   `-finstrument-functions` build, whose hooks log every function entry
//!   per thread: the same entries, in the same order, in every thread.
//! - function_graph on `e2e.rs`'s golden programs: the same expected files
//!   as on x86-64 (recursion, `longjmp`, threads, a C++ exception).
//! - Live patching under load: `crates/runtime/tests/live.rs`'s program.
//! - What is not built yet says so in one line.
//!
//! Every recording is read by the x86-64 fntrace; the AArch64 one reads
//! it alike (one trace format).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::foreign::{self, AARCH64};
use common::golden::{diff, expected_path, report_counts, Replay};
use common::procs::{run, text};
use common::{build_o0, cc, fntrace_output, programs, Work};
use fntrace_testkit::enters;

/// The tests of this file each keep both cores busy under qemu (the
/// stress program's threads, or builds and runs): one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The AArch64 fntrace, if this machine builds it and runs its programs;
/// otherwise the test `test` says why it is skipped.
fn runnable(test: &str) -> Option<std::path::PathBuf> {
    let why = match foreign::fntrace_for(&AARCH64) {
        Ok(path) => match foreign::no_binfmt(&AARCH64) {
            None => return Some(path),
            Some(why) => why,
        },
        Err(why) => why,
    };
    common::skip(test, &why);
    None
}

/// How long a program or the foreign fntrace may run under qemu.
const DEADLINE: Duration = Duration::from_secs(300);

/// The site forms of AArch64 gcc, without and with pointer authentication
/// and BTI (`-mbranch-protection=standard`, the default of several
/// distributions): return addresses signed with the stack pointer.
const FORMS: [(&str, &[&str]); 4] = [
    ("patchable", &["-fpatchable-function-entry=2"]),
    ("pg", &["-pg"]),
    (
        "patchable-pac",
        &["-fpatchable-function-entry=2", "-mbranch-protection=standard"],
    ),
    ("pg-pac", &["-pg", "-mbranch-protection=standard"]),
];

/// The signed forms again with key B (`pac-ret+b-key`: `pacibsp`).
const KEY_B_FORMS: [(&str, &[&str]); 2] = [
    (
        "patchable-pac-b",
        &[
            "-fpatchable-function-entry=2",
            "-mbranch-protection=pac-ret+b-key",
        ],
    ),
    ("pg-pac-b", &["-pg", "-mbranch-protection=pac-ret+b-key"]),
];

/// Programs of `tests/programs/e2e/`, with their link flags and arguments.
const PROGRAMS: [(&str, &[&str], &[&str]); 3] = [
    ("nested", &[], &["5"]),
    ("recursion", &[], &[]),
    ("threads", &["-pthread"], &[]),
];

/// `record -o data -- exe` by the AArch64 fntrace with its defaults
/// (library calls are not asked for there): its output, and what it said
/// on stderr but qemu's noise.
fn record(fntrace_a64: &Path, work: &Work, data: &Path, exe: &Path) -> (Output, Vec<String>) {
    let mut cmd = foreign::command(&AARCH64, fntrace_a64);
    cmd.current_dir(&work.dir)
        .env_remove("FNTRACE_RUNTIME")
        .args(["record", "-o"])
        .arg(data)
        .arg("--")
        .arg(exe);
    let out = run(&mut cmd, DEADLINE);
    let said = text(&out.stderr)
        .lines()
        .filter(|l| !qemu_noise(l))
        .map(str::to_string)
        .collect();
    (out, said)
}

/// The line qemu's own (x86-64) loader prints when `LD_PRELOAD` names the
/// AArch64 runtime: binfmt_misc starts the qemu binary with the program's
/// environment. On an AArch64 machine there is no such line.
fn qemu_noise(line: &str) -> bool {
    line.starts_with("ERROR: ld.so: object ") && line.contains("cannot be preloaded")
}

/// Per thread, the functions entered in order, as the function tracer's
/// `replay` shows them (`NAME <-CALLER`), threads sorted by their calls.
fn entries_replayed(replay: &str) -> Vec<Vec<String>> {
    let mut threads: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in replay.lines().filter(|l| !l.starts_with('#')) {
        let Some((tid, rest)) = line.trim_start().split_once(')') else {
            continue;
        };
        let Some((_, call)) = rest.split_once(": ") else {
            continue;
        };
        let name = call.split(" <-").next().unwrap_or(call).trim();
        threads.entry(tid.to_string()).or_default().push(name.to_string());
    }
    let mut out: Vec<Vec<String>> = threads.into_values().collect();
    out.sort();
    out
}

/// Per thread, the functions the hooks logged, threads sorted alike.
fn entries_logged(dir: &Path, exe: &Path) -> Vec<Vec<String>> {
    let names = enters::functions(exe);
    let mut out: Vec<Vec<String>> = enters::read(dir, exe)
        .into_iter()
        .map(|thread| {
            thread
                .iter()
                .map(|a| names.get(a).map_or(format!("{a:#x}"), |n| n[0].clone()))
                .collect()
        })
        .filter(|t: &Vec<String>| !t.is_empty())
        .collect();
    out.sort();
    out
}

#[test]
fn aarch64_function_tracer_sees_every_entry() {
    let _serial = serial();
    let Some(fntrace_a64) = runnable("aarch64_function_tracer_sees_every_entry") else {
        return;
    };
    let work = Work::new("foreign-record-aarch64");
    for (name, libs, args) in PROGRAMS {
        let source = programs().join(format!("e2e/{name}.c"));
        let source = source.to_str().unwrap();
        // The independent count: every entry, logged by the hooks.
        let logs = work.path(&format!("{name}.enters"));
        std::fs::create_dir_all(&logs).unwrap();
        let oracle = enters::build_with(
            AARCH64.linker,
            &[Path::new(source)],
            &work.path(&format!("{name}.instrumented")),
            &["-O0"],
        );
        let out = run(
            Command::new(&oracle).args(args).env("FNTRACE_ENTERS", &logs),
            DEADLINE,
        );
        // (recursion.c exits with 5, on purpose.)
        assert!(
            out.status.code().is_some(),
            "{name}, instrumented: {}",
            text(&out.stderr)
        );
        let expected = entries_logged(&logs, &oracle);
        assert!(!expected.is_empty(), "{name}: the hooks logged nothing");

        for (form, flags) in FORMS {
            let exe = work.path(&format!("{name}-{form}"));
            let mut all = vec!["-O0", source, "-o", exe.to_str().unwrap()];
            all.extend(flags);
            all.extend(libs);
            cc(AARCH64.linker, &all);
            let plain = run(Command::new(&exe).args(args).current_dir(&work.dir), DEADLINE);
            assert_eq!(
                plain.status.code(),
                out.status.code(),
                "{name} ({form}): untraced exit status"
            );
            let data = work.path(&format!("{name}-{form}.data"));
            let mut cmd = foreign::command(&AARCH64, &fntrace_a64);
            cmd.current_dir(&work.dir)
                .env_remove("FNTRACE_RUNTIME")
                .args(["record", "--tracer", "function", "--no-libcall", "-o"])
                .arg(&data)
                .arg("--")
                .arg(&exe)
                .args(args);
            let out = run(&mut cmd, DEADLINE);
            let stderr = text(&out.stderr);
            let said: Vec<&str> = stderr.lines().filter(|l| !qemu_noise(l)).collect();
            assert!(said.is_empty(), "{name} ({form}): record said {said:?}");
            assert_eq!(
                out.status.code(),
                plain.status.code(),
                "{name} ({form}): exit status"
            );
            assert_eq!(
                text(&out.stdout),
                text(&plain.stdout),
                "{name} ({form}): output changed"
            );

            let data = data.to_str().unwrap();
            let native = fntrace_output(&["replay", "--color", "never", data]);
            assert!(
                native.status.success(),
                "replay {name} ({form}): {}",
                text(&native.stderr)
            );
            let replayed = entries_replayed(&text(&native.stdout));
            assert_eq!(replayed, expected, "{name} ({form}): entries per thread");
            // Callers are code addresses: a return address read signed
            // (pointer authentication) would carry its code in the bits
            // above the 48 of an address.
            let shown = text(&native.stdout);
            let signed: Vec<&str> = shown
                .lines()
                .filter(|l| {
                    l.split_once(" <-0x")
                        .and_then(|(_, a)| u64::from_str_radix(a.trim(), 16).ok())
                        .is_some_and(|a| a >> 48 != 0)
                })
                .collect();
            assert!(signed.is_empty(), "{name} ({form}): callers signed: {signed:?}");

            let own = run(
                foreign::command(&AARCH64, &fntrace_a64).args(["replay", "--color", "never", data]),
                DEADLINE,
            );
            assert_eq!(
                text(&own.stdout),
                text(&native.stdout),
                "{name} ({form}): AArch64 replay"
            );
        }
    }
}

/// Recording values (`-A`, `-R`, `-a`) and library calls are not built
/// for AArch64: one line, exit 1, no data directory.
#[test]
fn aarch64_record_says_what_is_not_built() {
    let _serial = serial();
    let test = "aarch64_record_says_what_is_not_built";
    let fntrace_a64 = match foreign::fntrace_for(&AARCH64) {
        Ok(path) => path,
        Err(why) => return common::skip(test, &why),
    };
    let work = Work::new("foreign-record-limits");
    let exe = work.path("nested");
    let source = programs().join("e2e/nested.c");
    cc(
        AARCH64.linker,
        &[
            "-O0",
            "-fpatchable-function-entry=2",
            source.to_str().unwrap(),
            "-o",
            exe.to_str().unwrap(),
        ],
    );
    let data = work.path("x.data");
    let exe = exe.to_str().unwrap();
    let not_built = "recording arguments and return values is not built for AArch64";
    let cases: [&[&str]; 3] = [&["-A", "leaf@arg1"], &["-R", "leaf@retval"], &["-a"]];
    let libcalls: (&[&str], &str) = (
        &["--nest-libcall"],
        "tracing library calls (--nest-libcall) is not built for AArch64 yet",
    );
    for (options, said) in cases.into_iter().map(|o| (o, not_built)).chain([libcalls]) {
        let mut cmd = foreign::command(&AARCH64, &fntrace_a64);
        cmd.env_remove("FNTRACE_RUNTIME")
            .arg("record")
            .arg("-o")
            .arg(&data)
            .args(options)
            .args(["--", exe]);
        let out = run(&mut cmd, DEADLINE);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{options:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{options:?}: {err}");
        assert!(err.contains(said), "{options:?}: {err}");
        assert!(!data.exists(), "{options:?} left a data directory");
    }
}

/// Live patching under load on AArch64 (`crates/runtime/tests/live.rs`'s
/// program, built for AArch64 and linked with the AArch64 runtime): three
/// threads call a traced function while the main thread registers and
/// unregisters (or re-filters) its ops 1,000 times each way; every call
/// made while surely enabled must reach the callback, none made while
/// surely disabled may, and every result stays right.
///
/// Under qemu the state is called sure 5 ms (`regs`: 20 ms) after each
/// change returns (`STRESS_GRACE_US`), not at once as natively: qemu's multi-threaded
/// TCG may run a thread's old translation of code another thread has just
/// rewritten (qemu issue 4669, the kernel's own ftrace crashing under it),
/// which the architecture's `ic ivau`/`isb` and `membarrier` do not reach.
/// Without the grace, one call in tens of millions right after a change
/// missed its callback; the window grows with the routine's length
/// (`docs/CROSS.md` has the counts). Mode `regs` (the register frame:
/// `x0` must be the call's argument) at entry sites only: at a `-pg` site
/// gcc has put the return address in `x0` for `_mcount`.
#[test]
fn aarch64_live_patching_under_load() {
    let _serial = serial();
    let Some(fntrace_a64) = runnable("aarch64_live_patching_under_load") else {
        return;
    };
    let runtime_dir = fntrace_a64.parent().unwrap().display().to_string();
    let runtime_tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime");
    let source = runtime_tests.join("tests/programs/stress.c");
    let include = format!("-I{}", runtime_tests.join("include").display());
    let work = Work::new("foreign-live-aarch64");
    let forms: [(&str, &str, &[&str]); 2] = [
        (
            "patchable",
            "-fpatchable-function-entry=2",
            &["ops", "list", "filter", "regs"],
        ),
        ("pg", "-pg", &["ops", "list", "filter"]),
    ];
    for (form, flag, modes) in forms {
        let exe = work.path(&format!("stress-{form}"));
        let link = format!("-L{runtime_dir}");
        let rpath = format!("-Wl,-rpath,{runtime_dir}");
        cc(
            AARCH64.linker,
            &[
                "-O2",
                "-pthread",
                flag,
                &include,
                source.to_str().unwrap(),
                &link,
                "-lfntrace_runtime",
                &rpath,
                "-o",
                exe.to_str().unwrap(),
            ],
        );
        for mode in modes {
            let out = run(
                Command::new(&exe)
                    .args([mode, "1000"])
                    .env("STRESS_GRACE_US", if *mode == "regs" { "20000" } else { "5000" }),
                DEADLINE,
            );
            let stdout = text(&out.stdout);
            assert!(
                out.status.success(),
                "stress {form} {mode}: {:?}\n{stdout}\n{}",
                out.status,
                text(&out.stderr)
            );
            let line = stdout
                .lines()
                .find(|l| l.starts_with("mode="))
                .expect("summary line");
            let field = |name: &str| -> u64 {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix(&format!("{name}=")))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("{name} in {line}"))
            };
            for zero in ["violations", "bad_results", "bad_args", "refused", "traps"] {
                assert_eq!(field(zero), 0, "{form} {mode}: {line}");
            }
            assert!(
                field("checked_on") > 0 && field("checked_off") > 0,
                "{form} {mode}: {line}"
            );
            // Two syncs per batch (one word each): the `mov x9, x30` word,
            // then the call's. The conversion at load is a live batch
            // too under qemu, whose own thread runs beside the program's.
            let extra = field("syncs").checked_sub(2 * field("batches"));
            assert!(matches!(extra, Some(0 | 2)), "{form} {mode}: {line}");
            eprintln!("{form}: {line}");
        }
    }
}

/// The golden programs of `e2e.rs` on AArch64, with the default tracer
/// (function_graph: returns hijacked through `x30`, or the `-pg` frame
/// record): `replay` and `report` of the recording, made by the AArch64
/// runtime under qemu and read by the x86-64 fntrace, normalised, equal
/// the same expected files as on x86-64 — recursion, `longjmp`, threads
/// and a C++ exception through traced frames included.
#[test]
fn aarch64_golden_programs() {
    let _serial = serial();
    let Some(fntrace_a64) = runnable("aarch64_golden_programs") else {
        return;
    };
    let work = Work::new("foreign-golden-aarch64");
    // (name, C++, link flags, exit status)
    let programs_: [(&str, bool, &[&str], i32); 5] = [
        ("nested", false, &[], 0),
        ("recursion", false, &[], 5),
        ("longjmp", false, &[], 0),
        ("threads", false, &["-pthread"], 0),
        ("cxx_exception", true, &[], 0),
    ];
    let mut problems = Vec::new();
    for (name, cxx, libs, status) in programs_ {
        let compiler = if cxx { AARCH64.cxx } else { AARCH64.linker };
        let source = programs().join(format!("e2e/{name}.{}", if cxx { "cc" } else { "c" }));
        for (form, flags) in FORMS {
            let exe = work.path(&format!("{name}-{form}"));
            build_o0(compiler, &source, &exe, &[flags, libs].concat());
            let plain = run(Command::new(&exe).current_dir(&work.dir), DEADLINE);
            assert_eq!(plain.status.code(), Some(status), "{name} ({form}), untraced");
            let data = work.path(&format!("{name}-{form}.data"));
            let (out, said) = record(&fntrace_a64, &work, &data, &exe);
            let what = format!("{name} ({form})");
            if !said.is_empty() {
                problems.push(format!("{what}: record said {said:?}"));
            }
            if out.status.code() != Some(status) || text(&out.stdout) != text(&plain.stdout) {
                problems.push(format!(
                    "{what}: traced run differs: {:?} {:?} (untraced {:?})",
                    out.status,
                    text(&out.stdout),
                    text(&plain.stdout)
                ));
                continue;
            }
            let data = data.to_str().unwrap();
            let replay = fntrace_output(&["replay", "--color", "never", data]);
            let report = fntrace_output(&["report", "--json", data]);
            let checks = [
                (
                    format!("{name}.expected"),
                    Replay::parse(&text(&replay.stdout)).canonical(),
                ),
                (
                    format!("{name}.report.expected"),
                    report_counts(&text(&report.stdout)),
                ),
            ];
            for (file, actual) in checks {
                let expected = std::fs::read_to_string(expected_path(&file)).unwrap();
                if expected != actual {
                    problems.push(format!(
                        "{what}: differs from {file}:\n{}",
                        diff(&expected, &actual)
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Pointer authentication at every depth: `pac_depth.cc`'s thousands of
/// live frames each sign their return address with their own stack
/// pointer, and about one in 128 of the signatures is all zero (the
/// signed address equals the plain one). Whether a frame is signed must
/// then come from its code, not its value: returns, an exception through
/// every frame and one caught halfway, in each form, and signed with key
/// B too. The truth is the program's own count of its calls; no frame
/// may end found gone
/// (`(unwound)`): each returned through the trampoline or was passed by
/// the exception's unwinder.
#[test]
fn aarch64_signed_return_addresses_at_every_depth() {
    let _serial = serial();
    let Some(fntrace_a64) = runnable("aarch64_signed_return_addresses_at_every_depth") else {
        return;
    };
    let work = Work::new("foreign-pac-depth");
    let source = programs().join("cross/pac_depth.cc");
    let mut problems = Vec::new();
    for &(form, flags) in FORMS.iter().chain(&KEY_B_FORMS) {
        let exe = work.path(&format!("pac_depth-{form}"));
        build_o0(AARCH64.cxx, &source, &exe, flags);
        let plain = run(Command::new(&exe).current_dir(&work.dir), DEADLINE);
        assert_eq!(plain.status.code(), Some(0), "{form}, untraced");
        let said = text(&plain.stdout);
        let calls: u64 = said
            .split(", ")
            .find_map(|part| part.strip_suffix(" calls\n")?.parse().ok())
            .unwrap_or_else(|| panic!("{form}: no count of calls in {said:?}"));
        let data = work.path(&format!("pac_depth-{form}.data"));
        let (out, noise) = record(&fntrace_a64, &work, &data, &exe);
        if !noise.is_empty() || out.status.code() != Some(0) || text(&out.stdout) != said {
            problems.push(format!(
                "{form}: traced run {:?} said {noise:?} and printed {:?} (untraced {said:?})",
                out.status,
                text(&out.stdout)
            ));
            continue;
        }
        let data = data.to_str().unwrap();
        let report = fntrace_output(&["report", "--json", data]);
        let rows: serde_json::Value = serde_json::from_str(&text(&report.stdout)).unwrap();
        let counted = |name: &str| {
            rows.as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"].as_str() == Some(name))
                .map(|r| r["calls"].as_u64().unwrap())
        };
        let recorded = ["dive(int, int)", "catch_midway(int, int)"].map(counted);
        if recorded.iter().flatten().sum::<u64>() != calls || counted("main") != Some(1) {
            problems.push(format!(
                "{form}: recorded {recorded:?} calls, the program counted {calls}"
            ));
        }
        let replay = fntrace_output(&["replay", "--color", "never", data]);
        let gone = text(&replay.stdout)
            .lines()
            .filter(|l| l.contains("(unwound)"))
            .count();
        if gone != 0 {
            problems.push(format!("{form}: {gone} frames found gone, not returned"));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}
