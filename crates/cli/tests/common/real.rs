//! Real programs nobody here wrote (`tests/programs/real/build.sh`: pigz,
//! pbzip2, zstd from Debian's source packages), their workloads, and the
//! comparison of what `fntrace` counts with what callgrind counts
//! (`fntrace_testkit::callgrind`) and with a `-finstrument-functions`
//! build's hooks (`fntrace_testkit::enters`), function by function.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

use fntrace_testkit::{callgrind, enters};
use serde_json::Value;

use super::procs::{have, run, runtime, text};
use super::{fntrace, programs, skip, Work};

/// Where the sources and builds are kept between runs.
const CACHE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/real-programs");
/// How long fetching and building one program may take.
const BUILD_DEADLINE: Duration = Duration::from_secs(900);
/// How long one run of a program may take (under callgrind, ~50x slower).
const RUN_DEADLINE: Duration = Duration::from_secs(300);

/// How a program was built (`build.sh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// No compiler sites: what users have.
    Plain,
    /// `-pg -mfentry -mrecord-mcount`: compiler sites.
    Fentry,
}

impl Style {
    pub fn name(self) -> &'static str {
        match self {
            Style::Plain => "plain",
            Style::Fentry => "fentry",
        }
    }
}

/// The builds of one program.
pub struct Built {
    pub program: &'static str,
    dir: PathBuf,
}

impl Built {
    /// The executable built in `style`.
    pub fn exe(&self, style: Style) -> PathBuf {
        self.dir.join(style.name()).join(self.program)
    }

    /// The `-finstrument-functions` build.
    pub fn instrumented(&self) -> PathBuf {
        self.dir.join("instrument").join(self.program)
    }
}

/// Fetches and builds `program` (`build.sh`); `None` when this machine
/// cannot (said on stderr; under CI that fails the test instead).
pub fn build(test: &str, program: &'static str) -> Option<Built> {
    // One build at a time: they share the source directory and two cores.
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    if !have("valgrind") {
        skip(test, "no valgrind");
        return None;
    }
    let script = programs().join("real/build.sh");
    let out = run(
        Command::new("bash").arg(&script).arg(CACHE).arg(program),
        BUILD_DEADLINE,
    );
    match out.status.code() {
        Some(0) => {}
        Some(3) => {
            skip(test, text(&out.stderr).trim());
            return None;
        }
        _ => panic!("{} {program} failed: {}", script.display(), text(&out.stderr)),
    }
    runtime();
    Some(Built {
        program,
        dir: PathBuf::from(CACHE),
    })
}

/// `size` bytes of text, the same on every run: words of a fixed random
/// vocabulary and numbers, compressible about 2:1 (pbzip2 decompresses a
/// file of 1 MB or more with threads: this one, compressed with `-b1`,
/// is 1.4 MB).
pub fn text_input(size: usize) -> Vec<u8> {
    let mut state: u64 = 19;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let words: Vec<Vec<u8>> = (0..4096)
        .map(|_| {
            let len = 2 + next() % 8;
            (0..len).map(|_| b'a' + (next() % 26) as u8).collect()
        })
        .collect();
    let mut out = Vec::with_capacity(size + 16);
    while out.len() < size {
        let k = next();
        if k % 4 == 0 {
            out.extend_from_slice((next() % 100_000).to_string().as_bytes());
        } else {
            out.extend_from_slice(&words[(next() % 4096) as usize]);
        }
        out.push(if k % 16 == 1 { b'\n' } else { b' ' });
    }
    out.truncate(size);
    out
}

/// Runs `cmd` to its end (stdin from /dev/null); fails the test if it
/// hangs.
pub fn run_program(cmd: &mut Command) -> Output {
    run(cmd, RUN_DEADLINE)
}

/// What `fntrace record` made of one run: the program's output, and the
/// calls `report --json` counts per function address of `exe`.
pub struct Traced {
    pub output: Output,
    pub calls: BTreeMap<u64, u64>,
    /// Rows that name no function of `exe` (a library's, say): ignored.
    pub foreign: Vec<String>,
}

/// `fntrace record [--tracer TRACER] -o DATA -- EXE ARGS`, then `fntrace
/// report --json --no-demangle DATA`.
pub fn traced(work: &Work, data: &str, tracer: &str, exe: &Path, args: &[String]) -> Traced {
    let data = work.path(data);
    let output = run_program(
        fntrace()
            .args(["record", "--tracer", tracer, "-o"])
            .arg(&data)
            .arg("--")
            .arg(exe)
            .args(args),
    );
    assert!(
        data.is_dir(),
        "fntrace record {} wrote no data: {}",
        exe.display(),
        text(&output.stderr)
    );
    let report = run_program(fntrace().args(["report", "--json", "--no-demangle"]).arg(&data));
    let stderr = text(&report.stderr);
    assert!(report.status.success(), "report of {}: {stderr}", data.display());
    assert!(stderr.is_empty(), "report of {} warned: {stderr}", data.display());
    let rows: Vec<Value> = serde_json::from_slice(&report.stdout).expect("report --json");
    let by_name = names(exe);
    let mut calls = BTreeMap::new();
    let mut foreign = Vec::new();
    for row in &rows {
        let name = row["name"].as_str().unwrap();
        let n = row["calls"].as_u64().unwrap();
        match address_of(name, &by_name) {
            Some(address) => *calls.entry(address).or_default() += n,
            None => foreign.push(name.to_string()),
        }
    }
    Traced {
        output,
        calls,
        foreign,
    }
}

/// Function names of `exe` by name: their addresses.
fn names(exe: &Path) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (address, all) in enters::functions(exe) {
        for name in all {
            out.entry(name).or_default().push(address);
        }
    }
    out
}

/// The address of a function as `report` names it: its symbol, or, for
/// a name that several functions share, `NAME [MODULE+0xOFFSET]`, or
/// `MODULE+0xOFFSET` for one without a name.
fn address_of(name: &str, by_name: &BTreeMap<String, Vec<u64>>) -> Option<u64> {
    let hex = |s: &str| u64::from_str_radix(s.strip_prefix("0x")?, 16).ok();
    if let Some((_, place)) = name.rsplit_once(" [") {
        let offset = place.strip_suffix(']')?.rsplit_once('+')?.1;
        return hex(offset);
    }
    match by_name.get(name).map(Vec::as_slice) {
        Some([address]) => Some(*address),
        Some(several) => panic!("report names {name} without an address, and there are {several:x?}"),
        None => name.rsplit_once('+').and_then(|(_, offset)| hex(offset)),
    }
}

/// Runs `exe ARGS` under callgrind; its output, and the calls it counted
/// to the functions of `exe`.
pub fn under_callgrind(work: &Work, file: &str, exe: &Path, args: &[String]) -> (Output, callgrind::Profile) {
    let out = work.path(file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run_program(&mut callgrind::command(exe, &args, &out));
    (output, callgrind::read(&out, exe))
}

/// Runs the `-finstrument-functions` build with its hooks logging under
/// `work/DIR`; its output, and the entries per function name.
pub fn with_hooks(work: &Work, dir: &str, exe: &Path, args: &[String]) -> (Output, BTreeMap<String, u64>) {
    let logs = work.path(dir);
    std::fs::create_dir_all(&logs).unwrap();
    let output = run_program(Command::new(exe).args(args).env("FNTRACE_ENTERS", &logs));
    let functions = enters::functions(exe);
    let mut counts = BTreeMap::new();
    for (address, n) in enters::counts(&enters::read(&logs, exe)) {
        let name = functions
            .get(&address)
            .map_or_else(|| format!("{address:#x}"), |names| names[0].clone());
        *counts.entry(name).or_default() += n;
    }
    (output, counts)
}
