//! Site discovery on C programs built by gcc 12, clang 14 and clang 16 in
//! every instrumentation style, PIE and non-PIE, compared with independent
//! readings: the calls `objdump -d` shows, the tables `readelf -x` dumps,
//! the sleds `llvm-xray extract` lists.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::check::{Expect, FENTRY_SCAN, FENTRY_TABLE, MCOUNT_SCAN, MCOUNT_TABLE};
use common::{build_program, program, Work, C_PROGRAM};

/// Functions of the test program that every build must list.
const FUNCTIONS: &[&str] = &[
    "leaf",
    "fib",
    "tail",
    "custom_section",
    "rarely",
    "main",
    "util_sum",
    "util_helper_value",
    "util_varargs",
];

fn build(work: &Work, compiler: &str, pie: bool, flags: &[&str], extra: &[&str]) -> PathBuf {
    let mut args = vec!["-O2"];
    args.extend(if pie {
        ["-fPIE", "-pie"]
    } else {
        ["-fno-pie", "-no-pie"]
    });
    args.extend(flags);
    args.extend(extra);
    build_program(work, "prog", compiler, C_PROGRAM, &args)
}

fn check(bin: &Path, expect: Expect) {
    let listing = common::check::check(bin, expect);
    if let Expect::Xray { .. } = expect {
        let tails = listing
            .iter()
            .flat_map(|f| &f.sites)
            .filter(|s| s.kind == "xray-tail")
            .count();
        assert!(tails > 0, "tail() ends in a tail call: an XRay tail sled");
    }
    let names: BTreeSet<&str> = listing.iter().map(|f| f.name.as_str()).collect();
    for name in FUNCTIONS {
        assert!(names.contains(name), "{name} not listed; listed: {names:?}");
    }
    // The two static `helper`s of main.c and util.c stay distinct.
    let helpers: Vec<_> = listing.iter().filter(|f| f.name == "helper").collect();
    assert_eq!(helpers.len(), 2, "two static helpers");
    let files: BTreeSet<_> = helpers.iter().map(|f| f.file.as_deref().unwrap_or("?")).collect();
    assert_eq!(files, BTreeSet::from(["main.c", "util.c"]));
}

macro_rules! case {
    ($name:ident, $cc:expr, pie: $pie:expr, [$($flag:expr),*], $expect:expr) => {
        case!($name, $cc, pie: $pie, [$($flag),*], extra: [], $expect);
    };
    ($name:ident, $cc:expr, pie: $pie:expr, [$($flag:expr),*], extra: [$($x:expr),*], $expect:expr) => {
        #[test]
        fn $name() {
            let work = Work::new(concat!("discovery_c-", stringify!($name)));
            let extra: Vec<String> = vec![$($x),*];
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let bin = build(&work, $cc, $pie, &[$($flag),*], &extra);
            check(&bin, $expect);
        }
    };
}

// gcc 12
case!(gcc_fentry_recorded_pie, "gcc", pie: true, ["-pg", "-mfentry", "-mrecord-mcount"], FENTRY_TABLE);
case!(gcc_fentry_recorded_nopie, "gcc", pie: false, ["-pg", "-mfentry", "-mrecord-mcount"], FENTRY_TABLE);
case!(gcc_fentry_scanned_pie, "gcc", pie: true, ["-pg", "-mfentry"], FENTRY_SCAN);
case!(gcc_fentry_scanned_nopie, "gcc", pie: false, ["-pg", "-mfentry"], FENTRY_SCAN);
case!(gcc_mcount_recorded_pie, "gcc", pie: true, ["-pg", "-mrecord-mcount"], MCOUNT_TABLE);
case!(gcc_mcount_recorded_nopie, "gcc", pie: false, ["-pg", "-mrecord-mcount"], MCOUNT_TABLE);
case!(gcc_mcount_scanned_pie, "gcc", pie: true, ["-pg"], MCOUNT_SCAN);
case!(gcc_mcount_scanned_nopie, "gcc", pie: false, ["-pg"], MCOUNT_SCAN);
case!(gcc_nop_mcount_nopie, "gcc", pie: false, ["-pg", "-mfentry", "-mnop-mcount", "-mrecord-mcount"], Expect::NopTable);
case!(gcc_return_nops_pie, "gcc", pie: true,
    ["-pg", "-mfentry", "-mrecord-mcount", "-minstrument-return=nop5", "-mrecord-return"],
    Expect::Returns { call: false });
case!(gcc_return_calls_nopie, "gcc", pie: false,
    ["-pg", "-mfentry", "-mrecord-mcount", "-minstrument-return=call", "-mrecord-return"],
    extra: [program("c/return_hook.c")],
    Expect::Returns { call: true });
case!(gcc_patchable_5_pie, "gcc", pie: true, ["-fpatchable-function-entry=5"], Expect::Patchable { m: 0 });
case!(gcc_patchable_5_nopie, "gcc", pie: false, ["-fpatchable-function-entry=5"], Expect::Patchable { m: 0 });
case!(gcc_patchable_5_2_pie, "gcc", pie: true, ["-fpatchable-function-entry=5,2"], Expect::Patchable { m: 2 });
case!(gcc_patchable_3_1_nopie, "gcc", pie: false, ["-fpatchable-function-entry=3,1"], Expect::Patchable { m: 1 });
case!(gcc_cet_fentry_pie, "gcc", pie: true, ["-fcf-protection", "-pg", "-mfentry", "-mrecord-mcount"], FENTRY_TABLE);
case!(gcc_cet_patchable_pie, "gcc", pie: true, ["-fcf-protection", "-fpatchable-function-entry=4"],
    Expect::Patchable { m: 0 });
// non-PIC gcc calls __fentry__ through an IBT PLT (.plt.sec) here
case!(gcc_ibt_plt_fentry_scanned_nopie, "gcc", pie: false,
    ["-fcf-protection", "-pg", "-mfentry", "-Wl,-z,ibtplt"], FENTRY_SCAN);

// clang 14 (Debian's default clang) and clang 16
case!(clang14_fentry_pie, "clang-14", pie: true, ["-pg", "-mfentry"], FENTRY_SCAN);
case!(clang14_fentry_nopie, "clang-14", pie: false, ["-pg", "-mfentry"], FENTRY_SCAN);
case!(clang14_mcount_pie, "clang-14", pie: true, ["-pg"], MCOUNT_SCAN);
case!(clang14_patchable_5_pie, "clang-14", pie: true, ["-fpatchable-function-entry=5"], Expect::Patchable { m: 0 });
case!(clang14_patchable_5_2_nopie, "clang-14", pie: false, ["-fpatchable-function-entry=5,2"],
    Expect::Patchable { m: 2 });
case!(clang14_xray_pie, "clang-14", pie: true, ["-fxray-instrument", "-fxray-instruction-threshold=1"],
    Expect::Xray { llvm_xray: "llvm-xray-14" });
case!(clang14_xray_nopie, "clang-14", pie: false, ["-fxray-instrument", "-fxray-instruction-threshold=1"],
    Expect::Xray { llvm_xray: "llvm-xray-14" });
case!(clang16_fentry_pie, "clang-16", pie: true, ["-pg", "-mfentry"], FENTRY_SCAN);
case!(clang16_mcount_nopie, "clang-16", pie: false, ["-pg"], MCOUNT_SCAN);
case!(clang16_cet_fentry_nopie, "clang-16", pie: false, ["-fcf-protection", "-pg", "-mfentry", "-Wl,-z,ibtplt"],
    FENTRY_SCAN);
case!(clang16_patchable_5_nopie, "clang-16", pie: false, ["-fpatchable-function-entry=5"],
    Expect::Patchable { m: 0 });
case!(clang16_patchable_3_1_pie, "clang-16", pie: true, ["-fpatchable-function-entry=3,1"],
    Expect::Patchable { m: 1 });
case!(clang16_xray_pie, "clang-16", pie: true, ["-fxray-instrument", "-fxray-instruction-threshold=1"],
    Expect::Xray { llvm_xray: "llvm-xray-16" });

// Linked by lld, which leaves the table words of a PIE zero: the values are
// only in the R_X86_64_RELATIVE relocations.
case!(clang16_lld_patchable_pie, "clang-16", pie: true, ["-fuse-ld=lld", "-fpatchable-function-entry=5,2"],
    Expect::Patchable { m: 2 });
case!(clang16_lld_xray_pie, "clang-16", pie: true,
    ["-fuse-ld=lld", "-fxray-instrument", "-fxray-instruction-threshold=1"],
    Expect::Xray { llvm_xray: "llvm-xray-16" });
case!(gcc_lld_fentry_recorded_nopie, "gcc", pie: false, ["-fuse-ld=lld", "-pg", "-mfentry", "-mrecord-mcount"],
    FENTRY_TABLE);

/// util.c as a shared library.
fn shared_library(name: &str, compiler: &str, flags: &[&str], expect: Expect) {
    let work = Work::new(&format!("discovery_c-{name}"));
    let mut args = vec!["-O2", "-fPIC", "-shared"];
    args.extend(flags);
    let lib = build_program(&work, "libutil.so", compiler, &["c/util.c"], &args);
    let listing = common::check::check(&lib, expect);
    let names: BTreeSet<&str> = listing.iter().map(|f| f.name.as_str()).collect();
    for name in ["util_sum", "util_helper_value", "util_varargs", "helper"] {
        assert!(names.contains(name), "{name} not in {names:?}");
    }
    // That `fntrace list LIB :mod:libutil` lists these same functions is
    // the CLI's test (crates/cli/tests/list.rs).
}

#[test]
fn gcc_shared_library_fentry_recorded() {
    shared_library(
        "gcc-so-fentry",
        "gcc",
        &["-pg", "-mfentry", "-mrecord-mcount"],
        FENTRY_TABLE,
    );
}

#[test]
fn gcc_shared_library_mcount_scanned() {
    shared_library("gcc-so-mcount", "gcc", &["-pg"], MCOUNT_SCAN);
}

#[test]
fn clang_shared_library_patchable() {
    shared_library(
        "clang-so-patchable",
        "clang-16",
        &["-fpatchable-function-entry=5,2"],
        Expect::Patchable { m: 2 },
    );
}
