//! Shared helpers of the integration tests: `fntrace` invocation and its
//! listing; the scratch directory, compilers and the independent readings
//! that results are compared with (`objdump -d`, `readelf -x`, `llvm-xray
//! extract`) come from `fntrace-testkit`, which `fntrace-sites`' tests share.
// Each test uses some of these, none uses all.
#![allow(dead_code, unused_imports)]

pub mod attach;
pub mod check;
pub mod counts;
pub mod foreign;
pub mod functions;
pub mod golden;
pub mod objects;
pub mod procs;
pub mod readers;
pub mod real;
pub mod scenarios;
pub mod styles;
pub mod tally;
pub mod terminal;
pub mod tracedata;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

pub use fntrace_testkit::{
    build_o0, build_program, cc, program, programs, require, run, sites, truth, ListedFunction, ListedSite,
    Work, CXX_PROGRAM, C_PROGRAM,
};
use serde_json::Value;

/// Calls per function name, from `fntrace report --json` of `data` with
/// `options` (which must succeed).
pub fn report_calls(data: &Path, options: &[&str]) -> std::collections::BTreeMap<String, u64> {
    let mut args = vec!["report", "--json"];
    args.extend(options);
    args.push(data.to_str().unwrap());
    let out = fntrace_output(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Value = serde_json::from_slice(&out.stdout).expect("report --json");
    rows.as_array()
        .expect("an array of rows")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Whether the tests run under CI (`CI` set), where nothing may skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// A test that cannot run here: under CI it fails; elsewhere it says so in
/// the test command's own output — written to stderr directly, which the
/// test harness does not capture (its `eprintln!` is shown only for a
/// failing test) — and the caller returns.
pub fn skip(test: &str, why: &str) {
    assert!(!in_ci(), "{test} cannot run under CI: {why}");
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {why} (.ci/run installs what the tests need; under CI this fails)"
    );
}

/// Builds the C program `source` into the work directory as `name` with
/// gcc and `args` (it keeps its source as `name.c`).
pub fn build_c(work: &Work, name: &str, source: &str, args: &[&str]) -> PathBuf {
    let src = work.path(&format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = work.path(name);
    let mut all = vec![src.to_str().unwrap(), "-o", out.to_str().unwrap()];
    all.extend(args);
    cc("gcc", &all);
    out
}

/// Takes from the linked file `path` everything fntrace finds functions
/// by — its symbols and its unwind tables — so that it has nothing to
/// patch (a plain build has its functions traced as bare sites).
pub fn strip_functions(path: &Path) {
    cc(
        "objcopy",
        &[
            "--strip-all",
            "--remove-section=.eh_frame",
            "--remove-section=.eh_frame_hdr",
            path.to_str().unwrap(),
        ],
    );
}

/// The process directory (`p*/`) of a data directory with one process.
pub fn process_dir(data: &Path) -> PathBuf {
    std::fs::read_dir(data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no process directory in {}", data.display()))
}

/// Builds a generated program with `functions` leaf functions
/// (`bench/gen-functions.sh`) into the work directory as `prog`.
pub fn build_generated(work: &Work, functions: usize, compiler: &str, args: &[&str]) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/gen-functions.sh");
    let source = run(Command::new("bash").arg(script).arg(functions.to_string()));
    let path = work.path("functions.c");
    std::fs::write(&path, source).unwrap();
    let out = work.path("prog");
    let mut all = vec![path.to_str().unwrap(), "-o", out.to_str().unwrap()];
    all.extend(args);
    cc(compiler, &all);
    out
}

/// The `fntrace` binary under test.
pub fn fntrace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fntrace"))
}

/// How long one `fntrace` run may take before the test calls it a hang.
const DEADLINE: Duration = Duration::from_secs(120);

/// Runs `fntrace` with arguments and returns the whole output; fails the
/// test if it does not finish in time.
pub fn fntrace_output(args: &[&str]) -> Output {
    procs::run(fntrace().args(args), DEADLINE)
}

/// The address space a bounded `fntrace` run may use (KiB, `ulimit -v`).
const BOUNDED_KIB: u64 = 1 << 20;
/// How long a bounded `fntrace` run may take.
const BOUNDED_DEADLINE: Duration = Duration::from_secs(60);

/// Runs `fntrace` with arguments under a 1 GiB address-space limit and a
/// 60 s deadline (bad input must never take unbounded memory or time);
/// returns the whole output.
pub fn fntrace_bounded(args: &[&str]) -> Output {
    let script = format!("ulimit -v {BOUNDED_KIB} && exec \"$0\" \"$@\"");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script, env!("CARGO_BIN_EXE_fntrace")])
        .args(args);
    procs::run(&mut cmd, BOUNDED_DEADLINE)
}

/// Runs `fntrace` with arguments; it must succeed. Returns stdout and
/// stderr.
pub fn fntrace_ok(args: &[&str]) -> (String, String) {
    let out = fntrace_output(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

/// Asserts a clean failure: the exit code, one line on stderr that starts
/// with `fntrace: error:` and contains `what`, nothing on stdout.
pub fn assert_fails(out: &Output, code: i32, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "exit status; stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("fntrace: error: "), "{stderr}");
    assert!(stderr.contains(what), "'{what}' not in: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

pub fn hex_u64(v: &Value) -> u64 {
    let s = v.as_str().expect("hex string");
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex number")
}

fn parse_bytes(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// `fntrace list --json FILE`: must succeed with nothing on stderr (no
/// rejected entries).
pub fn list(path: &Path) -> Vec<ListedFunction> {
    let out = fntrace_output(&["list", "--json", &path.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "fntrace list {} failed: {stderr}",
        path.display()
    );
    assert!(
        stderr.is_empty(),
        "fntrace list {} warned: {stderr}",
        path.display()
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    json.as_array()
        .expect("array")
        .iter()
        .map(|f| ListedFunction {
            name: f["name"].as_str().unwrap().to_string(),
            symbol: f["symbol"].as_str().unwrap_or("").to_string(),
            address: hex_u64(&f["address"]),
            kind: f["kind"].as_str().unwrap().to_string(),
            local: f["local"].as_bool().unwrap(),
            file: f["file"].as_str().map(str::to_string),
            sites: f["sites"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| ListedSite {
                    section: s["section"].as_str().unwrap().to_string(),
                    address: hex_u64(&s["address"]),
                    len: s["len"].as_u64().unwrap() as usize,
                    kind: s["kind"].as_str().unwrap().to_string(),
                    source: s["source"].as_str().unwrap().to_string(),
                    form: s["form"].as_str().unwrap().to_string(),
                    prefix: s["prefix"].as_u64().unwrap(),
                    bytes: parse_bytes(s["bytes"].as_str().unwrap()),
                })
                .collect(),
        })
        .collect()
}

/// The calls of a Chrome export's `traceEvents`, as `(B, E)` pairs: an
/// `E` (which has no name) closes its thread's last open `B`.
pub fn chrome_calls(events: &[Value]) -> Vec<(Value, Value)> {
    let mut open: std::collections::HashMap<String, Vec<Value>> = Default::default();
    let mut calls = Vec::new();
    for e in events {
        let thread = format!("{}/{}", e["pid"], e["tid"]);
        match e["ph"].as_str() {
            Some("B") => open.entry(thread).or_default().push(e.clone()),
            Some("E") => {
                let b = open
                    .get_mut(&thread)
                    .and_then(Vec::pop)
                    .expect("an E closes an open B");
                calls.push((b, e.clone()));
            }
            _ => {}
        }
    }
    calls
}
