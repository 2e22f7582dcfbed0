//! Golden tests of the tracer: real C and C++ programs, each built in every
//! instrumentation style the runtime patches, traced through `LD_PRELOAD`
//! and `FNTRACE_DATA` alone, and read back with `fntrace-format`. The truth
//! is a `-finstrument-functions` build (gcc) of the same source whose hooks
//! (`programs/golden/cyg.c`) log every entry and exit per process image and
//! thread: the recorded call sequence of each thread must be the logged
//! one, and the program's output and exit status must not change.
//!
//! Compared: the functions of the program (names in both the truth's
//! symbol tables and the recording's `functions.tsv`, demangled), `E name`
//! per entry and `X name` per exit, plus any `LOST`, `MARK` or `CALL` event
//! (none is expected); `UNWIND` events are left out (a frame left by
//! `longjmp` has no exit in the truth either). The C++ library's template
//! instances are left out too: which of their calls remain depends on the
//! compiler and on the instrumentation itself. Processes are matched by
//! executable name in start order, a forked child's `parent` must name its
//! parent's directory, and the threads of a process are compared as a
//! multiset of sequences.
//!
//! The AArch64 styles (`aarch64-patchable`: `-fpatchable-function-entry=2`;
//! `aarch64-mcount`: `-pg`) build with the cross gcc and g++, against an
//! AArch64 truth, and run under qemu-user through binfmt_misc with the
//! AArch64 runtime (`fntrace_testkit::cross`, Debian's Rust): every program
//! but `fork`, which qemu-user itself cannot run traced
//! ([`NOT_UNDER_QEMU`]).
//!
//! Then the tracer's options, on one style (`gcc -pg -mfentry`): the
//! `function` and `profile` tracers, `FNTRACE_DEPTH`,
//! `FNTRACE_GRAPH_FUNCTION`, `FNTRACE_TIME_FILTER`, the `trace_on` and
//! `trace_off` triggers, a tiny buffer and the flight recorder.
//!
//! Every program is built once per style (in parallel, on first use) under
//! `CARGO_TARGET_TMPDIR`; a style whose compiler is missing (or cannot
//! build with its flags) is skipped with a note; every run has a deadline.
//! A failing style keeps its run directory and names it.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use fntrace_filter::demangle::demangle;
use fntrace_format::{EventKind, Process, Trace};

use common::{include, programs, run, runtime, skip};
use fntrace_testkit::cross::{self, Machine, AARCH64};

/// The longest any one run may take.
const DEADLINE: Duration = Duration::from_secs(90);

// ---------------------------------------------------------------------------
// Programs and styles
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    C,
    Cxx,
}

/// A test program of `programs/golden/`.
struct Program {
    /// The executable's name (the same in every build directory).
    name: &'static str,
    source: &'static str,
    lang: Lang,
    /// Link flags.
    libs: &'static [&'static str],
    /// A library built beside it (`plug.c` → `libplug.so`), instrumented the
    /// same way; `@plugin` in `args` is its path.
    plugin: Option<&'static str>,
    args: &'static [&'static str],
    /// Sibling calls on (`-O2`): the program tests tail calls.
    tail: bool,
}

/// A C program of one source, run without arguments, no tail calls.
const fn c(name: &'static str, source: &'static str) -> Program {
    Program {
        name,
        source,
        lang: Lang::C,
        libs: &[],
        plugin: None,
        args: &[],
        tail: false,
    }
}

/// The same in C++.
const fn cxx(name: &'static str, source: &'static str) -> Program {
    Program {
        lang: Lang::Cxx,
        ..c(name, source)
    }
}

const PTHREAD: &[&str] = &["-pthread"];

const PROGRAMS: &[Program] = &[
    c("recursion", "recursion.c"),
    c("callbacks", "callbacks.c"),
    Program {
        libs: PTHREAD,
        ..c("threads", "threads.c")
    },
    c("longjmp", "longjmp.c"),
    c("signals", "signals.c"),
    c("sigblock", "sigblock.c"),
    Program {
        tail: true,
        ..c("tailcall", "tailcall.c")
    },
    c("fork", "fork.c"),
    Program {
        libs: &["-ldl"],
        plugin: Some("plug.c"),
        args: &["@plugin"],
        ..c("dlopen", "dlopen.c")
    },
    Program {
        libs: PTHREAD,
        ..c("pthread_exit", "pthread_exit.c")
    },
    Program {
        libs: PTHREAD,
        ..c("pthread_cleanup", "pthread_cleanup.c")
    },
    Program {
        libs: PTHREAD,
        ..cxx("pthread_exit_cxx", "pthread_exit_cxx.cc")
    },
    cxx("exceptions", "exceptions.cc"),
];

fn program(name: &str) -> &'static Program {
    PROGRAMS
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no program {name}"))
}

/// An instrumentation style: which compiler, which flags.
struct Style {
    name: &'static str,
    /// C compilers to try, in order.
    cc: &'static [&'static str],
    /// C++ compilers to try, in order.
    cxx: &'static [&'static str],
    /// Flags of executables.
    flags: &'static [&'static str],
    /// Flags of shared libraries (with `-shared -fPIC`).
    lib_flags: &'static [&'static str],
    /// Environment of every run (traced or not).
    env: &'static [(&'static str, &'static str)],
    /// The machine it builds for, if not this one: its programs run under
    /// qemu-user through binfmt_misc, with its runtime and its truth.
    machine: Option<&'static Machine>,
}

/// Programs not run for another machine's styles, and why: what qemu-user
/// cannot run, with or without fntrace.
const NOT_UNDER_QEMU: &[(&str, &str)] = &[(
    "fork",
    "qemu-user 7.2 (Debian 12) aborts a forked child of a threaded program that starts a thread \
     (qemu_plugin_vcpu_init_hook: assertion failed), fntrace or not; the runtime's writer thread \
     makes every traced program threaded",
)];

const GCC: &[&str] = &["gcc"];
const GXX: &[&str] = &["g++"];
const CLANG: &[&str] = &["clang-16", "clang-14"];
const CLANGXX: &[&str] = &["clang++-16", "clang++-14"];

const STYLES: &[Style] = &[
    Style {
        name: "gcc-fentry",
        cc: GCC,
        cxx: GXX,
        flags: &["-pg", "-mfentry", "-mrecord-mcount"],
        lib_flags: &["-pg", "-mfentry", "-mrecord-mcount"],
        env: &[],
        machine: None,
    },
    Style {
        name: "gcc-patchable",
        cc: GCC,
        cxx: GXX,
        flags: &["-fpatchable-function-entry=5"],
        lib_flags: &["-fpatchable-function-entry=5"],
        env: &[],
        machine: None,
    },
    Style {
        name: "gcc-mcount",
        cc: GCC,
        cxx: GXX,
        flags: &["-pg"],
        lib_flags: &["-pg"],
        env: &[],
        machine: None,
    },
    Style {
        name: "clang-patchable",
        cc: CLANG,
        cxx: CLANGXX,
        flags: &["-fpatchable-function-entry=5"],
        lib_flags: &["-fpatchable-function-entry=5"],
        env: &[],
        machine: None,
    },
    Style {
        name: "clang-xray",
        cc: CLANG,
        cxx: CLANGXX,
        flags: &["-fxray-instrument", "-fxray-instruction-threshold=1"],
        lib_flags: &["-fxray-instrument", "-fxray-instruction-threshold=1"],
        env: &[("XRAY_OPTIONS", "patch_premain=false")],
        machine: None,
    },
    Style {
        name: "aarch64-patchable",
        cc: &["aarch64-linux-gnu-gcc"],
        cxx: &["aarch64-linux-gnu-g++"],
        flags: &["-fpatchable-function-entry=2"],
        lib_flags: &["-fpatchable-function-entry=2"],
        env: &[],
        machine: Some(&AARCH64),
    },
    Style {
        name: "aarch64-mcount",
        cc: &["aarch64-linux-gnu-gcc"],
        cxx: &["aarch64-linux-gnu-g++"],
        flags: &["-pg"],
        lib_flags: &["-pg"],
        env: &[],
        machine: Some(&AARCH64),
    },
    Style {
        // Nothing for tracing (#19): the program's functions traced through
        // their own first instructions, and the plugin, a library no
        // compiler prepared, traced whole by the pattern naming it.
        name: "gcc-plain",
        cc: GCC,
        cxx: GXX,
        flags: &[],
        lib_flags: &[],
        env: &[("FNTRACE_FILTER", "*,*:mod:libplug")],
        machine: None,
    },
    Style {
        name: "gcc-fentry-return",
        cc: GCC,
        cxx: GXX,
        // -mnop-mcount is not implemented for PIC code.
        flags: &[
            "-no-pie",
            "-fno-pic",
            "-pg",
            "-mfentry",
            "-mnop-mcount",
            "-mrecord-mcount",
            "-minstrument-return=nop5",
            "-mrecord-return",
        ],
        lib_flags: &[
            "-pg",
            "-mfentry",
            "-mrecord-mcount",
            "-minstrument-return=nop5",
            "-mrecord-return",
        ],
        env: &[],
        machine: None,
    },
];

/// The style the option tests use.
const OPTION_STYLE: &str = "gcc-fentry";

fn opt(tail: bool) -> &'static [&'static str] {
    if tail {
        &["-O2", "-fno-inline", "-foptimize-sibling-calls"]
    } else {
        &["-O1", "-fno-inline", "-fno-optimize-sibling-calls"]
    }
}

/// The first of `candidates` that runs.
fn find_compiler(candidates: &[&'static str]) -> Option<&'static str> {
    static FOUND: Mutex<BTreeMap<&'static str, bool>> = Mutex::new(BTreeMap::new());
    candidates.iter().copied().find(|c| {
        *FOUND.lock().unwrap().entry(c).or_insert_with(|| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    })
}

// ---------------------------------------------------------------------------
// Building, once
// ---------------------------------------------------------------------------

/// A program built one way.
#[derive(Debug, Clone)]
struct Built {
    exe: PathBuf,
    /// The run's arguments (`@plugin` replaced).
    args: Vec<String>,
}

/// Every program built every way.
struct Builds {
    root: PathBuf,
    /// By machine ([`machine_key`]), then program name: the truth.
    truth: BTreeMap<(&'static str, &'static str), Result<Built, String>>,
    /// By style name, then program name; `Err` for a build that failed;
    /// a style without its compiler is missing (with a note in `skipped`).
    styles: BTreeMap<&'static str, BTreeMap<&'static str, Result<Built, String>>>,
    skipped: BTreeMap<&'static str, String>,
}

/// The key of a machine's builds: its Rust target, or `native`.
fn machine_key(machine: Option<&'static Machine>) -> &'static str {
    machine.map_or("native", |m| m.target)
}

/// The C and C++ compilers of a machine's truth.
fn truth_compilers(machine: Option<&'static Machine>) -> (&'static str, &'static str) {
    match machine {
        None => ("gcc", "g++"),
        Some(m) => (m.linker, m.cxx),
    }
}

fn golden_sources() -> PathBuf {
    programs().join("golden")
}

/// Runs a compiler; the error is its message.
fn compile(compiler: &str, args: &[String], cwd: &Path) -> Result<(), String> {
    let out = Command::new(compiler)
        .args(args)
        .current_dir(cwd)
        .output()
        .map_err(|e| format!("{compiler}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{compiler} {}\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Builds an empty program with `flags`.
fn probe(compiler: &str, flags: &[&str], dir: &Path) -> Result<(), String> {
    let src = dir.join("probe.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend([
        src.display().to_string(),
        "-o".into(),
        dir.join("probe").display().to_string(),
    ]);
    compile(compiler, &args, dir).map_err(|e| e.lines().nth(1).unwrap_or("").to_string())
}

/// The scratch root: `CARGO_TARGET_TMPDIR/golden-<pid>`, after removing
/// the roots of runs that are gone.
fn scratch_root() -> PathBuf {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("golden-") {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
    let root = base.join(format!("golden-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    root
}

/// What a compile job builds: a machine's truth, or a style's program.
#[derive(Debug, Clone, Copy)]
enum Key {
    Truth(&'static str),
    Style(&'static str),
}

/// One compile job: the library first when there is one, then the program.
struct Job {
    compiler: &'static str,
    cwd: PathBuf,
    library: Option<Vec<String>>,
    program: Vec<String>,
}

fn builds() -> &'static Builds {
    static BUILDS: OnceLock<Builds> = OnceLock::new();
    BUILDS.get_or_init(build_all)
}

fn build_all() -> Builds {
    let root = scratch_root();
    let src = golden_sources();
    let inc = format!("-I{}", src.display());
    let inc2 = format!("-I{}", include().display());

    // The truth's hooks, per machine a style builds for: a library
    // without instrumentation.
    let mut machines: Vec<Option<&'static Machine>> = vec![None];
    for style in STYLES {
        if !machines.contains(&style.machine) {
            machines.push(style.machine);
        }
    }
    let mut truth_dirs = Vec::new();
    let mut skipped = BTreeMap::new();
    for machine in machines {
        let key = machine_key(machine);
        let truth_dir = root.join(format!("truth-{key}"));
        std::fs::create_dir_all(&truth_dir).unwrap();
        let (cc, _) = truth_compilers(machine);
        let cyg = compile(
            cc,
            &[
                "-O1".into(),
                "-shared".into(),
                "-fPIC".into(),
                src.join("cyg.c").display().to_string(),
                "-o".into(),
                truth_dir.join("libcyg.so").display().to_string(),
                "-ldl".into(),
                "-pthread".into(),
            ],
            &truth_dir,
        );
        match (cyg, machine) {
            (Ok(()), _) => truth_dirs.push((machine, truth_dir)),
            (Err(e), None) => panic!("the truth's hooks do not build: {e}"),
            (Err(e), Some(_)) => {
                for style in STYLES.iter().filter(|s| s.machine == machine) {
                    skipped.insert(
                        style.name,
                        format!("the truth's hooks do not build with {cc}: {e}"),
                    );
                }
            }
        }
    }

    // (what is built; program; job)
    type Pending = (Key, &'static Program, Result<(Job, Built), String>);
    type Done = (Key, &'static str, Result<Built, String>);
    let mut jobs: Vec<Pending> = Vec::new();
    let make = |dir: &Path,
                compiler: &'static str,
                p: &'static Program,
                flags: &[&str],
                lib_flags: &[&str],
                extra_link: &[String]|
     -> (Job, Built) {
        let mut lib_args = None;
        let mut args: Vec<String> = p.args.iter().map(|s| s.to_string()).collect();
        if let Some(lib) = p.plugin {
            let stem = lib.trim_end_matches(".c").trim_end_matches(".cc");
            let out = dir.join(format!("lib{stem}.so"));
            let mut a: Vec<String> = opt(p.tail).iter().map(|s| s.to_string()).collect();
            a.extend(["-shared", "-fPIC"].map(String::from));
            a.extend(lib_flags.iter().map(|s| s.to_string()));
            a.extend([inc.clone(), src.join(lib).display().to_string()]);
            a.extend(extra_link.iter().cloned());
            a.extend(["-o".into(), out.display().to_string()]);
            lib_args = Some(a);
            for arg in &mut args {
                if arg == "@plugin" {
                    *arg = out.display().to_string();
                }
            }
        }
        let exe = dir.join(p.name);
        let mut a: Vec<String> = opt(p.tail).iter().map(|s| s.to_string()).collect();
        a.extend(flags.iter().map(|s| s.to_string()));
        a.extend([
            inc.clone(),
            inc2.clone(),
            src.join(p.source).display().to_string(),
        ]);
        a.extend(p.libs.iter().map(|s| s.to_string()));
        a.extend(extra_link.iter().cloned());
        a.extend(["-o".into(), exe.display().to_string()]);
        (
            Job {
                compiler,
                cwd: dir.to_path_buf(),
                library: lib_args,
                program: a,
            },
            Built { exe, args },
        )
    };

    for (machine, truth_dir) in &truth_dirs {
        let (cc, cxx) = truth_compilers(*machine);
        let cyg_link = vec![
            format!("-L{}", truth_dir.display()),
            "-lcyg".to_string(),
            format!("-Wl,-rpath,{}", truth_dir.display()),
        ];
        for p in PROGRAMS {
            let compiler = if p.lang == Lang::C { cc } else { cxx };
            let flags = ["-finstrument-functions"];
            jobs.push((
                Key::Truth(machine_key(*machine)),
                p,
                Ok(make(truth_dir, compiler, p, &flags, &flags, &cyg_link)),
            ));
        }
    }
    for style in STYLES {
        if skipped.contains_key(style.name) {
            continue;
        }
        // Another machine's style needs its fntrace and runtime, and its
        // programs must run as if native.
        if let Some(m) = style.machine {
            if let Some(why) = cross::runtime_for(m).err().or_else(|| cross::no_binfmt(m)) {
                skipped.insert(style.name, why);
                continue;
            }
        }
        let dir = root.join(style.name);
        std::fs::create_dir_all(&dir).unwrap();
        let (cc, cxx) = (find_compiler(style.cc), find_compiler(style.cxx));
        let Some(c) = cc else {
            skipped.insert(style.name, format!("none of {:?} found", style.cc));
            continue;
        };
        // A compiler without the style's support (an XRay runtime, say)
        // skips the style too.
        if let Err(e) = probe(c, style.flags, &dir) {
            skipped.insert(
                style.name,
                format!("{c} cannot build with {:?}: {e}", style.flags),
            );
            continue;
        }
        eprintln!("golden: style {} builds with {c} / {cxx:?}", style.name);
        for p in PROGRAMS {
            let compiler = if p.lang == Lang::C { cc } else { cxx };
            let job = match compiler {
                Some(c) => Ok(make(&dir, c, p, style.flags, style.lib_flags, &[])),
                None => Err(format!("none of {:?} found", style.cxx)),
            };
            jobs.push((Key::Style(style.name), p, job));
        }
    }

    // Run the jobs on every core.
    let results: Mutex<Vec<Done>> = Mutex::new(Vec::new());
    let queue = Mutex::new(jobs);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let Some((key, p, job)) = queue.lock().unwrap().pop() else {
                    break;
                };
                let result = job.and_then(|(job, built)| {
                    if let Some(lib) = &job.library {
                        compile(job.compiler, lib, &job.cwd)?;
                    }
                    compile(job.compiler, &job.program, &job.cwd)?;
                    Ok(built)
                });
                results.lock().unwrap().push((key, p.name, result));
            });
        }
    });

    let mut builds = Builds {
        root,
        truth: BTreeMap::new(),
        styles: BTreeMap::new(),
        skipped,
    };
    for (key, name, result) in results.into_inner().unwrap() {
        match key {
            Key::Truth(machine) => {
                builds.truth.insert((machine, name), result);
            }
            Key::Style(style) => {
                builds.styles.entry(style).or_default().insert(name, result);
            }
        }
    }
    for (style, why) in &builds.skipped {
        skip(&format!("golden: style {style}"), why);
    }
    builds
}

/// A fresh directory for one run.
fn run_dir(label: &str) -> RunDir {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = builds().root.join("runs").join(format!("{n}-{label}"));
    std::fs::create_dir_all(&dir).unwrap();
    RunDir {
        path: dir,
        keep: false,
    }
}

/// A run's directory: removed when dropped, unless kept (a failure's, to
/// look at) or the thread is panicking.
struct RunDir {
    path: PathBuf,
    keep: bool,
}

impl RunDir {
    fn keep(&mut self) {
        self.keep = true;
    }
}

impl std::ops::Deref for RunDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

// ---------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------

/// File address → demangled name, of the functions of an ELF file (`nm`).
fn symbols(file: &Path) -> &'static BTreeMap<u64, String> {
    static CACHE: Mutex<BTreeMap<PathBuf, &'static BTreeMap<u64, String>>> = Mutex::new(BTreeMap::new());
    if let Some(found) = CACHE.lock().unwrap().get(file) {
        return found;
    }
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("nm: {e}"));
    assert!(
        out.status.success(),
        "nm {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut map = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut w = line.split_whitespace();
        let (Some(addr), Some(kind), Some(name)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        // `$x` and `$d` are AArch64's mapping symbols, not functions.
        if !matches!(kind, "T" | "t" | "W" | "w") || name.starts_with('$') {
            continue;
        }
        if let Ok(addr) = u64::from_str_radix(addr, 16) {
            map.entry(addr).or_insert_with(|| demangle(name));
        }
    }
    let leaked: &'static BTreeMap<u64, String> = Box::leak(Box::new(map));
    CACHE.lock().unwrap().insert(file.to_path_buf(), leaked);
    leaked
}

fn base_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

// ---------------------------------------------------------------------------
// The truth
// ---------------------------------------------------------------------------

/// One process image, as the truth logged it or as the tracer recorded it.
#[derive(Debug, Clone)]
struct Image {
    /// The executable's file name.
    exe: String,
    /// Index of the image of the parent process (a forked child).
    parent: Option<usize>,
    /// 0, then 1, 2, ... for the programs the process `exec`ed.
    image: u32,
    /// The recording's directory name (`p123`), or the truth's `123.0`.
    label: String,
    /// Every thread's sequence, unfiltered: `E name`, `X name` (recorded
    /// only: `LOST n`, `MARK on|off`, `CALL name dur`).
    threads: Vec<Vec<String>>,
}

/// A truth run: its images in start order and every function name of its
/// modules.
struct TruthRun {
    dir: RunDir,
    images: Vec<Image>,
    names: BTreeSet<String>,
    output: Output,
}

fn truth_run(p: &Program, args: &[String], machine: &'static str) -> TruthRun {
    let built = match &builds().truth[&(machine, p.name)] {
        Ok(b) => b.clone(),
        Err(e) => panic!("the truth of {} does not build: {e}", p.name),
    };
    let args: Vec<String> = if args.is_empty() {
        built.args.clone()
    } else {
        args.to_vec()
    };
    let dir = run_dir(&format!("truth-{machine}-{}", p.name));
    let log = dir.join("cyg");
    std::fs::create_dir_all(&log).unwrap();
    let log_s = log.display().to_string();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(&dir, &built.exe, &argv, &[("CYG_DIR", &log_s)], DEADLINE);

    // Images: "<pid>.<n>.image" (exe, ppid, start); threads "<pid>.<n>.t<tid>".
    struct Raw {
        key: String,
        pid: u32,
        ppid: u32,
        n: u32,
        start: u64,
        exe: PathBuf,
    }
    let mut raws = Vec::new();
    let mut thread_files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(&log).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(key) = name.strip_suffix(".image") {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let (pid, n) = key.split_once('.').unwrap();
            raws.push(Raw {
                key: key.to_string(),
                pid: pid.parse().unwrap(),
                n: n.parse().unwrap(),
                ppid: lines[1].parse().unwrap(),
                start: lines[2].parse().unwrap(),
                exe: PathBuf::from(lines[0]),
            });
        } else if let Some((key, _tid)) = name.rsplit_once(".t") {
            thread_files
                .entry(key.to_string())
                .or_default()
                .push(entry.path());
        }
    }
    raws.sort_by_key(|r| (r.start, r.pid, r.n));

    let mut names = BTreeSet::new();
    let mut images = Vec::new();
    for (i, raw) in raws.iter().enumerate() {
        let parent = if raw.n == 0 {
            raws[..i].iter().rposition(|q| q.pid == raw.ppid)
        } else {
            None
        };
        let exe_dir = raw.exe.parent().unwrap_or(Path::new("/")).to_path_buf();
        names.extend(symbols(&raw.exe).values().cloned());
        let mut threads = Vec::new();
        for file in thread_files.get(&raw.key).into_iter().flatten() {
            let text = std::fs::read_to_string(file).unwrap();
            let mut seq = Vec::new();
            for line in text.lines() {
                let mut w = line.split_whitespace();
                let (Some(kind), Some(module), Some(off)) = (w.next(), w.next(), w.next()) else {
                    panic!("bad truth line '{line}' in {}", file.display());
                };
                let off = u64::from_str_radix(off, 16).unwrap();
                let file = if module == "exe" {
                    raw.exe.clone()
                } else {
                    exe_dir.join(module)
                };
                let name = if file.exists() {
                    let syms = symbols(&file);
                    if module != "exe" {
                        names.extend(syms.values().cloned());
                    }
                    syms.get(&off).cloned()
                } else {
                    None
                };
                let name = name.unwrap_or_else(|| format!("{module}+{off:#x}"));
                seq.push(format!("{kind} {name}"));
            }
            threads.push(seq);
        }
        images.push(Image {
            exe: base_name(&raw.exe.display().to_string()),
            parent,
            image: raw.n,
            label: raw.key.clone(),
            threads,
        });
    }
    assert!(!images.is_empty(), "the truth of {} logged nothing", p.name);
    TruthRun {
        dir,
        images,
        names,
        output,
    }
}

// ---------------------------------------------------------------------------
// The recording
// ---------------------------------------------------------------------------

/// A traced run: its output and its data, read.
struct TracedRun {
    dir: RunDir,
    output: Output,
    trace: Trace,
    /// Every function name of its processes' tables.
    names: BTreeSet<String>,
}

fn traced_run(built: &Built, style: &Style, args: &[String], env: &[(&str, &str)]) -> TracedRun {
    let dir = run_dir(&format!(
        "{}-{}",
        style.name,
        base_name(&built.exe.display().to_string())
    ));
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let preload = match style.machine {
        Some(m) => cross::runtime_for(m).expect("built with the style"),
        None => runtime(),
    }
    .display()
    .to_string();
    let data_s = data.display().to_string();
    // The truths are the programs' own functions (the -finstrument-functions
    // logs): their calls into libc are left out (library calls have their
    // own tests, crates/cli/tests/libcall.rs).
    let mut all_env: Vec<(&str, &str)> = vec![
        ("LD_PRELOAD", &preload),
        ("FNTRACE_DATA", &data_s),
        ("FNTRACE_LIBCALL", "none"),
    ];
    all_env.extend_from_slice(style.env);
    all_env.extend_from_slice(env);
    let args: Vec<String> = if args.is_empty() {
        built.args.clone()
    } else {
        args.to_vec()
    };
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(&dir, &built.exe, &argv, &all_env, DEADLINE);
    let trace = fntrace_format::open(&data).unwrap_or_else(|e| {
        panic!(
            "{}: cannot read the trace: {e}\nstderr: {}",
            style.name,
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let names = trace
        .processes
        .iter()
        .flat_map(|p| p.functions.iter().map(|f| demangle(&f.name)))
        .collect();
    TracedRun {
        dir,
        output,
        trace,
        names,
    }
}

fn plain_run(built: &Built, style: &Style, args: &[String]) -> Output {
    let dir = run_dir(&format!("{}-plain", style.name));
    let args: Vec<String> = if args.is_empty() {
        built.args.clone()
    } else {
        args.to_vec()
    };
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&dir, &built.exe, &argv, style.env, DEADLINE)
}

/// Demangled names by fid, of one process.
fn fid_names(p: &Process) -> HashMap<u32, String> {
    p.functions.iter().map(|f| (f.fid, demangle(&f.name))).collect()
}

/// One thread's events as text, with any damage note.
fn thread_text(p: &Process, tid: u32, names: &HashMap<u32, String>) -> (Vec<String>, Option<String>) {
    let name = |fid: u32| names.get(&fid).cloned().unwrap_or_else(|| format!("fid#{fid}"));
    let mut events = p.events(tid);
    let mut out = Vec::new();
    for ev in events.by_ref() {
        out.push(match ev.kind {
            EventKind::Entry => format!("E {}", name(ev.fid)),
            EventKind::EntryCaller(_) => format!("E {}", name(ev.fid)),
            EventKind::Exit => format!("X {}", name(ev.fid)),
            EventKind::Unwind => format!("U {}", name(ev.fid)),
            EventKind::Lost(n) => format!("LOST {n}"),
            EventKind::Call { dur_ns } => format!("CALL {} {dur_ns}", name(ev.fid)),
            EventKind::Mark(on) => format!("MARK {}", if on { "on" } else { "off" }),
        });
    }
    (out, events.damage().map(str::to_string))
}

/// The recorded images in start order; damage notes go to `problems`.
fn recorded_images(trace: &Trace, problems: &mut Vec<String>) -> Vec<Image> {
    problems.extend(trace.damage.iter().map(|d| format!("damage: {d}")));
    let mut images = Vec::new();
    for p in &trace.processes {
        let names = fid_names(p);
        let mut threads = Vec::new();
        for &tid in &p.tids {
            let (seq, damage) = thread_text(p, tid, &names);
            if let Some(d) = damage {
                problems.push(format!("damage: {d}"));
            }
            threads.push(seq);
        }
        let parent = p
            .info
            .parent
            .as_ref()
            .and_then(|name| trace.processes.iter().position(|q| &q.name == name));
        images.push(Image {
            exe: base_name(&p.info.exe),
            parent,
            image: p.image,
            label: p.name.clone(),
            threads,
        });
    }
    images
}

// ---------------------------------------------------------------------------
// Comparing
// ---------------------------------------------------------------------------

/// The comparable part of a sequence: entries and exits of `keep`
/// functions, and anything that is not an entry, exit or unwind (lost
/// events, marks, whole calls).
fn comparable(seq: &[String], keep: &BTreeSet<String>) -> Vec<String> {
    seq.iter()
        .filter(|e| match e.split_once(' ') {
            Some(("E" | "X", name)) => keep.contains(name),
            Some(("U", _)) => false,
            _ => true,
        })
        .cloned()
        .collect()
}

/// The functions compared: the program's own, in both builds. The C++
/// library's templates instantiated in the program are left out: which of
/// their calls remain depends on the compiler and on the instrumentation
/// (an empty function stays a call only with `-finstrument-functions`).
fn compared_names(truth: &BTreeSet<String>, recorded: &BTreeSet<String>) -> BTreeSet<String> {
    truth
        .intersection(recorded)
        .filter(|n| !is_library(n))
        .cloned()
        .collect()
}

/// A C++ library template instance (or a name that does not demangle).
fn is_library(name: &str) -> bool {
    name.contains("std::") || name.contains("__gnu_cxx::") || name.starts_with("_Z")
}

/// The functions the truth logged that the comparison leaves out.
fn dropped_names(images: &[Image], keep: &BTreeSet<String>) -> BTreeSet<String> {
    images
        .iter()
        .flat_map(|i| i.threads.iter().flatten())
        .filter_map(|e| e.split_once(' ').map(|(_, name)| name))
        .filter(|name| !keep.contains(*name) && !is_library(name))
        .map(str::to_string)
        .collect()
}

/// The first difference of two sequences, with context.
fn diff(want: &[String], got: &[String]) -> String {
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let from = at.saturating_sub(6);
    let mut s = format!(
        "  first difference at event {at} (truth has {}, recorded {}):\n",
        want.len(),
        got.len()
    );
    for i in from..(at + 6).min(want.len().max(got.len())) {
        let a = want.get(i).map_or("-", String::as_str);
        let b = got.get(i).map_or("-", String::as_str);
        let mark = if a == b { ' ' } else { '!' };
        let _ = writeln!(s, "  {mark}{i:6}  {a:<40} {b}");
    }
    s
}

/// Compares images (already filtered), giving one message per difference.
fn compare_images(truth: &[Image], recorded: &[Image], keep: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let t_exes: Vec<&str> = truth.iter().map(|i| i.exe.as_str()).collect();
    let r_exes: Vec<&str> = recorded.iter().map(|i| i.exe.as_str()).collect();
    if t_exes != r_exes {
        problems.push(format!("processes: truth {t_exes:?}, recorded {r_exes:?}"));
        return problems;
    }
    for (i, (t, r)) in truth.iter().zip(recorded).enumerate() {
        // A forked child names its parent; the first process has none. (The
        // parent of an exec'd image is not specified.)
        if t.image != r.image || (t.image == 0 && t.parent != r.parent) {
            problems.push(format!(
                "process #{i} ({}): image {} with parent #{:?} in the truth, image {} with parent #{:?} in the recording",
                r.label, t.image, t.parent, r.image, r.parent
            ));
        }
        let prep = |image: &Image| {
            let mut v: Vec<Vec<String>> = image
                .threads
                .iter()
                .map(|s| comparable(s, keep))
                .filter(|s| !s.is_empty())
                .collect();
            v.sort();
            v
        };
        let (ts, rs) = (prep(t), prep(r));
        if ts == rs {
            continue;
        }
        let mut msg = format!(
            "process #{i} ({} / truth {}): threads differ ({} in the truth, {} recorded)\n",
            r.label,
            t.label,
            ts.len(),
            rs.len()
        );
        let only_t: Vec<&Vec<String>> = ts.iter().filter(|s| !rs.contains(s)).collect();
        let only_r: Vec<&Vec<String>> = rs.iter().filter(|s| !ts.contains(s)).collect();
        match (only_t.first(), only_r.first()) {
            (Some(a), Some(b)) => msg.push_str(&diff(a, b)),
            (Some(a), None) => {
                let _ = writeln!(
                    msg,
                    "  a thread missing from the recording: {:?}",
                    &a[..a.len().min(20)]
                );
            }
            (None, Some(b)) => {
                let _ = writeln!(msg, "  an extra recorded thread: {:?}", &b[..b.len().min(20)]);
            }
            (None, None) => msg.push_str("  the same threads, different counts\n"),
        }
        problems.push(msg);
    }
    problems
}

/// Output and status of a traced run against the plain run.
fn check_output(what: &str, plain: &Output, traced: &Output, problems: &mut Vec<String>) {
    if plain.status.code() != traced.status.code() || plain.status.success() != traced.status.success() {
        problems.push(format!(
            "{what}: status {:?} untraced, {:?} traced\nstderr: {}",
            plain.status,
            traced.status,
            String::from_utf8_lossy(&traced.stderr)
        ));
    }
    if plain.stdout != traced.stdout {
        problems.push(format!(
            "{what}: output changed:\nuntraced: {}\ntraced:   {}\nstderr: {}",
            String::from_utf8_lossy(&plain.stdout),
            String::from_utf8_lossy(&traced.stdout),
            String::from_utf8_lossy(&traced.stderr)
        ));
    }
}

/// The golden test of one program: every style against the truth.
fn golden(name: &str) {
    golden_args(name, &[]);
}

/// The golden test of one program run with `args` (empty: its own).
fn golden_args(name: &str, args: &[&str]) {
    let p = program(name);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut truths: BTreeMap<&'static str, TruthRun> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut passed = Vec::new();
    for style in STYLES {
        let Some(built) = builds().styles.get(style.name).and_then(|m| m.get(name)) else {
            let why = builds()
                .skipped
                .get(style.name)
                .map_or("not built", String::as_str);
            skip(&format!("golden {name}: style {}", style.name), why);
            continue;
        };
        let built = match built {
            Ok(b) => b,
            Err(e) if e.starts_with("none of") => {
                skip(&format!("golden {name}: style {}", style.name), e);
                continue;
            }
            Err(e) => {
                failures.push(format!("[{}] does not build: {e}", style.name));
                continue;
            }
        };
        if let Some((_, why)) = NOT_UNDER_QEMU
            .iter()
            .find(|(n, _)| *n == p.name)
            .filter(|_| style.machine.is_some())
        {
            eprintln!("golden {name} [{}]: not run under qemu: {why}", style.name);
            continue;
        }
        let machine = machine_key(style.machine);
        let truth = truths
            .entry(machine)
            .or_insert_with(|| truth_run(p, &args, machine));
        let plain = plain_run(built, style, &args);
        let mut problems = Vec::new();
        if plain.stdout != truth.output.stdout || plain.status.code() != truth.output.status.code() {
            problems.push(format!(
                "the untraced build differs from the truth build: {:?} {} vs {:?} {}",
                plain.status,
                String::from_utf8_lossy(&plain.stdout),
                truth.output.status,
                String::from_utf8_lossy(&truth.output.stdout)
            ));
        }
        let mut traced = traced_run(built, style, &args, &[]);
        check_output("traced run", &plain, &traced.output, &mut problems);
        let recorded = recorded_images(&traced.trace, &mut problems);
        let keep = compared_names(&truth.names, &traced.names);
        let dropped = dropped_names(&truth.images, &keep);
        if !dropped.is_empty() {
            eprintln!(
                "golden {name} [{}]: not compared (not in both builds): {dropped:?}",
                style.name
            );
        }
        problems.extend(compare_images(&truth.images, &recorded, &keep));
        let events: usize = truth
            .images
            .iter()
            .flat_map(|i| &i.threads)
            .map(|t| comparable(t, &keep).len())
            .sum();
        eprintln!(
            "golden {name} [{}]: {events} events of {} functions in {} process(es) compared",
            style.name,
            keep.len(),
            truth.images.len()
        );
        if problems.is_empty() {
            passed.push(style.name);
        } else {
            traced.dir.keep();
            truth.dir.keep();
            failures.push(format!(
                "[{}] {name} (data in {}):\n{}",
                style.name,
                traced.dir.display(),
                problems.join("\n")
            ));
        }
    }
    eprintln!("golden {name}: passed {passed:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn golden_recursion() {
    golden("recursion");
}

#[test]
fn golden_callbacks() {
    golden("callbacks");
}

#[test]
fn golden_threads() {
    golden("threads");
}

#[test]
fn golden_longjmp() {
    golden("longjmp");
}

#[test]
fn golden_signals() {
    golden("signals");
}

#[test]
fn golden_signal_blocked() {
    golden("sigblock");
}

#[test]
fn golden_tailcall() {
    golden("tailcall");
}

#[test]
fn golden_fork_execv() {
    golden_args("fork", &["execv"]);
}

#[test]
fn golden_fork_execl() {
    golden_args("fork", &["execl"]);
}

#[test]
fn golden_dlopen() {
    golden("dlopen");
}

#[test]
fn golden_pthread_exit() {
    golden("pthread_exit");
}

#[test]
fn golden_pthread_cleanup() {
    golden("pthread_cleanup");
}

#[test]
fn golden_cxx_pthread_exit() {
    golden("pthread_exit_cxx");
}

#[test]
fn golden_cxx_exceptions() {
    golden("exceptions");
}

// ---------------------------------------------------------------------------
// The tracer's options (one style)
// ---------------------------------------------------------------------------

/// The option tests' build of `name`.
fn option_build(name: &str) -> (&'static Style, &'static Built) {
    let style = STYLES.iter().find(|s| s.name == OPTION_STYLE).unwrap();
    let built = builds()
        .styles
        .get(OPTION_STYLE)
        .and_then(|m| m.get(name))
        .unwrap_or_else(|| panic!("{OPTION_STYLE} is not built"));
    match built {
        Ok(b) => (style, b),
        Err(e) => panic!("{OPTION_STYLE} {name} does not build: {e}"),
    }
}

/// Runs `name` with `args` untraced and traced with `env`; the output and
/// status must not change.
fn option_run(name: &str, args: &[&str], env: &[(&str, &str)]) -> TracedRun {
    let (style, built) = option_build(name);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let plain = plain_run(built, style, &args);
    let traced = traced_run(built, style, &args, env);
    let mut problems = Vec::new();
    check_output(
        &format!("{name} {args:?} {env:?}"),
        &plain,
        &traced.output,
        &mut problems,
    );
    for d in &traced.trace.damage {
        problems.push(format!("damage: {d}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    traced
}

/// The one thread of the one process of a truth run.
fn single_thread(truth: &TruthRun) -> &[String] {
    assert_eq!(truth.images.len(), 1);
    assert_eq!(truth.images[0].threads.len(), 1);
    &truth.images[0].threads[0]
}

/// The one process of a recording, and its one thread's events as text.
fn single_recorded(traced: &TracedRun) -> (&Process, Vec<String>) {
    assert_eq!(traced.trace.processes.len(), 1, "{:?}", traced.trace.processes);
    let p = &traced.trace.processes[0];
    assert_eq!(p.tids.len(), 1, "{:?}", p.tids);
    let (seq, damage) = thread_text(p, p.tids[0], &fid_names(p));
    assert!(damage.is_none(), "{damage:?}");
    (p, seq)
}

/// Each event of `seq` with its nesting depth (1: outermost).
fn with_depth(seq: &[String]) -> Vec<(usize, &String)> {
    let mut depth = 0usize;
    seq.iter()
        .map(|e| {
            if e.starts_with("E ") {
                depth += 1;
                (depth, e)
            } else if e.starts_with("X ") {
                let d = depth;
                depth = depth.saturating_sub(1);
                (d, e)
            } else {
                (depth, e)
            }
        })
        .collect()
}

/// Calls per function of `seq`.
fn call_counts<'a>(seqs: impl IntoIterator<Item = &'a Vec<String>>) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for seq in seqs {
        for e in seq {
            if let Some(name) = e.strip_prefix("E ") {
                *counts.entry(name.to_string()).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// `FNTRACE_TRACER=function`: entries only, each with its caller's address,
/// which the function table resolves to the calling function.
#[test]
fn function_tracer_entries_name_their_callers() {
    let p = program("recursion");
    let truth = truth_run(p, &["8".to_string()], "native");
    let traced = option_run("recursion", &["8"], &[("FNTRACE_TRACER", "function")]);
    let keep = compared_names(&truth.names, &traced.names);

    // The truth: each entry with the function it was called from.
    let mut want = Vec::new();
    let mut stack: Vec<&str> = Vec::new();
    for e in single_thread(&truth) {
        if let Some(name) = e.strip_prefix("E ") {
            if keep.contains(name) {
                want.push(format!("{name} <- {}", stack.last().copied().unwrap_or("?")));
            }
            stack.push(name);
        } else {
            stack.pop();
        }
    }

    let p = &traced.trace.processes[0];
    assert_eq!(p.info.tracer, "function");
    let names = fid_names(p);
    let mut got = Vec::new();
    for &tid in &p.tids {
        for ev in p.events(tid) {
            let EventKind::EntryCaller(caller) = ev.kind else {
                panic!("a {:?} event in a function trace", ev.kind);
            };
            let name = &names[&ev.fid];
            if !keep.contains(name) {
                continue;
            }
            // Callers outside the program (main's) are "?", as in the truth.
            let from = p
                .functions
                .by_address(caller)
                .map(|(f, _)| demangle(&f.name))
                .filter(|n| keep.contains(n))
                .unwrap_or_else(|| "?".to_string());
            got.push(format!("{name} <- {from}"));
        }
    }
    assert!(want.len() > 50, "{want:?}");
    assert_eq!(got, want, "{}", diff(&want, &got));
}

/// `FNTRACE_TRACER=profile`: `profile.tsv` counts every call of every
/// function, over all threads, in every style (each has its own fast
/// paths: entry, mcount, XRay sleds, return trampoline), through tail
/// calls, longjmp and exceptions; and its times add up: a recursive
/// function's total counts only its outermost calls, and the self times
/// of all functions add up to the time of the outermost one (`main`).
#[test]
fn profile_counts_every_call() {
    let mut failures = Vec::new();
    for (name, args) in [
        ("threads", &[][..]),
        ("recursion", &["12"][..]),
        ("tailcall", &[][..]),
        ("longjmp", &[][..]),
        ("callbacks", &[][..]),
        ("exceptions", &[][..]),
    ] {
        let p = program(name);
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let truth = truth_run(p, &args, "native");
        for style in STYLES {
            let Some(Ok(built)) = builds().styles.get(style.name).and_then(|m| m.get(name)) else {
                eprintln!("profile {name}: style {} skipped", style.name);
                continue;
            };
            let what = format!("[{}] {name}", style.name);
            let plain = plain_run(built, style, &args);
            let mut traced = traced_run(built, style, &args, &[("FNTRACE_TRACER", "profile")]);
            let mut problems = Vec::new();
            check_output(&what, &plain, &traced.output, &mut problems);
            problems.extend(profile_problems(&truth, &traced, name));
            if !problems.is_empty() {
                traced.dir.keep();
                failures.push(format!(
                    "{what} (data in {}):\n{}",
                    traced.dir.display(),
                    problems.join("\n")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// What is wrong with a profile run of program `name` against its truth.
fn profile_problems(truth: &TruthRun, traced: &TracedRun, name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let keep = compared_names(&truth.names, &traced.names);
    let want: BTreeMap<String, u64> = call_counts(truth.images.iter().flat_map(|i| &i.threads))
        .into_iter()
        .filter(|(n, _)| keep.contains(n))
        .collect();
    if want.len() < 3 {
        problems.push(format!("too few functions to compare: {want:?}"));
    }
    if traced.trace.processes.len() != 1 {
        problems.push(format!("{} processes", traced.trace.processes.len()));
        return problems;
    }
    let proc = &traced.trace.processes[0];
    let names = fid_names(proc);
    let Some(rows) = proc.profile.as_ref() else {
        problems.push("no profile.tsv".into());
        return problems;
    };
    let mut got = BTreeMap::new();
    let mut by_name = BTreeMap::new();
    for row in rows {
        let n = &names[&row.fid];
        by_name.insert(n.clone(), row);
        if keep.contains(n) {
            *got.entry(n.clone()).or_insert(0) += row.calls;
        }
        if row.min_ns > row.max_ns || row.self_ns > row.total_ns {
            problems.push(format!("{n}: {row:?}"));
        }
    }
    if got != want {
        problems.push(format!("calls per function:\n  want {want:?}\n  got  {got:?}"));
    }
    if name == "recursion" {
        if got.get("fib") != Some(&fib_calls(12)) {
            problems.push(format!("fib: {:?} calls", got.get("fib")));
        }
        // One thread whose outermost call is main: the self times add up
        // to main's total (to the rounding of each row to ns), and fib's
        // total, its outermost calls, is inside main's.
        let main = by_name["main"].total_ns;
        let selfs: u64 = rows.iter().map(|r| r.self_ns).sum();
        if selfs.abs_diff(main) > rows.len() as u64 {
            problems.push(format!(
                "self times add up to {selfs} ns, main's total is {main} ns"
            ));
        }
        if by_name["fib"].total_ns > main {
            problems.push(format!(
                "fib's total {} ns > main's {main} ns",
                by_name["fib"].total_ns
            ));
        }
    }
    // No events in profile mode.
    for &tid in &proc.tids {
        if proc.events(tid).count() != 0 {
            problems.push("events in profile mode".into());
        }
    }
    problems
}

/// The calls `fib(n)` makes, itself included.
fn fib_calls(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64); // fib(0), fib(1)
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    // calls(n) = 2 * fib(n + 1) - 1
    2 * b - 1
}

/// `FNTRACE_DEPTH=2`: the calls of the two outermost levels, nothing deeper.
#[test]
fn depth_two_records_two_levels() {
    let p = program("recursion");
    let truth = truth_run(p, &["10".to_string()], "native");
    let traced = option_run("recursion", &["10"], &[("FNTRACE_DEPTH", "2")]);
    let keep = compared_names(&truth.names, &traced.names);
    let want: Vec<String> = with_depth(single_thread(&truth))
        .into_iter()
        .filter(|(d, _)| *d <= 2)
        .map(|(_, e)| e.clone())
        .collect();
    let want = comparable(&want, &keep);
    let (_, got) = single_recorded(&traced);
    let deepest = with_depth(&got).iter().map(|(d, _)| *d).max().unwrap_or(0);
    assert!(deepest <= 2, "nesting {deepest}: {got:?}");
    let got = comparable(&got, &keep);
    assert_eq!(want.first().map(String::as_str), Some("E main"));
    assert_eq!(got, want, "{}", diff(&want, &got));
}

/// `FNTRACE_GRAPH_FUNCTION=is_even`: only is_even's calls and what they
/// call.
#[test]
fn graph_function_records_only_beneath_it() {
    let p = program("recursion");
    let truth = truth_run(p, &["6".to_string()], "native");
    let traced = option_run("recursion", &["6"], &[("FNTRACE_GRAPH_FUNCTION", "is_even")]);
    let keep = compared_names(&truth.names, &traced.names);
    let mut want = Vec::new();
    let mut inside = 0usize;
    for e in single_thread(&truth) {
        let entry = e.starts_with("E ");
        if entry && (inside > 0 || e == "E is_even") {
            inside += 1;
        }
        if inside > 0 {
            want.push(e.clone());
        }
        if !entry && inside > 0 {
            inside -= 1;
        }
    }
    let want = comparable(&want, &keep);
    let (_, got) = single_recorded(&traced);
    let got = comparable(&got, &keep);
    assert!(want.len() > 10 && want[0] == "E is_even", "{want:?}");
    assert_eq!(got, want, "{}", diff(&want, &got));
}

/// `FNTRACE_TIME_FILTER=200000`: whole calls only, each at least 200 µs.
#[test]
fn time_filter_keeps_only_long_calls() {
    const FILTER_NS: u64 = 200_000;
    let traced = option_run("recursion", &["22"], &[("FNTRACE_TIME_FILTER", "200000")]);
    let (p, _) = single_recorded(&traced);
    let names = fid_names(p);
    let mut calls = Vec::new();
    for ev in p.events(p.tids[0]) {
        match ev.kind {
            EventKind::Call { dur_ns } => calls.push((names[&ev.fid].clone(), dur_ns)),
            other => panic!("a {other:?} event with a time filter"),
        }
    }
    // The calibration of ticks may differ a little between the runtime's
    // start and the end of the run.
    for (name, dur) in &calls {
        assert!(*dur >= FILTER_NS * 9 / 10, "{name} lasted {dur} ns: {calls:?}");
    }
    assert!(calls.iter().any(|(n, _)| n == "main"), "{calls:?}");
    assert!(calls.iter().any(|(n, _)| n == "fib"), "{calls:?}");
    // fib(22) makes 57313 calls: few last that long.
    assert!(calls.len() < 1000, "{} calls kept", calls.len());
}

/// The first index of `event` in `seq`.
fn position(seq: &[String], event: &str) -> usize {
    seq.iter()
        .position(|e| e == event)
        .unwrap_or_else(|| panic!("no {event} in {seq:?}"))
}

/// `FNTRACE_TRIGGERS='is_even@trace_on'`: nothing before is_even's first
/// call, a mark, then everything.
#[test]
fn trigger_trace_on_starts_at_the_function() {
    let p = program("recursion");
    let truth = truth_run(p, &["6".to_string()], "native");
    let traced = option_run("recursion", &["6"], &[("FNTRACE_TRIGGERS", "is_even@trace_on")]);
    let keep = compared_names(&truth.names, &traced.names);
    let all = comparable(single_thread(&truth), &keep);
    // From is_even's entry on, without the exits of calls entered before.
    let mut want = vec!["MARK on".to_string()];
    let mut depth = 0usize;
    for e in &all[position(&all, "E is_even")..] {
        if e.starts_with("E ") {
            depth += 1;
        } else if depth == 0 {
            continue;
        } else {
            depth -= 1;
        }
        want.push(e.clone());
    }
    let (_, got) = single_recorded(&traced);
    let got = comparable(&got, &keep);
    assert_eq!(got, want, "{}", diff(&want, &got));
}

/// `FNTRACE_TRIGGERS='is_even@trace_off'`: everything before is_even's
/// first call, a mark, then at most the exits of the calls in progress.
#[test]
fn trigger_trace_off_stops_at_the_function() {
    let p = program("recursion");
    let truth = truth_run(p, &["6".to_string()], "native");
    let traced = option_run("recursion", &["6"], &[("FNTRACE_TRIGGERS", "is_even@trace_off")]);
    let keep = compared_names(&truth.names, &traced.names);
    let all = comparable(single_thread(&truth), &keep);
    let before = &all[..position(&all, "E is_even")];
    let (_, got) = single_recorded(&traced);
    let got = comparable(&got, &keep);
    let mark = position(&got, "MARK off");
    assert_eq!(&got[..mark], before, "{}", diff(before, &got[..mark]));
    // After the mark: only exits of calls open at the mark, innermost first.
    let mut open: Vec<String> = Vec::new();
    for e in before {
        match e.split_once(' ') {
            Some(("E", name)) => open.push(name.to_string()),
            _ => {
                open.pop();
            }
        }
    }
    for e in &got[mark + 1..] {
        let want = open.pop().map(|n| format!("X {n}"));
        assert_eq!(Some(e), want.as_ref(), "after trace_off: {:?}", &got[mark..]);
    }
}

/// `FNTRACE_BUFFER_SIZE=64K` and millions of calls: the program runs as
/// before, the thread file reads without damage, and every event is either
/// in it or counted as lost in it (chunk headers, `LOST` events), as many
/// as `process.json` says.
#[test]
fn tiny_buffer_accounts_for_every_event() {
    const N: u64 = 30;
    let traced = option_run("recursion", &["30"], &[("FNTRACE_BUFFER_SIZE", "64K")]);
    // fib(30), is_even(33) (34 calls), sum_to(10) (11 calls), main.
    let calls = fib_calls(N) + (N + 4) + (N % 20 + 1) + 1;
    assert!(calls > 2_000_000);
    assert_eq!(traced.trace.processes.len(), 1);
    let p = &traced.trace.processes[0];
    assert_eq!(p.tids.len(), 1, "{:?}", p.tids);
    let mut events = p.events(p.tids[0]);
    let (mut recorded, mut other) = (0u64, Vec::new());
    for ev in events.by_ref() {
        match ev.kind {
            EventKind::Entry | EventKind::Exit | EventKind::Unwind => recorded += 1,
            EventKind::Lost(_) => {}
            kind => other.push(kind),
        }
    }
    let (lost, lost_chunks) = (events.lost(), events.lost_chunks());
    eprintln!(
        "tiny buffer: {recorded} events recorded, {lost} lost in the thread file, {} in process.json, {lost_chunks} chunks missing",
        p.info.lost
    );
    let mut problems = Vec::new();
    if let Some(d) = events.damage() {
        problems.push(format!("damage: {d}"));
    }
    if !other.is_empty() {
        problems.push(format!("unexpected events: {:?}", &other[..other.len().min(10)]));
    }
    if lost_chunks > 0 {
        problems.push(format!(
            "{lost_chunks} chunks missing: their events are not counted"
        ));
    }
    if recorded + p.info.lost != 2 * calls {
        problems.push(format!(
            "{recorded} events recorded + {} lost (process.json) != {} made",
            p.info.lost,
            2 * calls
        ));
    }
    if lost != p.info.lost {
        problems.push(format!(
            "the thread file accounts for {lost} lost events, process.json for {}",
            p.info.lost
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `FNTRACE_FLIGHT=64K`: only the newest events are kept, and they are the
/// end of the run.
#[test]
fn flight_recorder_keeps_the_last_events() {
    let p = program("recursion");
    let truth = truth_run(p, &["20".to_string()], "native");
    let traced = option_run("recursion", &["20"], &[("FNTRACE_FLIGHT", "64K")]);
    let keep = compared_names(&truth.names, &traced.names);
    let all = comparable(single_thread(&truth), &keep);
    let (_, got) = single_recorded(&traced);
    let got: Vec<String> = comparable(&got, &keep)
        .into_iter()
        .filter(|e| !e.starts_with("LOST"))
        .collect();
    assert!(!got.is_empty(), "nothing kept");
    assert!(
        got.len() <= 64 * 1024 / 8 && got.len() < all.len() / 2,
        "{} of {} events kept",
        got.len(),
        all.len()
    );
    assert_eq!(got.last().map(String::as_str), Some("X main"));
    let tail = &all[all.len() - got.len()..];
    assert_eq!(got, tail, "{}", diff(tail, &got));
}
