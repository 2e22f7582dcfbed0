//! The attach tests' harness (`attach.rs`, `attach_errors.rs`): the
//! workload of `programs/attach/` built in each instrumentation style,
//! running with commands on its stdin; `fntrace attach` running; the code
//! of a process read through `/proc/PID/mem`; the recorded calls checked
//! against the workload's structure.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{fntrace, fntrace_ok, procs, Work};

/// The workload, running.
pub struct Target {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: BufReader<ChildStdout>,
    pub pid: i32,
}

impl Target {
    pub fn start(bin: &Path, work: &Work) -> Target {
        let target = Target::spawn(Command::new(bin).current_dir(&work.dir));
        assert_eq!(target.pid as u32, target.child.id());
        target
    }

    /// Starts `cmd`, which runs the workload (itself, or under fntrace).
    pub fn spawn(cmd: &mut Command) -> Target {
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
    pub fn cmd(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the workload ended at '{command}'");
        line.trim().to_string()
    }

    /// `report`, parsed: (rounds, bad, parks, value).
    pub fn report(&mut self) -> (u64, u64, u64, u64) {
        parse_report(&self.cmd("report"))
    }

    pub fn quit(mut self) -> (u64, u64, u64, u64) {
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

pub fn parse_report(line: &str) -> (u64, u64, u64, u64) {
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
pub fn code(pid: i32, name: &str) -> Vec<(String, Vec<u8>)> {
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
pub fn assert_same_code(pid: i32, fresh: i32, when: &str) {
    assert_code_equal(pid, fresh, &["/work", "/libattachlib.so"], when);
}

/// Asserts that the code of the files whose names end with `names` in
/// `pid` is that of the fresh process `fresh`.
pub fn assert_code_equal(pid: i32, fresh: i32, names: &[&str], when: &str) {
    for &name in names {
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
pub fn has_runtime(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .contains("libfntrace_runtime.so")
}

/// `fntrace attach`, running.
pub struct Attach {
    pub child: Child,
    pub first: String,
    pub rest: Option<std::thread::JoinHandle<String>>,
}

impl Attach {
    /// Starts `fntrace attach PID -o DIR ARGS` and waits until it records.
    /// The buffers are 64 MiB a thread: the workloads' checks want every
    /// event, on a machine busy enough to keep the writer from running for
    /// a second. The workloads' checks know their own functions: library
    /// calls are left out (`--no-libcall`; [`Attach::with_libcalls`]
    /// keeps them).
    pub fn start(pid: i32, dir: &Path, args: &[&str]) -> Attach {
        let mut all = vec!["--no-libcall"];
        all.extend(args);
        Attach::with_libcalls(pid, dir, &all)
    }

    /// [`Attach::start`] with the program's library calls traced (the
    /// default of `fntrace attach`).
    pub fn with_libcalls(pid: i32, dir: &Path, args: &[&str]) -> Attach {
        let mut child = fntrace()
            .arg("attach")
            .arg(pid.to_string())
            .arg("-o")
            .arg(dir)
            .args(["--buffer-size", "64M"])
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
            panic!(
                "attach failed: {}{}(process {pid}: {})",
                attach.first,
                procs::text(&out.stderr),
                process_state(pid)
            );
        }
        attach
    }

    /// Waits for fntrace to end (at most a minute); its status and the
    /// rest of its stderr.
    pub fn wait(&mut self) -> Output {
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
    pub fn detach(mut self) -> String {
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
pub fn ctl(pid: i32, args: &[&str]) -> String {
    let id = pid.to_string();
    let mut all = vec!["ctl", id.as_str()];
    all.extend(args);
    let out = super::fntrace_output(&all);
    assert!(
        out.status.success(),
        "{all:?}: {}(process {pid}: {})",
        procs::text(&out.stderr),
        process_state(pid)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The state letter of process `pid` (`/proc/PID/stat`: `R`, `S`, `T`,
/// `Z`...), or `None` if it is gone.
pub fn state_letter(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().next()?.chars().next()
}

/// What became of process `pid`, for a failure's message: its state
/// letter (`Z`: it died, not yet reaped), or that it is gone.
pub fn process_state(pid: i32) -> String {
    match state_letter(pid) {
        Some('Z') => "died (a zombie)".to_string(),
        Some(state) => format!("state {state}"),
        None => "gone".to_string(),
    }
}

/// The `patched=N` of a `ctl` answer.
pub fn patched(answer: &str) -> u64 {
    answer
        .split_whitespace()
        .find_map(|w| w.strip_prefix("patched="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no patched= in '{answer}'"))
}

/// A build style of the workload.
pub struct Style {
    pub name: &'static str,
    pub compiler: &'static str,
    pub flags: &'static [&'static str],
}

pub const FENTRY: Style = Style {
    name: "fentry",
    compiler: "gcc",
    flags: &["-pg", "-mfentry"],
};
pub const MCOUNT: Style = Style {
    name: "mcount",
    compiler: "gcc",
    flags: &["-pg"],
};
pub const PATCHABLE: Style = Style {
    name: "patchable",
    compiler: "gcc",
    flags: &["-fpatchable-function-entry=5"],
};
pub const XRAY: Style = Style {
    name: "xray",
    compiler: "clang-16",
    flags: &["-fxray-instrument", "-fxray-instruction-threshold=1"],
};

/// Builds the workload (its library with gcc `-pg -mfentry`: clang 16's
/// XRay does not instrument shared libraries).
pub fn build(work: &Work, style: &Style) -> PathBuf {
    build_workload(work, style.compiler, style.flags, &["-pg", "-mfentry"])
}

/// Builds `work` with `compiler` and `flags`, and its library with gcc and
/// `lib_flags`, in the work directory.
pub fn build_workload(work: &Work, compiler: &str, flags: &[&str], lib_flags: &[&str]) -> PathBuf {
    let lib = work.path("libattachlib.so");
    let lib_src = super::program("attach/lib.c");
    let mut args = vec!["-O2", "-shared", "-fPIC"];
    args.extend(lib_flags);
    args.extend([lib_src.as_str(), "-o", lib.to_str().unwrap()]);
    super::cc("gcc", &args);
    let bin = work.path("work");
    let rpath = format!("-Wl,-rpath,{}", work.dir.display());
    let dir = format!("-L{}", work.dir.display());
    let src = super::program("attach/work.c");
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
    super::cc(compiler, &args);
    bin
}

/// The replay of a data directory.
pub fn replay(dir: &Path) -> String {
    fntrace_ok(&["replay", dir.to_str().unwrap()]).0
}

/// Checks what was recorded against the program's structure: a `mid()`
/// block holds `leaf()` then `lib_twice()` (a part of that where a filter
/// changed inside it), nothing else is called; returns how many whole
/// `mid()` blocks and how many `mid();` lines (mid recorded alone, under a
/// filter or a depth limit) there are.
///
/// A loss (`--- N events lost ---`: a detach's final write can catch a
/// thread between reserving an event's word and writing it, on a busy
/// machine) is accepted only when the replay's header says the trace is
/// incomplete; a block that spans it, or that closes `(exit lost)`, is
/// counted for nothing and not checked.
///
/// `exit_sleds`: with XRay's exit sleds, a call that was inside a function
/// while a live change turned its exit sled off has no exit event: the
/// function's block stays open until the next call finds it gone
/// (`(unwound)`), so blocks are only counted, not checked.
pub fn check_calls(text: &str, exit_sleds: bool) -> (usize, usize) {
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
    let said = text
        .lines()
        .next()
        .is_some_and(|l| l.starts_with("# the trace is incomplete: "));
    let is_loss = |l: &str| l.starts_with("--- ") && l.ends_with(" lost ---");
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
            if is_loss(l) {
                assert!(said, "thread {tid}: '{l}' without the header saying it:\n{text}");
                continue;
            }
            let known = names.iter().any(|n| {
                *l == format!("{n}();")
                    || *l == format!("{n}() {{")
                    || *l == format!("}} /* {n} */")
                    || (exit_sleds && *l == format!("}} /* {n} (unwound) */"))
                    || (said && *l == format!("}} /* {n} (exit lost) */"))
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
            if inside.iter().any(|c| is_loss(c)) || lines[i + 1 + end].ends_with("(exit lost) */") {
                continue;
            }
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

/// The runtime's socket for `pid` in the tests' control directory.
pub fn control_socket(pid: i32) -> PathBuf {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir());
    match base {
        Some(base) => base.join("fntrace"),
        None => PathBuf::from(format!("/tmp/fntrace-{}", procs::uid())),
    }
    .join(format!("{pid}.sock"))
}
