//! `fntrace list` on a generated program with 20,000 functions lists all
//! 20,000 in each instrumentation style. (How long it takes is measured by
//! `bench/list.sh`, not here: see BENCHMARKS.md.)

mod common;

use common::{build_generated, fntrace_output, Work};

const FUNCTIONS: usize = 20_000;

fn check(name: &str, compiler: &str, flags: &[&str], kind: &str) {
    let work = Work::new(&format!("scale-{name}"));
    let mut args = vec!["-O0"];
    args.extend(flags);
    let exe = build_generated(&work, FUNCTIONS, compiler, &args);
    let out = fntrace_output(&["list", exe.to_str().unwrap(), "f[0-9]*"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = stdout.lines().map(|l| l.rsplit(' ').next().unwrap()).collect();
    let expected: Vec<String> = (0..FUNCTIONS).map(|i| format!("f{i:05}")).collect();
    assert_eq!(names, expected, "every generated function, in address order");
    assert!(
        stdout
            .lines()
            .all(|l| l.split_whitespace().nth(1).unwrap().starts_with(kind)),
        "{kind}"
    );
}

#[test]
fn gcc_fentry_recorded() {
    check(
        "gcc-fentry",
        "gcc",
        &["-pg", "-mfentry", "-mrecord-mcount"],
        "fentry",
    );
}

#[test]
fn gcc_mcount_scanned() {
    check("gcc-mcount", "gcc", &["-pg"], "mcount");
}

#[test]
fn gcc_patchable() {
    check(
        "gcc-patchable",
        "gcc",
        &["-fpatchable-function-entry=5"],
        "patchable",
    );
}

#[test]
fn clang_fentry_scanned() {
    check("clang-fentry", "clang-16", &["-pg", "-mfentry"], "fentry");
}

#[test]
fn clang_xray() {
    check(
        "clang-xray",
        "clang-16",
        &["-fxray-instrument", "-fxray-instruction-threshold=1"],
        "xray-entry",
    );
}
