//! One trace format for every machine (#22 item 3), and honest limits
//! (item 4): fntrace built for AArch64 (64-bit, little-endian) and for
//! MIPS (32-bit, big-endian) with Debian's Rust (`docs/CROSS.md`), run
//! under qemu-user, reads recordings made on x86-64 exactly as the native
//! fntrace does — every reader and export, byte for byte — and lists its
//! own machine's binaries as the native one lists them. Where it cannot
//! yet do something (record on MIPS, attach), it says so in one line.
//! Recording on AArch64: `foreign_record.rs`.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::foreign::{self, Machine, AARCH64, MIPS};
use common::procs::{run, runtime, text};
use common::styles::Style;
use common::tracedata::dropped_in_a_loop;
use common::{fntrace, fntrace_output, programs, Work};

/// How long a foreign reader may take under qemu.
const READ: Duration = Duration::from_secs(300);

/// The foreign fntrace, or `None` (said; a failure under `CI`).
fn foreign_fntrace(test: &str, m: &'static Machine) -> Option<std::path::PathBuf> {
    match foreign::fntrace_for(m) {
        Ok(path) => Some(path),
        Err(why) => {
            common::skip(test, &why);
            None
        }
    }
}

/// Records `source` (C, fentry sites) natively, with `options`.
fn record(work: &Work, name: &str, source: &str, libs: &[&str], options: &[&str]) -> Option<String> {
    let mut args = vec!["-O0"];
    args.extend(libs);
    let exe = Style::Fentry.build(&programs().join(source), &work.path(name), false, &args)?;
    runtime();
    let data = work.path(&format!("{name}.data")).display().to_string();
    let exe = exe.display().to_string();
    let mut all = vec!["record", "-o", &data];
    all.extend(options);
    all.extend(["--", &exe]);
    let out = fntrace_output(&all);
    assert!(out.status.success(), "record {name}: {}", text(&out.stderr));
    Some(data)
}

/// The readers compared, each with the data directory last.
const READERS: &[&[&str]] = &[
    &["replay", "--color", "never"],
    &[
        "replay",
        "-f",
        "time,elapsed,delta,tid,addr,duration",
        "--color",
        "never",
    ],
    &["replay", "-F", "outer", "-D", "2", "--color", "never"],
    &["report"],
    &["report", "--json", "-s", "calls,self"],
    &["graph"],
    &["graph", "--gprof"],
    &["info"],
    &["dump", "--chrome"],
    &["dump", "--folded", "--per-thread"],
    &["dump", "--perfetto"],
];

fn same(what: &str, native: &Output, foreign: &Output) -> Option<String> {
    if native.status.code() != foreign.status.code() {
        return Some(format!(
            "{what}: exit {:?} natively, {:?} foreign; stderr: {}",
            native.status.code(),
            foreign.status.code(),
            text(&foreign.stderr)
        ));
    }
    if native.stdout != foreign.stdout {
        return Some(format!(
            "{what}: output differs ({} bytes natively, {} foreign)",
            native.stdout.len(),
            foreign.stdout.len()
        ));
    }
    if text(&native.stderr) != text(&foreign.stderr) {
        return Some(format!(
            "{what}: stderr differs:\n{}\n---\n{}",
            text(&native.stderr),
            text(&foreign.stderr)
        ));
    }
    None
}

#[test]
fn aarch64_fntrace_reads_x86_64_traces_alike() {
    reads_x86_64_traces_alike("aarch64_fntrace_reads_x86_64_traces_alike", &AARCH64);
}

#[test]
fn mips_fntrace_reads_x86_64_traces_alike() {
    reads_x86_64_traces_alike("mips_fntrace_reads_x86_64_traces_alike", &MIPS);
}

/// Every reader of the foreign fntrace gives, on x86-64 recordings, the
/// bytes the native one gives: a program's call tree, threads, recorded
/// argument values (`DATA` payloads), and a recording that lost events.
fn reads_x86_64_traces_alike(test: &str, m: &'static Machine) {
    let Some(foreign_exe) = foreign_fntrace(test, m) else {
        return;
    };
    let work = Work::new(&format!("foreign-read-{}", m.arch));
    let mut dirs = Vec::new();
    dirs.extend(record(&work, "filters", "e2e/filters.c", &[], &["--no-libcall"]));
    dirs.extend(record(&work, "threads", "e2e/threads.c", &["-pthread"], &[]));
    dirs.extend(record(
        &work,
        "values",
        "args/values.c",
        &["-pthread"],
        &["-A", "*@arg1,arg2/s", "-R", "*@retval"],
    ));
    dirs.push(dropped_in_a_loop(&work).path().to_string());
    let mut problems = Vec::new();
    for dir in &dirs {
        for reader in READERS {
            let mut args: Vec<&str> = reader.to_vec();
            args.push(dir);
            let native = run(fntrace().args(&args).current_dir(&work.dir), READ);
            let foreign = run(
                foreign::command(m, &foreign_exe)
                    .args(&args)
                    .current_dir(&work.dir),
                READ,
            );
            let name = Path::new(dir).file_name().unwrap().to_string_lossy();
            problems.extend(same(
                &format!("{} on {name}", reader.join(" ")),
                &native,
                &foreign,
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The AArch64 fntrace lists an AArch64 binary's sites (gcc's
/// `-fpatchable-function-entry=2` and `-pg`) as the native one does.
#[test]
fn aarch64_fntrace_lists_as_native() {
    let forms: &[(&str, &[&str])] = &[("patchable", &["-fpatchable-function-entry=2"]), ("pg", &["-pg"])];
    lists_as_native("aarch64_fntrace_lists_as_native", &AARCH64, forms);
}

/// The MIPS fntrace lists a MIPS binary's `-pg` sites (non-PIC `jal
/// _mcount`, and the PIC `jalr t9` form) as the native one does.
#[test]
fn mips_fntrace_lists_as_native() {
    let forms: &[(&str, &[&str])] = &[("pg", &["-pg", "-fno-pic", "-no-pie"]), ("pg-pic", &["-pg"])];
    lists_as_native("mips_fntrace_lists_as_native", &MIPS, forms);
}

fn lists_as_native(test: &str, m: &'static Machine, forms: &[(&str, &[&str])]) {
    let Some(foreign_exe) = foreign_fntrace(test, m) else {
        return;
    };
    let work = Work::new(&format!("foreign-list-{}", m.arch));
    let source = programs().join("e2e/filters.c");
    let mut problems = Vec::new();
    for &(name, flags) in forms {
        let exe = work.path(name);
        let mut cmd = std::process::Command::new(m.linker);
        cmd.args(flags).arg("-O1").arg(&source).arg("-o").arg(&exe);
        let built = run(&mut cmd, READ);
        assert!(built.status.success(), "{cmd:?}: {}", text(&built.stderr));
        for args in [&["list"][..], &["list", "--sites", "--json"][..]] {
            let mut all: Vec<&str> = args.to_vec();
            all.push(exe.to_str().unwrap());
            let native = run(fntrace().args(&all), READ);
            assert!(native.status.success(), "{all:?}: {}", text(&native.stderr));
            let foreign = run(foreign::command(m, &foreign_exe).args(&all), READ);
            problems.extend(same(&format!("{} of {name}", args.join(" ")), &native, &foreign));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn aarch64_fntrace_says_what_it_cannot_do() {
    says_what_it_cannot_do("aarch64_fntrace_says_what_it_cannot_do", &AARCH64);
}

#[test]
fn mips_fntrace_says_what_it_cannot_do() {
    says_what_it_cannot_do("mips_fntrace_says_what_it_cannot_do", &MIPS);
}

/// What the foreign fntrace cannot do yet, it says in one line, exit 1:
/// recording (MIPS: no runtime yet; AArch64: another machine's program)
/// and attaching (injection is x86-64 only).
fn says_what_it_cannot_do(test: &str, m: &'static Machine) {
    let Some(foreign_exe) = foreign_fntrace(test, m) else {
        return;
    };
    let work = Work::new(&format!("foreign-limits-{}", m.arch));
    let data = work.path("x.data").display().to_string();
    // AArch64 records its own programs (`foreign_record.rs`), not
    // x86-64's; MIPS records nothing yet.
    let recording = match m.runtime {
        true => "/bin/true is for x86-64; this fntrace records AArch64 programs".to_string(),
        false => format!("recording is not implemented on {}", m.arch),
    };
    let attach = format!("fntrace attach is not implemented on {}", m.arch);
    let cases: [(&[&str], &str); 3] = [
        (&["record", "-o", &data, "--", "/bin/true"], &recording),
        (&["live", "--", "/bin/true"], &recording),
        (&["attach", "1"], &attach),
    ];
    for (args, said) in cases {
        let out = run(foreign::command(m, &foreign_exe).args(args), READ);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert!(!Path::new(&data).exists(), "{args:?} left a data directory");
    }
}
