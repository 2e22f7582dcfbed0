//! `fntrace attach` and `ctl filter` on functions no compiler prepared
//! (bare sites: issue 19, item 3; docs/design/UNPREPARED.md 4.4-4.9),
//! while threads are inside their first five bytes. The workload
//! (`programs/attach/bare.c`, a plain `gcc -O2` build) has assembly
//! functions whose first five bytes hold instruction boundaries; patched,
//! those bytes are a `jmp rel32` with `int3` at each such boundary, and a
//! thread that continues at one is moved to the detour's copy of the
//! instruction. Two parkers are held at those boundaries (each in turn),
//! in a SIGUSR1 handler over a context rewritten to be there, before every
//! write of the code — each attach, detach and filter switch — and
//! released after it: at least two threads moved per write that puts a
//! jump there, which the runtime's count must show. Three workers and the
//! parkers call every function in a loop and check each result against a
//! C twin, five busy threads on two cores (so also preempted inside those
//! bytes), each under a SIGUSR2 every 50 us whose handler calls them too;
//! a reader sits in a `read` among the displaced instructions, restarted
//! after each signal.
//!
//! 100 attach/detach cycles, then 2,000 switches of the filter between
//! every function and none in one session, then a last session; after
//! every detach the code is byte for byte a fresh process's; no result is
//! ever wrong and the last is an untraced run's; the traces hold every
//! function. (About four minutes on two busy cores.)

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::attach::{assert_code_equal, ctl, patched, Attach, Target};
use common::{cc, fntrace_ok, procs, run, Work};

/// The workload's assembly functions, every one patchable.
const ASM: [&str; 9] = [
    "bare_frame",
    "bare_regs",
    "bare_call",
    "bare_g",
    "bare_short",
    "bare_cet",
    "bare_sys",
    "bare_tiny",
    "bare_read",
];
/// A filter of just those.
const FILTER: &str = "bare_*";
/// Attach/detach cycles.
const CYCLES: u64 = 100;
/// Filter switches (all of `ASM`, then none) in one session.
const TOGGLES: u64 = 2000;
/// Threads each `park` holds.
const PARKERS: u64 = 2;
/// Threads that only call the functions.
const WORKERS: i64 = 3;

/// Builds the workload plainly: no section of compiler sites.
fn build(work: &Work) -> PathBuf {
    let bin = work.path("bare");
    let src = common::program("attach/bare.c");
    cc(
        "gcc",
        &[
            "-O2",
            "-Wall",
            "-Werror",
            &src,
            "-o",
            bin.to_str().unwrap(),
            "-pthread",
        ],
    );
    let sections = run(Command::new("readelf").arg("-SW").arg(&bin));
    let symbols = run(Command::new("readelf").arg("-sW").arg(&bin));
    for made in ["__patchable_function_entries", "__mcount_loc", "xray_instr_map"] {
        assert!(!sections.contains(made), "a plain build with {made}:\n{sections}");
    }
    for called in ["mcount", "__fentry__"] {
        assert!(!symbols.contains(called), "a plain build that calls {called}");
    }
    // fntrace finds them all as bare sites, at e (after endbr64).
    let listing = common::list(&bin);
    assert!(
        common::sites(&listing).iter().all(|(_, s)| s.kind == "bare"),
        "compiler sites in a plain build"
    );
    for name in ASM {
        let f = listing.iter().find(|f| f.name == name);
        let f = f.unwrap_or_else(|| panic!("{name} not listed"));
        let e = f.address + if name == "bare_cet" { 4 } else { 0 };
        assert!(
            matches!(&f.sites[..], [s] if s.kind == "bare" && s.address == e),
            "{name}: {:?}",
            f.sites
        );
    }
    bin
}

/// The workload's report: its `key=N` fields.
fn fields(line: &str) -> BTreeMap<String, i64> {
    line.split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// The workload, with its threads parked at interior boundaries while
/// the code is written.
struct Bare {
    target: Target,
    /// `park`s answered, each holding `PARKERS` threads.
    parks: u64,
}

impl Bare {
    /// Runs `write` with the parkers held, and releases them.
    fn parked<T>(&mut self, write: impl FnOnce(i32) -> T) -> T {
        assert_eq!(self.target.cmd("park"), "parked");
        let out = write(self.target.pid);
        assert_eq!(self.target.cmd("release"), "released");
        self.parks += 1;
        out
    }

    /// `report`: no wrong result, every park resumed and every byte read
    /// (one a release); the report's fields.
    fn check(&mut self, when: &str) -> BTreeMap<String, i64> {
        let line = self.target.cmd("report");
        let f = fields(&line);
        assert_eq!(f["bad"], 0, "{when}: wrong results ({line})");
        assert!(f["rounds"] > 0, "{when}: no round ({line})");
        assert_eq!(f["parks"] as u64, PARKERS * self.parks, "{when}: parks ({line})");
        assert_eq!(f["reads"] as u64, self.parks, "{when}: reads ({line})");
        f
    }
}

/// `report --json`: calls per function.
fn calls(dir: &Path) -> BTreeMap<String, u64> {
    let json = fntrace_ok(&["report", "--json", dir.to_str().unwrap()]).0;
    let rows: serde_json::Value = serde_json::from_str(&json).expect("report --json prints JSON");
    let mut calls = BTreeMap::new();
    for row in rows.as_array().expect("an array") {
        *calls
            .entry(row["name"].as_str().unwrap().to_string())
            .or_default() += row["calls"].as_u64().unwrap();
    }
    calls
}

/// Asserts that `calls` has every function of `want` and nothing but
/// functions of `ASM`.
fn assert_all_traced(calls: &BTreeMap<String, u64>, want: &[&str], what: &str) {
    for &f in want {
        assert!(
            calls.get(f).is_some_and(|&n| n > 0),
            "{what}: {f} not recorded: {calls:?}"
        );
    }
    assert!(
        calls.keys().all(|k| ASM.contains(&k.as_str())),
        "{what}: other functions recorded: {calls:?}"
    );
}

/// Attaches (with `args`) with the parkers held; checks that every
/// function is traced.
fn attach(bare: &mut Bare, dir: &Path, args: &[&str]) -> Attach {
    let mut all = vec!["-P", FILTER];
    all.extend(args);
    let attach = bare.parked(|pid| Attach::start(pid, dir, &all));
    let traced = format!(" {} traced;", ASM.len());
    assert!(attach.first.contains(&traced), "{}", attach.first);
    attach
}

/// Detaches with the parkers held; the code must be a fresh process's.
fn detach(bare: &mut Bare, attach: Attach, fresh: i32, when: &str) {
    let said = bare.parked(|_| attach.detach());
    assert!(said.contains("recording to"), "{said}");
    assert_code_equal(bare.target.pid, fresh, &["/bare"], when);
}

#[test]
fn attach_and_toggle_bare_sites_with_threads_inside() {
    procs::runtime();
    let work = Work::new("attach-bare");
    let bin = build(&work);
    let untraced = Target::spawn(Command::new(&bin).current_dir(&work.dir));
    // The runtime's stderr (FNTRACE_VERBOSE), kept for a failure's reader.
    let log = work.path("runtime.log");
    let target = Target::spawn(
        Command::new(&bin)
            .current_dir(&work.dir)
            .env("FNTRACE_VERBOSE", "1")
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap())),
    );
    let mut bare = Bare { target, parks: 0 };

    // Attach and detach, the code written with threads at the boundaries.
    let mut seen = BTreeMap::new();
    for cycle in 0..CYCLES {
        let dir = work.path(&format!("c{cycle}.data"));
        let session = attach(&mut bare, &dir, &[]);
        std::thread::sleep(Duration::from_millis(10));
        detach(&mut bare, session, untraced.pid, &format!("after detach {cycle}"));
        bare.check(&format!("cycle {cycle}"));
        // Every fourth cycle's trace read (half a second each on a busy
        // machine); each removed once checked (a megabyte or two).
        if cycle % 4 == 3 {
            for (f, n) in calls(&dir) {
                *seen.entry(f).or_insert(0) += n;
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert_all_traced(&seen, &ASM, "the attach cycles");

    // One session; the filter switched between all and none. It records
    // only calls of a millisecond or more (all of them would be gigabytes),
    // and its trace is only checked complete.
    let dir = work.path("toggles.data");
    let session = attach(&mut bare, &dir, &["--time-filter", "1ms"]);
    for toggle in 0..TOGGLES {
        let answer = bare.parked(|pid| match toggle % 2 {
            0 => ctl(pid, &["--force", "filter", "no_such_function"]),
            _ => ctl(pid, &["filter", FILTER]),
        });
        let want = if toggle % 2 == 0 { 0 } else { ASM.len() as u64 };
        assert_eq!(patched(&answer), want, "toggle {toggle}: {answer}");
        if toggle % 200 == 199 {
            bare.check(&format!("toggle {toggle}"));
        }
    }
    detach(&mut bare, session, untraced.pid, "after the toggles");
    let process = std::fs::read_to_string(common::process_dir(&dir).join("process.json")).unwrap();
    let process: serde_json::Value = serde_json::from_str(&process).unwrap();
    assert_eq!((&process["ended"], &process["lost"]), (&true.into(), &0.into()));
    std::fs::remove_dir_all(&dir).unwrap();
    let report = bare.check("after the toggles");
    // Each write that put a jump over the parkers' boundaries (every
    // attach, every other toggle) moved both of them.
    let enables = CYCLES + 1 + TOGGLES / 2;
    assert!(
        report["traps"] >= (PARKERS * enables) as i64,
        "threads moved by the SIGTRAP handler: {} for {enables} writes over {PARKERS} parked threads",
        report["traps"]
    );

    // After all that, a last session records every function: it lasts
    // until a worker made a whole round of calls (of all but bare_read,
    // which the release's byte makes the reader call).
    let dir = work.path("last.data");
    let session = attach(&mut bare, &dir, &[]);
    let from = bare.check("the last session")["worker_rounds"];
    while bare.check("the last session")["worker_rounds"] < from + WORKERS + 1 {
        std::thread::sleep(Duration::from_millis(10));
    }
    detach(&mut bare, session, untraced.pid, "after the last detach");
    assert_all_traced(&calls(&dir), &ASM, "the last session");

    assert_code_equal(
        bare.target.pid,
        untraced.pid,
        &["/bare", "/libc.so.6"],
        "after the last detach",
    );
    let last = bare.check("at the end");
    eprintln!(
        "{CYCLES} attaches, {TOGGLES} filter switches, {} parks; {} threads moved by the SIGTRAP handler, {} SIGUSR2 handled, {} rounds",
        PARKERS * bare.parks,
        last["traps"],
        last["signals"],
        last["rounds"]
    );
    let Bare { target, parks } = bare;
    let (_, bad, last_parks, value) = target.quit();
    let (_, untraced_bad, _, untraced_value) = untraced.quit();
    assert_eq!((bad, untraced_bad), (0, 0));
    assert_eq!(last_parks, PARKERS * parks);
    assert_eq!(value, untraced_value, "the traced process computed other results");
}
