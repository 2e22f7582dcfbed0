//! Site discovery on a Rust program built by the stable toolchain with
//! `RUSTC_BOOTSTRAP=1`: `-Z instrument-mcount` (calls to mcount after the
//! prologue, no table: found by scanning) and `-Z patchable-function-entry`,
//! with v0 and legacy symbol names, demangled.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use common::check::{check, Expect, MCOUNT_SCAN};
use common::{program, run, Work};

fn build(work: &Work, flags: &[&str]) -> PathBuf {
    let out = work.path("demo");
    run(Command::new("rustc")
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["-O", "--edition=2021", "-o"])
        .arg(&out)
        .arg(program("rust/demo.rs"))
        .args(flags));
    out
}

fn assert_names(listing: &[common::ListedFunction], names: &[&str]) {
    let listed: BTreeSet<&str> = listing.iter().map(|f| f.name.as_str()).collect();
    for name in names {
        assert!(listed.contains(name), "{name} not listed; listed: {listed:#?}");
    }
}

#[test]
fn rust_mcount_v0() {
    let work = Work::new("discovery_rust-mcount_v0");
    let bin = build(
        &work,
        &["-Z", "instrument-mcount", "-C", "symbol-mangling-version=v0"],
    );
    let listing = check(&bin, MCOUNT_SCAN);
    assert_names(
        &listing,
        &[
            "demo::fib",
            "demo::main",
            "<demo::shapes::Circle as demo::shapes::Area>::area",
        ],
    );
    assert!(
        listing
            .iter()
            .any(|f| f.name.starts_with("demo::shapes::largest::<")),
        "generic instance"
    );
    assert!(listing
        .iter()
        .all(|f| f.symbol.starts_with("_R") || !f.symbol.starts_with("_Z")));
}

#[test]
fn rust_mcount_legacy() {
    let work = Work::new("discovery_rust-mcount_legacy");
    let bin = build(
        &work,
        &[
            "-Z",
            "instrument-mcount",
            "-Z",
            "unstable-options",
            "-C",
            "symbol-mangling-version=legacy",
        ],
    );
    let listing = check(&bin, MCOUNT_SCAN);
    assert_names(&listing, &["demo::fib", "demo::main", "demo::shapes::largest"]);
    let fib = listing.iter().find(|f| f.name == "demo::fib").unwrap();
    assert!(
        fib.symbol.starts_with("_ZN4demo3fib17h"),
        "legacy symbol {}",
        fib.symbol
    );
}

#[test]
fn rust_patchable() {
    let work = Work::new("discovery_rust-patchable");
    let bin = build(&work, &["-Z", "patchable-function-entry=5"]);
    let listing = check(&bin, Expect::Patchable { m: 0 });
    assert_names(&listing, &["demo::fib", "demo::main"]);
}
