//! What the tests of site discovery share, in `fntrace-sites` (which calls
//! discovery directly) and in the CLI (which runs `fntrace list`): a
//! scratch directory, the test programs and the compilers that build them,
//! the independent readings that results are compared with (`objdump -d`,
//! `readelf -x`, `llvm-xray extract`: [`truth`]), and the comparison of a
//! listing with them ([`check`]); the independent counts of calls that
//! traces are compared with (valgrind's callgrind: [`callgrind`]; the
//! hooks of a `-finstrument-functions` build: [`enters`]); fntrace and its
//! runtime built for another machine ([`cross`]). Tests only.

pub mod callgrind;
pub mod check;
pub mod cross;
pub mod enters;
pub mod truth;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh scratch directory for one test.
pub struct Work {
    pub dir: PathBuf,
}

impl Work {
    /// `NAME` under Cargo's `CARGO_TARGET_TMPDIR` (`target/tmp`), found
    /// from the test binary (`target/debug/deps/...`): a library is not
    /// given that variable, only the integration tests that use it.
    pub fn new(name: &str) -> Work {
        let exe = std::env::current_exe().expect("the test binary's path");
        let target = exe
            .ancestors()
            .nth(3)
            .expect("a test binary in target/PROFILE/deps");
        let dir = target.join("tmp").join("fntrace-tests").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Work { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The test programs' directory (`crates/cli/tests/programs`).
pub fn programs() -> PathBuf {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    crates.join("cli/tests/programs")
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

/// Builds the library-call test program (`programs/libcall/main.c`) as
/// `name` with `compiler` and `flags`, against `libmid.so` (`mid.c`, plain
/// `-O2`), built into the work directory first if it is not there; both
/// `-fno-builtin`, so that every library call of the source is a call.
pub fn build_libcall(work: &Work, name: &str, compiler: &str, flags: &[&str]) -> PathBuf {
    let lib = work.path("libmid.so");
    if !lib.exists() {
        let mid = program("libcall/mid.c");
        let out = lib.to_str().unwrap();
        cc(
            "gcc",
            &["-O2", "-fno-builtin", "-fPIC", "-shared", &mid, "-o", out],
        );
    }
    let exe = work.path(name);
    let main = program("libcall/main.c");
    let include = format!("-I{}", programs().join("libcall").display());
    let libdir = format!("-L{}", work.dir.display());
    let rpath = format!("-Wl,-rpath,{}", work.dir.display());
    let out = exe.to_str().unwrap();
    let mut args = vec![
        "-O2",
        "-fno-builtin",
        &include,
        &main,
        "-o",
        out,
        &libdir,
        "-lmid",
        &rpath,
        "-pthread",
    ];
    args.extend(flags);
    cc(compiler, &args);
    exe
}

/// Compiles and/or links with `compiler` (gcc, clang-16, g++, ...).
pub fn cc(compiler: &str, args: &[&str]) {
    require(compiler);
    run(Command::new(compiler).args(args));
}

/// Builds `source` with `compiler` at `-O0` with frame pointers and
/// `flags` into `exe` (the traced programs whose output is compared).
pub fn build_o0(compiler: &str, source: &Path, exe: &Path, flags: &[&str]) {
    let mut all = vec![
        "-O0",
        "-fno-omit-frame-pointer",
        source.to_str().expect("UTF-8 path"),
        "-o",
        exe.to_str().expect("UTF-8 path"),
    ];
    all.extend(flags);
    cc(compiler, &all);
}

/// A site as a listing reports it (`fntrace list --json`'s fields).
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

/// A function as a listing reports it (`fntrace list --json`'s fields).
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

/// Every site of a listing, with the function it belongs to.
pub fn sites(listing: &[ListedFunction]) -> Vec<(&ListedFunction, &ListedSite)> {
    listing
        .iter()
        .flat_map(|f| f.sites.iter().map(move |s| (f, s)))
        .collect()
}
