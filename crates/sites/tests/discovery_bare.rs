//! Bare sites: plain `-O2` builds of the C test program by gcc and clang,
//! PIE and not, with and without `-fcf-protection` (`endbr64`), whole,
//! stripped, and stripped with a separate debug file, compared with
//! independent readings: the symbols `readelf -s` lists, the instructions
//! `objdump -d` shows, the FDEs `readelf --debug-dump=frames-interp`
//! interprets. And unwind data damaged byte by byte: never a panic, never
//! a function start the intact file does not have.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::bare::{called_frames, check_places, skip_word};
use fntrace_sites::{Binary, Options, SiteKind, Source};
use fntrace_testkit::truth;
use fntrace_testkit::{build_program, run, Work, C_PROGRAM};

fn discover(path: &Path) -> Binary {
    let data = std::fs::read(path).unwrap();
    fntrace_sites::discover_file(path, &data).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn build(work: &Work, name: &str, compiler: &str, flags: &[&str]) -> PathBuf {
    let mut args = vec!["-O2", "-Wl,--build-id"];
    args.extend(flags);
    build_program(work, name, compiler, C_PROGRAM, &args)
}

/// A build with `.symtab`: one bare site per function symbol readelf lists
/// (FUNC or IFUNC, in an executable section, one per address), except
/// those the documented rules skip, each listed with its reason.
fn check_symbols(bin: &Path, cet: bool, names: &[&str]) -> Binary {
    let binary = discover(bin);
    let sections = truth::sections(bin);
    let section_of = |i: Option<usize>| sections.iter().find(|s| Some(s.index) == i);
    let mut expected: BTreeMap<u64, Option<&str>> = BTreeMap::new();
    for sym in truth::symbols(bin, false) {
        let Some(section) = section_of(sym.section).filter(|s| s.exec) else {
            continue;
        };
        if sym.kind == "FUNC" || sym.kind == "IFUNC" {
            expected.insert(sym.address, skip_word(&sym, &section.name));
        }
    }
    let mut got: BTreeMap<u64, Option<&str>> = BTreeMap::new();
    for s in &binary.sites {
        assert_eq!(s.source, Source::Symbol);
        got.insert(binary.function_of(s).unwrap().address, None);
    }
    for u in &binary.unpatchable {
        let f = &binary.functions[u.function];
        let word = expected.get(&f.address).copied().flatten();
        assert!(
            word.is_some_and(|w| u.reason.contains(w)),
            "{} unpatchable: {}; expected {word:?}",
            f.name,
            u.reason
        );
        got.insert(f.address, word);
    }
    assert_eq!(got, expected, "{}", bin.display());
    assert!(binary.rejected.is_empty(), "{:?}", binary.rejected);
    let endbr = check_places(bin, &binary, &sections);
    // gcc and clang give `endbr64` to the functions whose address escapes
    // (every non-static one); without -fcf-protection, to none.
    assert_eq!(endbr > 0, cet, "{} sites after endbr64", endbr);
    for name in names {
        assert!(
            binary
                .sites
                .iter()
                .any(|s| &*binary.function_of(s).unwrap().name == *name),
            "{name}"
        );
    }
    binary
}

/// A stripped copy of `bin` (which has no `.dynsym` function of its own):
/// exactly the FDE functions, named `FILE+0xADDRESS`, at the places and
/// with the bytes of the whole file's sites.
fn check_stripped(bin: &Path, whole: &Binary, name: &str) {
    let stripped = bin.with_file_name(name);
    run(Command::new("strip").arg("-o").arg(&stripped).arg(bin));
    let binary = discover(&stripped);
    assert!(binary.rejected.is_empty(), "{:?}", binary.rejected);
    let frames: BTreeMap<u64, u64> = called_frames(&stripped)
        .into_iter()
        .map(|f| (f.start, f.end - f.start))
        .collect();
    let found: BTreeMap<u64, u64> = binary
        .sites
        .iter()
        .map(|s| {
            let f = binary.function_of(s).unwrap();
            assert_eq!(s.source, Source::EhFrame);
            assert_eq!(&*f.name, format!("{name}+{:#x}", f.address));
            (f.address, f.size)
        })
        .collect();
    assert_eq!(found, frames, "{}", stripped.display());
    // Every function of this program has an FDE, and no split part passes
    // the check: the same sites as with symbols.
    let key = |b: &Binary| -> Vec<(u64, Vec<u8>)> {
        b.sites.iter().map(|s| (s.address, s.bytes.to_vec())).collect()
    };
    assert_eq!(key(&binary), key(whole));
    check_places(&stripped, &binary, &truth::sections(&stripped));
}

/// A stripped copy with a separate debug file (`.gnu_debuglink`): the
/// functions, names and sites of the whole file, from the debug file.
fn check_debug_file(work: &Work, bin: &Path, whole: &Binary) {
    let debug = work.path("prog.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(bin)
        .arg(&debug));
    let stripped = work.path("prog.dbg-stripped");
    run(Command::new("strip").arg("-o").arg(&stripped).arg(bin));
    run(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&stripped));
    let binary = discover(&stripped);
    assert!(binary.sites.iter().all(|s| s.source == Source::DebugFile));
    let key = |b: &Binary| -> Vec<(u64, String, Vec<u8>)> {
        b.sites
            .iter()
            .map(|s| {
                (
                    s.address,
                    b.function_of(s).unwrap().name.to_string(),
                    s.bytes.to_vec(),
                )
            })
            .collect()
    };
    assert_eq!(key(&binary), key(whole));
    let reasons = |b: &Binary| -> Vec<(u64, String)> {
        b.unpatchable
            .iter()
            .map(|u| (b.functions[u.function].address, u.reason.clone()))
            .collect()
    };
    assert_eq!(reasons(&binary), reasons(whole));
}

macro_rules! case {
    ($name:ident, $cc:expr, [$($flag:expr),*], cet: $cet:expr) => {
        #[test]
        fn $name() {
            let work = Work::new(concat!("discovery_bare-", stringify!($name)));
            let bin = build(&work, "prog", $cc, &[$($flag),*]);
            let whole = check_symbols(&bin, $cet, &["main", "fib", "leaf", "tail", "util_sum", "util_varargs"]);
            check_stripped(&bin, &whole, "prog.s");
            check_debug_file(&work, &bin, &whole);
        }
    };
}

case!(gcc_pie, "gcc", ["-fPIE", "-pie", "-fcf-protection=none"], cet: false);
case!(gcc_nopie, "gcc", ["-fno-pie", "-no-pie", "-fcf-protection=none"], cet: false);
case!(gcc_cet_pie, "gcc", ["-fPIE", "-pie", "-fcf-protection"], cet: true);
// An IBT PLT (.plt.sec), whose FDE looks like a function's.
case!(gcc_cet_ibtplt_nopie, "gcc", ["-fno-pie", "-no-pie", "-fcf-protection", "-Wl,-z,ibtplt"], cet: true);
case!(clang_pie, "clang-16", ["-fPIE", "-pie", "-fcf-protection=none"], cet: false);
case!(clang_nopie, "clang-16", ["-fno-pie", "-no-pie", "-fcf-protection=none"], cet: false);
case!(clang_cet_pie, "clang-16", ["-fPIE", "-pie", "-fcf-protection"], cet: true);
case!(clang_cet_nopie, "clang-16", ["-fno-pie", "-no-pie", "-fcf-protection"], cet: true);

#[test]
fn shared_library() {
    let work = Work::new("discovery_bare-shared");
    let lib = build_program(
        &work,
        "libutil.so",
        "gcc",
        &["c/util.c"],
        &["-O2", "-fPIC", "-shared", "-fcf-protection"],
    );
    let whole = check_symbols(&lib, true, &["util_sum"]);
    let names: Vec<&str> = whole
        .sites
        .iter()
        .map(|s| &*whole.function_of(s).unwrap().name)
        .collect();
    assert_eq!(names, ["helper", "util_helper_value", "util_sum", "util_varargs"]);
    // Stripped, the exported functions keep their .dynsym names and the
    // static helper comes from its FDE.
    let stripped = work.path("libutil.s.so");
    run(Command::new("strip").arg("-o").arg(&stripped).arg(&lib));
    let binary = discover(&stripped);
    let got: Vec<(String, Source)> = binary
        .sites
        .iter()
        .map(|s| (binary.function_of(s).unwrap().name.to_string(), s.source))
        .collect();
    let helper = format!(
        "libutil.s.so+{:#x}",
        whole.function_of(&whole.sites[0]).unwrap().address
    );
    assert_eq!(
        got,
        [
            (helper, Source::EhFrame),
            ("util_helper_value".to_string(), Source::DynSym),
            ("util_sum".to_string(), Source::DynSym),
            ("util_varargs".to_string(), Source::DynSym),
        ]
    );
}

/// Files a compiler prepared, objects, and `bare: false`: no bare site.
#[test]
fn only_where_no_compiler_prepared() {
    let work = Work::new("discovery_bare-compiled");
    let fentry = build(&work, "fentry", "gcc", &["-pg", "-mfentry", "-mrecord-mcount"]);
    let binary = discover(&fentry);
    assert!(!binary.sites.is_empty());
    assert!(binary.sites.iter().all(|s| s.kind == SiteKind::Fentry));
    assert!(binary.unpatchable.is_empty());

    let plain = build(&work, "plain", "gcc", &[]);
    let data = std::fs::read(&plain).unwrap();
    let binary = fntrace_sites::discover_file_with(
        &plain,
        &data,
        &Options {
            bare: false,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(binary.sites.is_empty() && binary.unpatchable.is_empty());
    assert!(fntrace_sites::discover(&data).unwrap().sites.is_empty());

    let object = work.path("util.o");
    fntrace_testkit::cc(
        "gcc",
        &[
            "-O2",
            "-c",
            &fntrace_testkit::program("c/util.c"),
            "-o",
            object.to_str().unwrap(),
        ],
    );
    assert!(discover(&object).sites.is_empty());
}

/// `data` with `byte` at `at`.
fn with(data: &[u8], at: usize, byte: u8) -> Vec<u8> {
    let mut bad = data.to_vec();
    bad[at] = byte;
    bad
}

/// Damaged unwind data, in a file with symbols and in a stripped one:
/// discovery never panics, the sites from symbols stay, and a function is
/// taken from `.eh_frame` only at a start the intact file's FDEs have
/// (where `.eh_frame_hdr` and `.eh_frame` disagree, from neither).
#[test]
fn damaged_unwind_data() {
    let work = Work::new("discovery_bare-damaged");
    let bin = build(&work, "prog", "gcc", &["-fcf-protection"]);
    let stripped = work.path("prog.s");
    run(Command::new("strip").arg("-o").arg(&stripped).arg(&bin));
    for path in [&bin, &stripped] {
        let data = std::fs::read(path).unwrap();
        let intact = discover(path);
        let starts: Vec<u64> = truth::frames(path).iter().map(|f| f.start).collect();
        let from_symbols = |b: &Binary| -> Vec<u64> {
            b.sites
                .iter()
                .filter(|s| s.source == Source::Symbol)
                .map(|s| s.address)
                .collect()
        };
        let sections = truth::sections(path);
        let mut rejected = 0;
        for name in [".eh_frame_hdr", ".eh_frame"] {
            let s = sections.iter().find(|s| s.name == name).unwrap();
            let range = s.offset as usize..(s.offset + s.size) as usize;
            let mut damaged: Vec<Vec<u8>> = Vec::new();
            // Zeroed from each quarter on, and each byte set to 0 and 0xff.
            for quarter in 0..4 {
                let mut bad = data.clone();
                bad[range.start + range.len() * quarter / 4..range.end].fill(0);
                damaged.push(bad);
            }
            for at in range.clone() {
                damaged.push(with(&data, at, 0));
                damaged.push(with(&data, at, 0xff));
            }
            for bad in damaged {
                let binary = fntrace_sites::discover_file(path, &bad).expect("the headers are intact");
                assert_eq!(from_symbols(&binary), from_symbols(&intact));
                for s in binary.sites.iter().filter(|s| s.source == Source::EhFrame) {
                    let f = binary.function_of(s).unwrap();
                    assert!(
                        starts.contains(&f.address),
                        "{}: {:#x}",
                        path.display(),
                        f.address
                    );
                }
                rejected += binary
                    .rejected
                    .iter()
                    .filter(|r| r.source == Source::EhFrame)
                    .count();
            }
        }
        assert!(rejected > 0, "damage is reported");
    }
}
