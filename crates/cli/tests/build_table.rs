//! The README's build table ("How to build programs for fntrace"), row by
//! row: each flag set builds a program of several objects (C++: templates
//! and inline functions in each of them), which must link, run as it does
//! untraced, have every one of its own functions (by `nm` of its objects)
//! listed once from the compiler's table, and, under `fntrace record`,
//! have each function of the program's structure traced as many times as
//! it is called: by the count a `-finstrument-functions` build of the same
//! sources logs (C, C++), or by the program's structure (Rust).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::functions::{listed_from_table, nm_functions};
use common::objects::{link, objects, recordmcount, TEMPLATES_PROGRAM as CXX_PROGRAM};
use common::procs::runtime;
use common::{cc, fntrace_ok, run, Work, C_PROGRAM};

const PATCHABLE: &str = "-fpatchable-function-entry=5";

/// Added to the flags of every C and C++ build, traced or instrumented:
/// at -O2 the compilers turn one of `fib`'s two recursive calls into a
/// loop, which they cannot do with `-finstrument-functions`; this keeps
/// both builds making the same calls. (It changes what is called, not
/// what can be traced.)
const SAME_CALLS: &str = "-fno-optimize-sibling-calls";

/// The C program's functions (two static `helper`s; `rarely` is never
/// called).
const C_FUNCTIONS: &[&str] = &[
    "main",
    "helper",
    "leaf",
    "fib",
    "tail",
    "custom_section",
    "rarely",
    "util_helper_value",
    "util_sum",
    "util_varargs",
];

/// The C++ program's functions.
const CXX_FUNCTIONS: &[&str] = &[
    "main",
    "_Z9fill_intsi",
    "_Z12fill_doublesi",
    "_Z3mixi",
    "_ZL4halfd",
    "_ZN3BagIiE3addEi",
    "_ZN3BagIdE3addEd",
    "_ZNK3BagIiE3sumEv",
    "_ZNK3BagIdE3sumEv",
    "_Z5twiceIiET_S0_",
    "_Z5twiceIdET_S0_",
];

/// The libstdc++ template instances that `push_back` calls when a vector
/// grows (the template of issue 17): g++ keeps them out of line, clang++
/// inlines them.
const CXX_LIBRARY: &[&str] = &[
    "_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx17__normal_iteratorIPiS1_EEDpOT_",
    "_ZNSt6vectorIdSaIdEE17_M_realloc_insertIJRKdEEEvN9__gnu_cxx17__normal_iteratorIPdS1_EEDpOT_",
];

/// A symbol without the suffix of a clone gcc made of its function
/// (`_Z5twiceIdET_S0_.constprop.0`): the clone's calls are the function's.
fn unclone(symbol: &str) -> String {
    symbol.split('.').next().unwrap_or(symbol).to_string()
}

/// Calls per function by symbol, logged by a `-finstrument-functions`
/// build of `sources` with `compiler` (at `-O2`, as the traced builds):
/// the runtime tests' `cyg.c`, built without instrumentation, counts the
/// entries of each function, and `nm` names their addresses.
fn instrumented(work: &Work, compiler: &str, sources: &[&str]) -> BTreeMap<String, u64> {
    let cyg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/tests/programs/cyg.c");
    let cyg_o = work.path("cyg.o");
    cc(
        "gcc",
        &["-O2", "-c", cyg.to_str().unwrap(), "-o", cyg_o.to_str().unwrap()],
    );
    let objs = objects(
        work,
        "instrumented",
        compiler,
        sources,
        &["-O2", SAME_CALLS, "-fno-pie", "-finstrument-functions"],
    );
    let exe = work.path("instrumented/prog");
    let mut all = objs;
    all.push(cyg_o);
    link(compiler, &all, &exe, &["-no-pie"]);
    let log = work.path("instrumented/calls.log");
    run(Command::new(&exe).env("CYG_OUT", &log));
    let mut names: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (address, name) in nm_functions(&exe) {
        names.entry(address).or_default().push(name);
    }
    let mut calls = BTreeMap::new();
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let address = u64::from_str_radix(fields[0], 16).unwrap();
        let entries: u64 = fields[1].parse().unwrap();
        for name in names
            .get(&address)
            .unwrap_or_else(|| panic!("nothing at {address:#x}"))
        {
            *calls.entry(unclone(name)).or_default() += entries;
        }
    }
    calls
}

/// Records `exe` (which must print what it prints untraced and exit 0)
/// and returns the calls per function from `report --json`, by symbol
/// (clones with their function) or demangled name, summed over functions
/// of one name.
fn traced(work: &Work, exe: &Path, demangle: bool) -> BTreeMap<String, u64> {
    runtime();
    let plain = run(&mut Command::new(exe));
    let data = work.path(&format!("{}.data", exe.file_name().unwrap().to_string_lossy()));
    let (data, exe) = (data.to_str().unwrap(), exe.to_str().unwrap());
    // The truth (a -finstrument-functions log) knows the program's own
    // functions: its library calls are left out.
    let (stdout, stderr) = fntrace_ok(&["record", "--no-libcall", "-o", data, "--", exe]);
    assert_eq!(stdout, plain, "{exe}: the program's output changed");
    assert_eq!(stderr, "", "{exe}: record said something");
    let mut args = vec!["report", "--json", data];
    if !demangle {
        args.push("--no-demangle");
    }
    let rows: serde_json::Value = serde_json::from_str(&fntrace_ok(&args).0).unwrap();
    let mut calls = BTreeMap::new();
    for row in rows.as_array().unwrap() {
        // Two functions of one name (statics of two files) are two rows,
        // told apart by ` [FILE+0xOFFSET]`; the truth sums them by name.
        let name = row["name"].as_str().unwrap();
        let name = match name.rsplit_once(" [") {
            Some((base, place)) if place.ends_with(']') && place.contains("+0x") => base,
            _ => name,
        };
        let name = if demangle { name.to_string() } else { unclone(name) };
        *calls.entry(name).or_default() += row["calls"].as_u64().unwrap();
    }
    calls
}

/// The functions of `expected` are traced as often as the truth says, and
/// all but one at least once. With a `complete` truth (every function's
/// calls), no function is traced more often than it says (one inlined at
/// some of its calls is traced less often).
fn check_counts(
    what: &str,
    traced: &BTreeMap<String, u64>,
    truth: &BTreeMap<String, u64>,
    expected: &[&str],
    complete: bool,
) {
    let count = |map: &BTreeMap<String, u64>, name: &str| map.get(name).copied().unwrap_or(0);
    let mismatches: Vec<String> = expected
        .iter()
        .filter(|name| count(traced, name) != count(truth, name))
        .map(|name| {
            format!(
                "{name}: traced {}, called {}",
                count(traced, name),
                count(truth, name)
            )
        })
        .collect();
    assert!(mismatches.is_empty(), "{what}: {mismatches:#?}");
    let called = expected.iter().filter(|name| count(truth, name) > 0).count();
    assert!(
        called + 1 >= expected.len(),
        "{what}: the truth saw too little: {truth:#?}"
    );
    for (name, &calls) in traced.iter().filter(|_| complete) {
        assert!(
            calls <= count(truth, name),
            "{what}: {name} traced {calls} times, called fewer"
        );
    }
}

/// One row of the table: how the program is built.
#[derive(Clone, Copy)]
struct Row<'a> {
    name: &'a str,
    compiler: &'a str,
    sources: &'a [&'a str],
    flags: &'a [&'a str],
    /// Run `fntrace recordmcount` on the objects before linking.
    recordmcount: bool,
    link_flags: &'a [&'a str],
}

const NO_ROW: Row = Row {
    name: "",
    compiler: "",
    sources: &[],
    flags: &["-O2", PATCHABLE],
    recordmcount: false,
    link_flags: &[],
};

/// Builds the row's program object by object and links it; checks the
/// listing against the functions of `objects` (by default those of the
/// build) and the traced calls of `expected` (by default every function
/// of the program, and those of `CXX_LIBRARY` that are functions in it)
/// against the truth. Returns the symbols listed.
fn check_row(
    row: Row,
    objects_of: Option<fn(&Work) -> Vec<PathBuf>>,
    expected: Option<&[&str]>,
) -> Vec<String> {
    let work = Work::new(&format!("build_table-{}", row.name));
    let mut flags = row.flags.to_vec();
    flags.push(SAME_CALLS);
    let mut objs = objects(&work, "o", row.compiler, row.sources, &flags);
    if row.recordmcount {
        recordmcount(&objs);
    }
    let exe = work.path(row.name);
    link(row.compiler, &objs, &exe, row.link_flags);
    if let Some(objects_of) = objects_of {
        objs = objects_of(&work);
    }
    let listed: Vec<String> = listed_from_table(&exe, &objs, 0, &[])
        .into_iter()
        .map(|f| f.symbol)
        .collect();
    let cxx = row.sources[0].ends_with(".cpp");
    let mut expected = match expected {
        Some(expected) => expected.to_vec(),
        None if cxx => CXX_FUNCTIONS.to_vec(),
        None => C_FUNCTIONS.to_vec(),
    };
    if cxx {
        expected.extend(CXX_LIBRARY.iter().filter(|f| listed.iter().any(|l| l == *f)));
    }
    let truth = instrumented(&work, row.compiler, row.sources);
    check_counts(row.name, &traced(&work, &exe, false), &truth, &expected, true);
    listed
}

#[test]
fn c_gcc() {
    check_row(
        Row {
            name: "c-gcc",
            compiler: "gcc",
            sources: C_PROGRAM,
            ..NO_ROW
        },
        None,
        None,
    );
}

#[test]
fn c_gcc_gc_sections() {
    check_row(
        Row {
            name: "c-gcc-gc",
            compiler: "gcc",
            sources: C_PROGRAM,
            flags: &["-O2", "-ffunction-sections", PATCHABLE],
            recordmcount: true,
            link_flags: &["-Wl,--gc-sections"],
        },
        None,
        None,
    );
}

/// The rows of clang 14 and 16 (C) or clang++ 14 and 16 (C++): the flag
/// alone.
fn clang_rows(compilers: [&str; 2], sources: &[&str]) {
    for clang in compilers {
        let row = Row {
            name: clang,
            compiler: clang,
            sources,
            ..NO_ROW
        };
        check_row(row, None, None);
    }
}

#[test]
fn c_clang() {
    clang_rows(["clang-14", "clang-16"], C_PROGRAM);
}

#[test]
fn cxx_gxx() {
    let row = Row {
        name: "cxx-gxx",
        compiler: "g++",
        sources: CXX_PROGRAM,
        recordmcount: true,
        ..NO_ROW
    };
    let listed = check_row(row, None, None);
    for template in CXX_LIBRARY {
        assert!(listed.iter().any(|l| l == template), "{template} not listed");
    }
}

/// g++ 12 without `recordmcount`: with `-flto` the objects link, as code
/// is generated after the linker has chosen one copy of each COMDAT
/// function. The functions are those of the object LTO generates (kept by
/// `-save-temps`); LTO inlines across objects, so only the `noinline`
/// functions are sure to be there to count.
#[test]
fn cxx_gxx_lto() {
    let row = Row {
        name: "cxx-gxx-lto",
        compiler: "g++",
        sources: CXX_PROGRAM,
        flags: &["-O2", "-flto", PATCHABLE],
        link_flags: &["-O2", "-flto", "-save-temps"],
        ..NO_ROW
    };
    let noinline: Vec<&str> = CXX_FUNCTIONS
        .iter()
        .copied()
        .filter(|f| !f.starts_with("_Z9fill_") && !f.starts_with("_Z12fill_"))
        .collect();
    check_row(row, Some(ltrans_objects), Some(&noinline));
}

/// The files in `dir` whose names end with `suffix` (at least one).
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    assert!(!found.is_empty(), "no {suffix} in {}", dir.display());
    found
}

/// The objects LTO generated and linked, kept by `-save-temps`.
fn ltrans_objects(work: &Work) -> Vec<PathBuf> {
    files_ending(&work.dir, ".ltrans.o")
}

#[test]
fn cxx_clangxx() {
    clang_rows(["clang++-14", "clang++-16"], CXX_PROGRAM);
}

/// `rustc` with `flags`, on the stable toolchain (`RUSTC_BOOTSTRAP=1`),
/// writing into `dir`; `-C save-temps` keeps every object it links there
/// (the crates' code generation units and the allocator shim it makes for
/// the program), without embedded bitcode, which nm would try to read
/// instead, through LLVM 14's plugin.
fn rustc(dir: &Path, source: &str, flags: &[&str]) {
    run(Command::new("rustc")
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["-O", "--edition=2021", "-Z", "patchable-function-entry=5"])
        .args(["-C", "symbol-mangling-version=v0", "-C", "embed-bitcode=no"])
        .args(["-C", "save-temps", "--out-dir"])
        .arg(dir)
        .arg(common::program(source))
        .args(flags));
}

#[test]
fn rust() {
    let work = Work::new("build_table-rust");
    let dir = work.path("rust");
    rustc(&dir, "build/rust/bag.rs", &["--crate-type=rlib"]);
    let rlib = format!("bag={}", dir.join("libbag.rlib").display());
    rustc(&dir, "build/rust/main.rs", &["--extern", &rlib]);
    let exe: PathBuf = dir.join("main");
    let objs = files_ending(&dir, ".rcgu.o");
    assert!(objs.len() >= 3, "{objs:?}");
    // The C `main` rustc writes, which calls std's start-up, has no entry.
    listed_from_table(&exe, &objs, 0, &["main"]);
    // From the program's structure, with n = 10 (no arguments): fill_ints
    // adds n values to its Bag<i64>, main 3 more to another; fill_halves
    // adds n values to a Bag<f64>; mix makes fill_ints' values, and main's
    // third.
    let expected: BTreeMap<String, u64> = [
        ("main::main", 1),
        ("main::fill_halves", 1),
        ("main::half", 10),
        ("bag::fill_ints", 1),
        ("bag::mix", 11),
        ("<bag::Bag<i64>>::new", 2),
        ("<bag::Bag<i64>>::add", 13),
        ("<bag::Bag<i64>>::sum", 2),
        ("<bag::Bag<f64>>::new", 1),
        ("<bag::Bag<f64>>::add", 10),
        ("<bag::Bag<f64>>::sum", 1),
    ]
    .into_iter()
    .map(|(name, calls)| (name.to_string(), calls))
    .collect();
    let names: Vec<&str> = expected.keys().map(String::as_str).collect();
    check_counts("rust", &traced(&work, &exe, true), &expected, &names, false);
}
