//! Processes with deadlines, and the runtime the end-to-end tests record
//! with (`e2e.rs`, `viewers.rs`).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long building the runtime may take.
pub const BUILD_DEADLINE: Duration = Duration::from_secs(600);

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

/// Runs `cmd` (stdin from /dev/null, in its own process group) and returns
/// its output; kills the whole group and fails the test if it runs longer
/// than `limit`.
pub fn run(cmd: &mut Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stdout.read_to_end(&mut buf).map(|_| buf)
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stderr.read_to_end(&mut buf).map(|_| buf)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            kill_group(child.id(), 9);
            let _ = child.wait();
            panic!("{cmd:?} did not finish in {limit:?} (killed)");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Output {
        status,
        stdout: out.join().unwrap().unwrap(),
        stderr: err.join().unwrap().unwrap(),
    }
}

/// Sends `signal` to the process group of `pid`, a child started with
/// `process_group(0)` (its pid is the group id).
pub fn kill_group(pid: u32, signal: i32) {
    // SAFETY: kill(2) on the process group of a child the test started.
    unsafe { kill(-(pid as i32), signal) };
}

/// Sends `signal` to process `pid` alone.
pub fn kill_one(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a process the test started.
    unsafe { kill(pid as i32, signal) };
}

/// Waits up to `limit` for `child` to end; kills it and fails the test if
/// it does not.
pub fn wait_for(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("process {} did not end in {limit:?} (killed)", child.id());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(tool).is_file()))
}

/// Makes sure `fntrace record` finds a runtime that is up to date: builds
/// `fntrace-runtime` with the profile of the `fntrace` under test (it lands
/// next to it), unless `FNTRACE_RUNTIME` is set.
pub fn runtime() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        if std::env::var_os("FNTRACE_RUNTIME").is_some_and(|p| !p.is_empty()) {
            return;
        }
        let exe = Path::new(env!("CARGO_BIN_EXE_fntrace"));
        let profile_dir = exe.parent().expect("the directory of fntrace");
        let lib = profile_dir.join("libfntrace_runtime.so");
        let cargo = match std::env::var_os("CARGO") {
            Some(cargo) => cargo,
            None if have("cargo") => "cargo".into(),
            None => {
                assert!(
                    lib.is_file(),
                    "no cargo to build the runtime, and {} is not built; set FNTRACE_RUNTIME",
                    lib.display()
                );
                eprintln!("note: no cargo: using {} as it is", lib.display());
                return;
            }
        };
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", "fntrace-runtime"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => {}
            Some("release") => {
                cmd.arg("--release");
            }
            Some(other) => {
                cmd.args(["--profile", other]);
            }
            None => {}
        }
        let out = run(&mut cmd, BUILD_DEADLINE);
        assert!(out.status.success(), "{cmd:?} failed: {}", text(&out.stderr));
        assert!(
            lib.is_file(),
            "{} is not there after {cmd:?}; set FNTRACE_RUNTIME",
            lib.display()
        );
    });
}

/// The tests' effective user id (the owner of `/proc/self`).
pub fn uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid()
}
