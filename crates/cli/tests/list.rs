//! `fntrace list`: filters in ftrace's syntax, the text and JSON forms,
//! and output into a closed pipe.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use common::{build_program, fntrace_output, list, Work, CXX_PROGRAM, C_PROGRAM};

fn build(work: &Work) -> PathBuf {
    build_program(
        work,
        "prog",
        "gcc",
        C_PROGRAM,
        &["-O2", "-pg", "-mfentry", "-mrecord-mcount"],
    )
}

/// The lines `fntrace` prints for these arguments, which must succeed.
fn lines(args: &[&str]) -> Vec<String> {
    let out = fntrace_output(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The names `fntrace list` prints (last column) for these arguments.
fn names(args: &[&str]) -> BTreeSet<String> {
    lines(args)
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn filters() {
    let work = Work::new("list-filters");
    let exe = build(&work);
    let p = exe.to_str().unwrap();
    let util = set(&["util_sum", "util_helper_value", "util_varargs"]);
    assert_eq!(names(&["list", p, "util_*"]), util);
    assert_eq!(
        names(&["list", p, "*_sum", "*_varargs"]),
        set(&["util_sum", "util_varargs"])
    );
    assert_eq!(
        names(&["list", p, "util_*", "!*_sum"]),
        set(&["util_helper_value", "util_varargs"])
    );
    assert_eq!(names(&["list", p, "fib"]), set(&["fib"]));
    assert_eq!(names(&["list", p, "f?b"]), set(&["fib"]));
    assert_eq!(names(&["list", p, "[lt]*", "!tail"]), set(&["leaf"]));
    // Both static helpers.
    let out = fntrace_output(&["list", p, "helper"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    // Modules: this file is "prog".
    let all = names(&["list", p]);
    assert_eq!(names(&["list", p, ":mod:prog"]), all);
    assert_eq!(names(&["list", p, "util_*:mod:pr*"]), util);
    let nothing = fntrace_output(&["list", p, ":mod:libm"]);
    assert_eq!(nothing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("matches"));
    // Removing everything but one.
    let but_main: BTreeSet<String> = all.iter().filter(|n| *n != "main").cloned().collect();
    assert_eq!(names(&["list", p, "!main"]), but_main);
}

#[test]
fn cxx_names_filter_by_demangled_name_or_symbol() {
    let work = Work::new("list-cxx");
    let exe = build_program(
        &work,
        "shapes",
        "g++",
        CXX_PROGRAM,
        &["-O0", "-fpatchable-function-entry=5"],
    );
    let p = exe.to_str().unwrap();
    let circle = lines(&["list", p, "shapes::Circle::*"]);
    assert!(
        circle.iter().any(|l| l.ends_with("shapes::Circle::area() const")),
        "{circle:?}"
    );
    assert!(
        circle.iter().all(|l| l.contains("shapes::Circle::")),
        "{circle:?}"
    );
    // Without parameters, by symbol, and without demangling.
    assert_eq!(lines(&["list", p, "shapes::total"]).len(), 1);
    assert_eq!(lines(&["list", p, "_ZNK6shapes6Circle4areaEv"]).len(), 1);
    let raw = lines(&["list", "--no-demangle", p, "shapes::Circle::area"]);
    assert!(raw[0].ends_with(" _ZNK6shapes6Circle4areaEv"), "{raw:?}");
}

#[test]
fn text_json_and_sites_agree() {
    let work = Work::new("list-forms");
    let exe = build(&work);
    let p = exe.to_str().unwrap();
    let json = list(&exe);
    let text = fntrace_output(&["list", p]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert_eq!(text.lines().count(), json.len());
    for (line, f) in text.lines().zip(&json) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(u64::from_str_radix(fields[0], 16).unwrap(), f.address);
        assert_eq!(fields[1], f.kind);
        assert_eq!(*fields.last().unwrap(), f.name);
    }
    let sites = fntrace_output(&["list", "--sites", p]);
    let sites = String::from_utf8_lossy(&sites.stdout).into_owned();
    let count: usize = json.iter().map(|f| f.sites.len()).sum();
    assert_eq!(sites.lines().count(), count);
    let first = &json[0].sites[0];
    let line = sites.lines().next().unwrap();
    let hex: Vec<String> = first.bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert!(line.ends_with(&format!("[{}]", hex.join(" "))), "{line}");
    assert!(line.contains(" fentry ") && line.contains(" call ") && line.contains(" __mcount_loc "));
}

#[test]
fn closed_pipe_is_not_an_error() {
    // Output far larger than any write buffer, so writes fail mid-way.
    let work = Work::new("list-pipe");
    let exe = common::build_generated(&work, 2000, "gcc", &["-O0", "-fpatchable-function-entry=5"]);
    let fntrace = env!("CARGO_BIN_EXE_fntrace");
    for form in ["", "--sites", "--json"] {
        // The reader closes its end first; fntrace starts writing after.
        let script = format!(
            "set -o pipefail; (sleep 0.3; exec {fntrace} list {form} {}) | (exec <&-; sleep 1)",
            exe.display()
        );
        let out = Command::new("bash").args(["-c", &script]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{form}: {stderr}");
        assert!(stderr.is_empty(), "{form}: {stderr}");
    }
}

/// util.c as a shared library, built as site discovery's tests build it
/// (`crates/sites/tests/discovery_c.rs`): `:mod:libutil` selects every
/// function `list --json` lists.
#[test]
fn mod_selects_a_shared_librarys_functions() {
    let work = Work::new("list-mod-shared-library");
    for (name, compiler, flags) in [
        (
            "gcc-so-fentry",
            "gcc",
            &["-pg", "-mfentry", "-mrecord-mcount"][..],
        ),
        ("gcc-so-mcount", "gcc", &["-pg"]),
        (
            "clang-so-patchable",
            "clang-16",
            &["-fpatchable-function-entry=5,2"],
        ),
    ] {
        let mut args = vec!["-O2", "-fPIC", "-shared"];
        args.extend(flags);
        let lib = build_program(&work, "libutil.so", compiler, &["c/util.c"], &args);
        let listing = list(&lib);
        let out = fntrace_output(&["list", lib.to_str().unwrap(), ":mod:libutil"]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().count(),
            listing.len(),
            "{name}"
        );
    }
}
