//! Helpers of the runtime's tests: build real C programs with real
//! compilers, run them with the runtime loaded, with a deadline.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The test programs' sources.
pub fn programs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

/// `fntrace.h`'s directory.
pub fn include() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// The directory of `libfntrace_runtime.so` built with these tests: Cargo
/// builds it beside the test executables (`target/<profile>/deps`) and
/// copies it one level up only on `cargo build`.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let deps = exe.parent().expect("target/<profile>/deps");
    let found = [Some(deps), deps.parent()]
        .into_iter()
        .flatten()
        .find(|d| d.join("libfntrace_runtime.so").exists())
        .unwrap_or_else(|| panic!("no libfntrace_runtime.so in or above {}", deps.display()))
        .to_path_buf();
    found
}

/// The runtime library.
pub fn runtime() -> PathBuf {
    lib_dir().join("libfntrace_runtime.so")
}

/// A scratch directory, removed at drop.
pub struct Work(pub PathBuf);

impl Work {
    /// A new directory named after the test.
    pub fn new(name: &str) -> Work {
        let dir = std::env::temp_dir().join(format!("fntrace-rt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Work(dir)
    }

    /// A path inside.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Compiles with `compiler` and `args` (sources of `programs()` by
    /// name, `-o` into this directory), panicking with the compiler's
    /// message on failure.
    pub fn build(&self, compiler: &str, args: &[&str], out: &str) -> PathBuf {
        let output = self.path(out);
        let mut cmd = Command::new(compiler);
        for arg in args {
            if arg.ends_with(".c") && !arg.contains('/') && !arg.starts_with('-') {
                cmd.arg(programs().join(arg));
            } else {
                cmd.arg(arg);
            }
        }
        cmd.arg("-I")
            .arg(include())
            .arg("-o")
            .arg(&output)
            .current_dir(&self.0);
        let result = cmd.output().unwrap_or_else(|e| panic!("{compiler}: {e}"));
        assert!(
            result.status.success(),
            "{compiler} {args:?} failed:\n{}",
            String::from_utf8_lossy(&result.stderr)
        );
        output
    }

    /// Links against the runtime: the flags for `build`.
    pub fn link_runtime() -> Vec<String> {
        let dir = lib_dir();
        vec![
            format!("-L{}", dir.display()),
            "-lfntrace_runtime".into(),
            format!("-Wl,-rpath,{}", dir.display()),
        ]
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `program` with `args` and `env` in `dir`, killing it after
/// `deadline`.
pub fn run(dir: &Path, program: &Path, args: &[&str], env: &[(&str, &str)], deadline: Duration) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{} {args:?} did not finish in {deadline:?}\nstdout: {}\nstderr: {}",
                program.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `key=value` fields of a line.
pub fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a number in {line}"))
}

/// What cannot run here (a compiler, a runtime or binfmt missing): under
/// CI (which installs all of it, `.ci/run`) a failure; elsewhere said in
/// the test command's output — on stderr directly, which the harness does
/// not capture.
pub fn skip(what: &str, why: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(!ci, "{what} cannot run under CI: {why}");
    let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("SKIPPED {what}: {why}\n"));
}
