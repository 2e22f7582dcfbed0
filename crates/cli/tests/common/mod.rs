//! Shared helpers of the integration tests: a scratch directory, compiler
//! and `fntrace` invocation, and the independent readings that results are
//! compared with (`objdump -d`, `readelf -x`, `llvm-xray extract`).
#![allow(dead_code)]

pub mod attach;
pub mod check;
pub mod functions;
pub mod objects;
pub mod procs;
pub mod readers;
pub mod scenarios;
pub mod styles;
pub mod tally;
pub mod tracedata;
pub mod truth;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

/// A fresh scratch directory for one test.
pub struct Work {
    pub dir: PathBuf,
}

impl Work {
    pub fn new(name: &str) -> Work {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("fntrace-tests")
            .join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Work { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The test programs' directory.
pub fn programs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

/// A test program's source file.
pub fn program(rel: &str) -> String {
    programs().join(rel).display().to_string()
}

/// Fails the test with a clear message if a tool the tests need is missing:
/// a test that cannot run must not pass.
pub fn require(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "the tests need '{tool}': run .ci/run (it installs gcc, clang-14, clang-16, llvm)"
    );
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

/// Runs a command that must succeed; returns its stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The C test program's sources.
pub const C_PROGRAM: &[&str] = &["c/main.c", "c/util.c"];
/// The C++ test program's sources.
pub const CXX_PROGRAM: &[&str] = &["cxx/shapes.cpp", "cxx/main.cpp"];

/// Builds test program `sources` (under `tests/programs`) into the work
/// directory as `name`: `compiler SOURCES -o name ARGS`.
pub fn build_program(work: &Work, name: &str, compiler: &str, sources: &[&str], args: &[&str]) -> PathBuf {
    let out = work.path(name);
    let sources: Vec<String> = sources.iter().map(|s| program(s)).collect();
    let mut all: Vec<&str> = sources.iter().map(String::as_str).collect();
    all.extend(["-o", out.to_str().unwrap()]);
    all.extend(args);
    cc(compiler, &all);
    out
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

/// Compiles and/or links with `compiler` (gcc, clang-16, g++, ...).
pub fn cc(compiler: &str, args: &[&str]) {
    require(compiler);
    run(Command::new(compiler).args(args));
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

/// A site as `fntrace list --json` reports it.
#[derive(Debug, Clone)]
pub struct ListedSite {
    pub section: String,
    pub address: u64,
    pub len: usize,
    pub kind: String,
    pub source: String,
    pub form: String,
    pub prefix: u64,
    pub bytes: Vec<u8>,
}

/// A function as `fntrace list --json` reports it.
#[derive(Debug, Clone)]
pub struct ListedFunction {
    pub name: String,
    pub symbol: String,
    pub address: u64,
    pub kind: String,
    pub local: bool,
    pub file: Option<String>,
    pub sites: Vec<ListedSite>,
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

/// Every site of a listing, with the function it belongs to.
pub fn sites(listing: &[ListedFunction]) -> Vec<(&ListedFunction, &ListedSite)> {
    listing
        .iter()
        .flat_map(|f| f.sites.iter().map(move |s| (f, s)))
        .collect()
}
