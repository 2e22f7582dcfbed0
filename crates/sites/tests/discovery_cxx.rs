//! Site discovery on a C++ program (namespaces, virtual functions,
//! constructors, templates, inline functions in COMDAT groups, static
//! functions of the same name in two files, exceptions) built by g++ and
//! clang++, compared with independent readings; names are demangled.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::check::{check, Expect, FENTRY_SCAN, MCOUNT_TABLE};
use common::{build_program, Work, CXX_PROGRAM};

/// Demangled names that the source defines and every build must list.
const NAMES: &[&str] = &[
    "main",
    "shapes::Circle::Circle(double)",
    "shapes::Circle::area() const",
    "shapes::Shape::~Shape()",
    "shapes::Square::area() const",
    "shapes::total(shapes::Shape const* const*, int)",
    "shapes::scaled(int)",
    "int shapes::twice<int>(int)",
    "double shapes::twice<double>(double)",
];

fn build(work: &Work, compiler: &str, flags: &[&str]) -> PathBuf {
    let mut args = vec!["-O0"];
    args.extend(flags);
    build_program(work, "shapes", compiler, CXX_PROGRAM, &args)
}

fn check_names(bin: &Path, expect: Expect) {
    let listing = check(bin, expect);
    let names: BTreeSet<&str> = listing.iter().map(|f| f.name.as_str()).collect();
    for name in NAMES {
        assert!(names.contains(name), "{name} not listed; listed: {names:#?}");
    }
    // One copy of each inline function survives COMDAT folding.
    assert_eq!(
        listing.iter().filter(|f| f.name == "shapes::scaled(int)").count(),
        1
    );
    // The two static local_counter()s stay distinct, each with its file.
    let locals: BTreeSet<_> = listing
        .iter()
        .filter(|f| f.name == "local_counter(int)" || f.name == "shapes::local_counter(int)")
        .map(|f| (f.local, f.file.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        locals,
        BTreeSet::from([(true, "main.cpp".into()), (true, "shapes.cpp".into())])
    );
    // Symbols are the mangled names.
    let circle = listing
        .iter()
        .find(|f| f.name == "shapes::Circle::area() const")
        .unwrap();
    assert_eq!(circle.symbol, "_ZNK6shapes6Circle4areaEv");
}

// g++'s own -mrecord-mcount cannot link this program: its one __mcount_loc
// per object refers to COMDAT sections the linker discards. `fntrace
// recordmcount` makes tables that work (tests/recordmcount.rs).
#[test]
fn gxx_fentry_scanned() {
    let work = Work::new("discovery_cxx-gxx_fentry_scanned");
    let bin = build(&work, "g++", &["-pg", "-mfentry"]);
    check_names(&bin, FENTRY_SCAN);
}

#[test]
fn gxx_mcount_recorded_optimized() {
    // At -O2 nothing is left in a discarded COMDAT, and gcc's table links.
    let work = Work::new("discovery_cxx-gxx_mcount_recorded");
    let out = build_program(
        &work,
        "shapes",
        "g++",
        CXX_PROGRAM,
        &["-O2", "-pg", "-mrecord-mcount"],
    );
    let listing = check(&out, MCOUNT_TABLE);
    let names: BTreeSet<&str> = listing.iter().map(|f| f.name.as_str()).collect();
    assert!(
        names.contains("main") && names.contains("shapes::Circle::area() const"),
        "{names:#?}"
    );
}

// gcc 12 loses the table entries of main.cpp (its piece is linked to a
// discarded COMDAT function); discovery recovers them (docs/SITES.md).
#[test]
fn gxx_patchable() {
    let work = Work::new("discovery_cxx-gxx_patchable");
    let bin = build(&work, "g++", &["-fpatchable-function-entry=5,1"]);
    check_names(&bin, Expect::Patchable { m: 1 });
}

#[test]
fn clangxx16_fentry_scanned() {
    let work = Work::new("discovery_cxx-clangxx16_fentry_scanned");
    let bin = build(&work, "clang++-16", &["-pg", "-mfentry"]);
    check_names(&bin, FENTRY_SCAN);
}

#[test]
fn clangxx14_xray() {
    let work = Work::new("discovery_cxx-clangxx14_xray");
    let bin = build(
        &work,
        "clang++-14",
        &["-fxray-instrument", "-fxray-instruction-threshold=1"],
    );
    check_names(
        &bin,
        Expect::Xray {
            llvm_xray: "llvm-xray-14",
        },
    );
}
