//! `fntrace attach` and `fntrace ctl` on real running processes: a
//! multi-threaded workload (`programs/attach/work.c`, with a shared library)
//! is started untraced; fntrace attaches, records, changes filters live and
//! detaches, many times; the workload checks every result against an
//! uninstrumented twin, and after each detach its code must be byte for
//! byte that of a fresh process of the same program (`/proc/PID/mem`).
//! Built in each instrumentation style: `call __fentry__` sites (which the
//! first attach turns into NOPs live), `-pg` mcount calls, patchable NOPs
//! and XRay sleds.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{fntrace, fntrace_ok, procs, Work};

/// The workload, running.
struct Target {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: i32,
}

impl Target {
    fn start(bin: &Path, work: &Work) -> Target {
        let target = Target::spawn(Command::new(bin).current_dir(&work.dir));
        assert_eq!(target.pid as u32, target.child.id());
        target
    }

    /// Starts `cmd`, which runs the workload (itself, or under fntrace).
    fn spawn(cmd: &mut Command) -> Target {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let pid: i32 = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
        Target {
            child,
            stdin,
            stdout,
            pid,
        }
    }

    /// Sends a command; its answer line.
    fn cmd(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the workload ended at '{command}'");
        line.trim().to_string()
    }

    /// `report`, parsed: (rounds, bad, parks, value).
    fn report(&mut self) -> (u64, u64, u64, u64) {
        parse_report(&self.cmd("report"))
    }

    fn quit(mut self) -> (u64, u64, u64, u64) {
        let last = parse_report(&self.cmd("quit"));
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the workload ended with {status}");
        last
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_report(line: &str) -> (u64, u64, u64, u64) {
    let field = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {k} in '{line}'"))
            .parse()
            .unwrap()
    };
    (field("rounds"), field("bad"), field("parks"), field("value"))
}

/// The executable code of the process's mappings of files whose name ends
/// with `name`, by file offset.
fn code(pid: i32, name: &str) -> Vec<(String, Vec<u8>)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut out = Vec::new();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[1].contains('x') || !f[5].ends_with(name) {
            continue;
        }
        let (lo, hi) = f[0].split_once('-').unwrap();
        let (lo, hi) = (
            u64::from_str_radix(lo, 16).unwrap(),
            u64::from_str_radix(hi, 16).unwrap(),
        );
        let mut bytes = vec![0; (hi - lo) as usize];
        std::os::unix::fs::FileExt::read_exact_at(&mem, &mut bytes, lo).unwrap();
        out.push((f[2].to_string(), bytes));
        let _ = mem.flush();
    }
    assert!(!out.is_empty(), "no code of {name} in process {pid}");
    out
}

/// Asserts that the program's and the library's code in `pid` is that of
/// the fresh process `fresh`.
fn assert_same_code(pid: i32, fresh: i32, when: &str) {
    for name in ["/work", "/libattachlib.so"] {
        let (a, b) = (code(pid, name), code(fresh, name));
        let differ = a
            .iter()
            .zip(&b)
            .map(|((_, x), (_, y))| x.iter().zip(y).filter(|(p, q)| p != q).count());
        assert!(
            a == b,
            "{when}: the code of {name} differs from a fresh process's ({:?} bytes)",
            differ.collect::<Vec<_>>()
        );
    }
}

/// Whether the runtime is mapped in `pid`.
fn has_runtime(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .contains("libfntrace_runtime.so")
}

/// `fntrace attach`, running.
struct Attach {
    child: Child,
    first: String,
    rest: Option<std::thread::JoinHandle<String>>,
}

impl Attach {
    /// Starts `fntrace attach PID -o DIR ARGS` and waits until it records.
    fn start(pid: i32, dir: &Path, args: &[&str]) -> Attach {
        let mut child = fntrace()
            .arg("attach")
            .arg(pid.to_string())
            .arg("-o")
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            rest
        });
        let mut attach = Attach {
            child,
            first,
            rest: Some(rest),
        };
        if !attach.first.starts_with("fntrace: attached to") {
            let out = attach.wait();
            panic!("attach failed: {}{}", attach.first, procs::text(&out.stderr));
        }
        attach
    }

    /// Waits for fntrace to end (at most a minute); its status and the
    /// rest of its stderr.
    fn wait(&mut self) -> Output {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(60) {
                procs::kill_group(self.child.id(), 9);
                panic!("fntrace attach did not end");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let rest = self.rest.take().map(|r| r.join().unwrap()).unwrap_or_default();
        Output {
            status,
            stdout: Vec::new(),
            stderr: rest.into_bytes(),
        }
    }

    /// Ctrl-C: fntrace detaches and ends; it must succeed.
    fn detach(mut self) -> String {
        procs::kill_group(self.child.id(), 2);
        let out = self.wait();
        let rest = procs::text(&out.stderr);
        assert!(
            out.status.success(),
            "fntrace attach failed: {}{rest}",
            self.first
        );
        assert!(rest.contains("fntrace: detached from"), "{rest}");
        format!("{}{rest}", self.first)
    }
}

/// `fntrace ctl PID ARGS...`, which must succeed; its answer.
fn ctl(pid: i32, args: &[&str]) -> String {
    let pid = pid.to_string();
    let mut all = vec!["ctl", pid.as_str()];
    all.extend(args);
    fntrace_ok(&all).0.trim().to_string()
}

/// The `patched=N` of a `ctl` answer.
fn patched(answer: &str) -> u64 {
    answer
        .split_whitespace()
        .find_map(|w| w.strip_prefix("patched="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no patched= in '{answer}'"))
}

/// A build style of the workload.
struct Style {
    name: &'static str,
    compiler: &'static str,
    flags: &'static [&'static str],
}

const FENTRY: Style = Style {
    name: "fentry",
    compiler: "gcc",
    flags: &["-pg", "-mfentry"],
};
const MCOUNT: Style = Style {
    name: "mcount",
    compiler: "gcc",
    flags: &["-pg"],
};
const PATCHABLE: Style = Style {
    name: "patchable",
    compiler: "gcc",
    flags: &["-fpatchable-function-entry=5"],
};
const XRAY: Style = Style {
    name: "xray",
    compiler: "clang-16",
    flags: &["-fxray-instrument", "-fxray-instruction-threshold=1"],
};

/// Builds the workload (its library with gcc `-pg -mfentry`: clang 16's
/// XRay does not instrument shared libraries).
fn build(work: &Work, style: &Style) -> PathBuf {
    build_workload(work, style.compiler, style.flags, &["-pg", "-mfentry"])
}

/// Builds `work` with `compiler` and `flags`, and its library with gcc and
/// `lib_flags`, in the work directory.
fn build_workload(work: &Work, compiler: &str, flags: &[&str], lib_flags: &[&str]) -> PathBuf {
    let lib = work.path("libattachlib.so");
    let lib_src = common::program("attach/lib.c");
    let mut args = vec!["-O2", "-shared", "-fPIC"];
    args.extend(lib_flags);
    args.extend([lib_src.as_str(), "-o", lib.to_str().unwrap()]);
    common::cc("gcc", &args);
    let bin = work.path("work");
    let rpath = format!("-Wl,-rpath,{}", work.dir.display());
    let dir = format!("-L{}", work.dir.display());
    let src = common::program("attach/work.c");
    let mut args = vec!["-O2", "-Wall"];
    args.extend(flags);
    args.extend([
        src.as_str(),
        "-o",
        bin.to_str().unwrap(),
        &dir,
        "-lattachlib",
        &rpath,
        "-lpthread",
    ]);
    common::cc(compiler, &args);
    bin
}

/// The replay of a data directory.
fn replay(dir: &Path) -> String {
    fntrace_ok(&["replay", dir.to_str().unwrap()]).0
}

/// Checks what was recorded against the program's structure: a `mid()`
/// block holds `leaf()` then `lib_twice()` (a part of that where a filter
/// changed inside it), nothing else is called; returns how many whole
/// `mid()` blocks and how many `mid();` lines (mid recorded alone, under a
/// filter or a depth limit) there are.
///
/// `exit_sleds`: with XRay's exit sleds, a call that was inside a function
/// while a live change turned its exit sled off has no exit event: the
/// function's block stays open until the next call finds it gone
/// (`(unwound)`), so blocks are only counted, not checked.
fn check_calls(text: &str, exit_sleds: bool) -> (usize, usize) {
    let calls: Vec<(u32, String)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (tid, rest) = l.split_once(')')?;
            let call = rest.rsplit('|').next()?.trim();
            Some((tid.trim().parse().ok()?, call.to_string()))
        })
        .collect();
    assert!(!calls.is_empty(), "nothing recorded:\n{text}");
    let names = ["mid", "leaf", "lib_twice", "parked"];
    let (mut whole, mut alone) = (0, 0);
    let tids: std::collections::BTreeSet<u32> = calls.iter().map(|c| c.0).collect();
    for tid in tids {
        let lines: Vec<&str> = calls
            .iter()
            .filter(|c| c.0 == tid)
            .map(|c| c.1.as_str())
            .collect();
        for (i, l) in lines.iter().enumerate() {
            let known = names.iter().any(|n| {
                *l == format!("{n}();")
                    || *l == format!("{n}() {{")
                    || *l == format!("}} /* {n} */")
                    || (exit_sleds && *l == format!("}} /* {n} (unwound) */"))
            });
            assert!(known, "thread {tid}: unexpected line '{l}'");
            if *l == "mid();" {
                alone += 1;
            }
            if *l != "mid() {" {
                continue;
            }
            let Some(end) = lines[i + 1..].iter().position(|c| c.starts_with('}')) else {
                continue;
            };
            let inside = &lines[i + 1..i + 1 + end];
            let expected = ["leaf();", "lib_twice();"];
            assert!(
                exit_sleds
                    || inside.iter().all(|c| expected.contains(c))
                        && inside.windows(2).all(|w| w == expected),
                "thread {tid}: mid() called {inside:?}"
            );
            if inside == expected {
                whole += 1;
            }
        }
    }
    (whole, alone)
}

/// Attach, record, change filters, detach — several times — on one
/// running process; its code equals a fresh process's after each detach,
/// and its results are right throughout.
fn attach_cycles(style: &Style) {
    procs::runtime();
    let work = Work::new(&format!("attach-{}", style.name));
    let bin = build(&work, style);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    assert_same_code(target.pid, fresh.pid, "before attaching");
    for cycle in 0..3 {
        let dir = work.path(&format!("cycle{cycle}.data"));
        let attach = Attach::start(target.pid, &dir, &[]);
        assert!(has_runtime(target.pid));
        // The parked thread leaves parked() and enters it again, traced.
        target.cmd("tick");
        std::thread::sleep(Duration::from_millis(150));
        let status = ctl(target.pid, &["status"]);
        assert!(status.contains("tracing=on"), "{status}");
        match cycle {
            0 => {
                let answer = ctl(target.pid, &["filter", "mid"]);
                assert!(patched(&answer) < patched(&status), "{status} -> {answer}");
            }
            1 => {
                ctl(target.pid, &["depth", "1"]);
            }
            _ => {
                assert_eq!(patched(&ctl(target.pid, &["tracing", "off"])), 0);
                assert!(ctl(target.pid, &["tracing", "on"]).contains("tracing=on"));
                ctl(target.pid, &["notrace", "lib_twice"]);
            }
        }
        std::thread::sleep(Duration::from_millis(150));
        let said = attach.detach();
        assert_same_code(target.pid, fresh.pid, &format!("after detach {cycle}"));
        let text = replay(&dir);
        let (whole, alone) = check_calls(&text, style.name == "xray");
        assert!(whole > 0, "cycle {cycle}: no whole mid() call recorded:\n{said}");
        if cycle < 2 {
            assert!(alone > 0, "cycle {cycle}: the live change did not show:\n{said}");
        }
        assert!(
            text.contains("parked() {"),
            "cycle {cycle}: parked() not recorded"
        );
        let info = fntrace_ok(&["info", dir.to_str().unwrap()]).0;
        assert!(info.contains("longest pause"), "{info}");
        let (rounds, bad, _, _) = target.report();
        assert_eq!(bad, 0, "wrong results after cycle {cycle}");
        assert!(rounds > 0);
    }
    let (_, bad, parks, value) = target.quit();
    let (_, fresh_bad, _, fresh_value) = fresh.quit();
    assert_eq!((bad, fresh_bad), (0, 0));
    assert_eq!(
        value, fresh_value,
        "the traced process computed other results than an untraced one"
    );
    assert_eq!(parks, 3);
}

#[test]
fn attach_fentry() {
    attach_cycles(&FENTRY);
}

#[test]
fn attach_mcount() {
    attach_cycles(&MCOUNT);
}

#[test]
fn attach_patchable() {
    attach_cycles(&PATCHABLE);
}

#[test]
fn attach_xray() {
    attach_cycles(&XRAY);
}

/// Detach while threads are inside traced functions whose return address
/// was hijacked (the parked thread for sure: it entered parked() while
/// traced and stays blocked in it across the detach); they return later
/// through the runtime's return trampoline, which outlives the session.
#[test]
fn detach_with_hijacked_returns() {
    procs::runtime();
    let work = Work::new("attach-hijacked");
    let bin = build(&work, &FENTRY);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    for round in 0..3 {
        let dir = work.path(&format!("r{round}.data"));
        let attach = Attach::start(target.pid, &dir, &[]);
        target.cmd("tick");
        std::thread::sleep(Duration::from_millis(100));
        attach.detach();
        let text = replay(&dir);
        let opened = text.matches("parked() {").count();
        let closed = text.matches("} /* parked */").count();
        assert!(
            opened > closed,
            "round {round}: parked() was not left open at the detach:\n{text}"
        );
        assert_same_code(target.pid, fresh.pid, "after the detach");
        // Now the parked thread returns through its hijacked address.
        for _ in 0..3 {
            target.cmd("tick");
        }
        let (_, bad, parks, _) = target.report();
        assert_eq!(bad, 0);
        assert_eq!(parks, 4 * (round + 1));
    }
    assert_eq!(target.quit().1, 0);
    drop(fresh);
}

/// Many attach/detach cycles on one process while it runs: each leaves its
/// code as a fresh process's; the runtime is loaded once.
#[test]
fn repeated_attach_detach() {
    procs::runtime();
    let work = Work::new("attach-repeat");
    let bin = build(&work, &PATCHABLE);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    let mut loaded = Vec::new();
    for cycle in 0..12 {
        let dir = work.path(&format!("c{cycle}.data"));
        let out = common::fntrace_output(&[
            "attach",
            &target.pid.to_string(),
            "-o",
            dir.to_str().unwrap(),
            "--duration",
            "40ms",
        ]);
        assert!(
            out.status.success(),
            "cycle {cycle}: {}",
            procs::text(&out.stderr)
        );
        assert_same_code(target.pid, fresh.pid, &format!("cycle {cycle}"));
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("info.json")).unwrap()).unwrap();
        loaded.push(info["attach"]["loaded"].as_bool().unwrap());
        assert!(
            info["attach"]["restored"].is_u64() && info["attach"]["longest_pause_ns"].as_u64().unwrap() > 0
        );
        assert!(check_calls(&replay(&dir), false).0 > 0);
    }
    assert_eq!(loaded.iter().filter(|&&l| l).count(), 1, "{loaded:?}");
    assert!(loaded[0]);
    assert_eq!(target.report().1, 0);
    assert_eq!(target.quit().1, 0);
    drop(fresh);
}

/// A program that sleeps until killed (no instrumentation needed).
const SLEEPER: &str = "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n";

/// Starts `bin` (in its own process group) and waits until it runs.
fn spawn_sleeper(bin: &Path) -> Child {
    let child = Command::new(bin).process_group(0).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    child
}

/// Whether process `pid` is running (not stopped, not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .next()
            .unwrap()
            .to_string();
        state == "S" || state == "R"
    })
}

/// Every refusal is one line, exit status 1, and leaves the process
/// running, untouched (no runtime mapped).
#[test]
fn attach_errors() {
    procs::runtime();
    let work = Work::new("attach-errors");
    let attach = |pid: u32| {
        common::fntrace_output(&[
            "attach",
            &pid.to_string(),
            "-o",
            work.path("e.data").to_str().unwrap(),
        ])
    };

    // No such process.
    common::assert_fails(&attach(99_999_999), 1, "no process with PID");

    // No patchable sites: the workload built without instrumentation.
    let plain = build_workload(&work, "gcc", &[], &[]);
    let mut target = Target::start(&plain, &work);
    common::assert_fails(&attach(target.pid as u32), 1, "has no patchable sites");
    assert!(!has_runtime(target.pid));
    assert_eq!(target.report().1, 0);

    // Not attached: ctl says so.
    let out = common::fntrace_output(&["ctl", &target.pid.to_string(), "status"]);
    common::assert_fails(&out, 1, "is not attached");
    drop(target);

    // Another architecture: a 32-bit x86 program.
    let sleeper_c = work.path("sleeper.c");
    std::fs::write(&sleeper_c, SLEEPER).unwrap();
    let m32 = work.path("sleeper32");
    common::cc(
        "gcc",
        &[
            "-m32",
            "-pg",
            sleeper_c.to_str().unwrap(),
            "-o",
            m32.to_str().unwrap(),
        ],
    );
    let mut child = spawn_sleeper(&m32);
    common::assert_fails(&attach(child.id()), 1, "32-bit x86");
    assert!(running(child.id()));
    child.kill().unwrap();
    child.wait().unwrap();

    // A static program: no dynamic loader to load the runtime with.
    let stat = work.path("sleeper-static");
    common::cc(
        "gcc",
        &[
            "-static",
            "-pg",
            "-mfentry",
            sleeper_c.to_str().unwrap(),
            "-o",
            stat.to_str().unwrap(),
        ],
    );
    let mut child = spawn_sleeper(&stat);
    common::assert_fails(&attach(child.id()), 1, "statically linked");
    assert!(running(child.id()));

    // A stopped process is left stopped.
    let dynamic = work.path("sleeper");
    common::cc(
        "gcc",
        &[
            "-pg",
            "-mfentry",
            sleeper_c.to_str().unwrap(),
            "-o",
            dynamic.to_str().unwrap(),
        ],
    );
    let mut stopped = spawn_sleeper(&dynamic);
    procs::kill_group(stopped.id(), 19);
    std::thread::sleep(Duration::from_millis(50));
    common::assert_fails(&attach(stopped.id()), 1, "stopped");
    procs::kill_group(stopped.id(), 18);
    std::thread::sleep(Duration::from_millis(50));
    assert!(running(stopped.id()));
    assert!(!has_runtime(stopped.id() as i32));

    // No permission: fntrace as another user (as root: nobody), or a
    // process of root's (as another user).
    let victim = if procs::uid() == 0 { stopped.id() } else { 1 };
    let mut cmd = if procs::uid() == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_fntrace"));
        c
    } else {
        fntrace()
    };
    cmd.args(["attach", &victim.to_string(), "-o", "/tmp/fntrace-nobody.data"]);
    let out = procs::run(&mut cmd, Duration::from_secs(60));
    common::assert_fails(&out, 1, "permission denied");
    assert!(
        procs::text(&out.stderr).contains("ptrace"),
        "{}",
        procs::text(&out.stderr)
    );
    assert!(running(stopped.id()) && !has_runtime(stopped.id() as i32));
    for c in [&mut child, &mut stopped] {
        c.kill().unwrap();
        c.wait().unwrap();
    }

    // Usage errors of ctl.
    let out = common::fntrace_output(&["ctl", "1", "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let out = common::fntrace_output(&["ctl", &std::process::id().to_string(), "depth", "abc"]);
    common::assert_fails(&out, 1, "depth takes a number");
}

/// C++ exceptions thrown through traced frames while attached: the runtime
/// hooks the unwinder's entry points in the GOT (it interposes nothing in a
/// process it was injected into), so every hijacked return address is put
/// back before the unwinder reads the stack. Without that the process dies
/// in `std::terminate`.
#[test]
fn exceptions_while_attached() {
    procs::runtime();
    let work = Work::new("attach-throw");
    let bin = work.path("throw");
    common::cc(
        "g++",
        &[
            "-O2",
            "-pg",
            "-mfentry",
            &common::program("attach/throw.cc"),
            "-o",
            bin.to_str().unwrap(),
            "-lpthread",
        ],
    );
    let mut target = Target::start(&bin, &work);
    for cycle in 0..3 {
        let dir = work.path(&format!("t{cycle}.data"));
        let attach = Attach::start(target.pid, &dir, &[]);
        std::thread::sleep(Duration::from_millis(300));
        attach.detach();
        let text = replay(&dir);
        assert!(text.contains("thrower(int)"), "{text}");
        let (rounds, bad, _, _) = target.report();
        assert_eq!(bad, 0);
        assert!(rounds > 0);
    }
    assert_eq!(target.quit().1, 0);
}

/// The process ends while attached: `fntrace attach` ends with it, and the
/// trace (written by the runtime's exit handler) is whole.
#[test]
fn target_exits_while_attached() {
    procs::runtime();
    let work = Work::new("attach-exit");
    let bin = build(&work, &FENTRY);
    let target = Target::start(&bin, &work);
    let pid = target.pid;
    let dir = work.path("exit.data");
    let mut attach = Attach::start(pid, &dir, &[]);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(target.quit().1, 0);
    let out = attach.wait();
    let said = procs::text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("exited"), "{said}");
    assert!(!control_socket(pid).exists(), "the stale socket was left");
    assert!(check_calls(&replay(&dir), false).0 > 0);
    let info = fntrace_ok(&["info", dir.to_str().unwrap()]).0;
    assert!(info.contains("exited while attached"), "{info}");
}

/// The runtime's socket for `pid` in the tests' control directory.
fn control_socket(pid: i32) -> PathBuf {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir());
    match base {
        Some(base) => base.join("fntrace"),
        None => PathBuf::from(format!("/tmp/fntrace-{}", procs::uid())),
    }
    .join(format!("{pid}.sock"))
}

/// A process traced since its start (`fntrace record`) and one attached
/// already are refused; `fntrace ctl PID detach` ends an attach session.
#[test]
fn attach_refuses_traced_processes() {
    procs::runtime();
    let work = Work::new("attach-traced");
    let bin = build(&work, &PATCHABLE);
    let attach = |pid: i32, dir: &str| {
        common::fntrace_output(&["attach", &pid.to_string(), "-o", work.path(dir).to_str().unwrap()])
    };

    let mut recorded = Target::spawn(
        fntrace()
            .args(["record", "-o", work.path("rec.data").to_str().unwrap()])
            .arg(&bin)
            .current_dir(&work.dir),
    );
    common::assert_fails(&attach(recorded.pid, "x.data"), 1, "is already traced");
    assert!(!work.path("x.data").exists(), "a data directory was left");
    assert_eq!(recorded.report().1, 0);

    let target = Target::start(&bin, &work);
    let mut first = Attach::start(target.pid, &work.path("a.data"), &[]);
    common::assert_fails(&attach(target.pid, "b.data"), 1, "is already attached");
    assert!(ctl(target.pid, &["detach"]).contains("restored="));
    let out = first.wait();
    assert!(out.status.success(), "{}", procs::text(&out.stderr));
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.path("a.data/info.json")).unwrap()).unwrap();
    assert_eq!(info["attach"]["ended_by"], "detached");
    let fresh = Target::start(&bin, &work);
    assert_same_code(target.pid, fresh.pid, "after ctl detach");
}

/// Each attach session has its own counts: `--tracer profile` twice on one
/// process; parked() returns exactly once per `tick`, so its calls are
/// known in each session.
#[test]
fn profile_per_session() {
    procs::runtime();
    let work = Work::new("attach-profile");
    let bin = build(&work, &FENTRY);
    let mut target = Target::start(&bin, &work);
    let calls_of_parked = |dir: &Path| -> u64 {
        let report = fntrace_ok(&["report", dir.to_str().unwrap()]).0;
        let line = report
            .lines()
            .find(|l| l.trim_end().ends_with(" parked"))
            .unwrap_or_else(|| panic!("{report}"));
        line.split_whitespace().nth(4).unwrap().parse().unwrap()
    };
    // Session 1: parked() was entered before the attach (not traced); the
    // first tick ends that call and enters a traced one; each later tick
    // ends one traced call. Session 2 begins with that call open.
    for (session, ticks, expected) in [(1, 3, 2), (2, 2, 2)] {
        let dir = work.path(&format!("p{session}.data"));
        let attach = Attach::start(target.pid, &dir, &["--tracer", "profile"]);
        for _ in 0..ticks {
            target.cmd("tick");
        }
        attach.detach();
        assert_eq!(calls_of_parked(&dir), expected, "session {session}");
    }
    assert_eq!(target.quit().1, 0);
}
