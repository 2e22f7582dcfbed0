//! Files that lost something: a table removed with objcopy (sites found
//! by decoding instead), and symbols removed with strip (sites still found,
//! from the table or by sweeping the code, each function named after its
//! address).

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::check::{check, FENTRY_SCAN};
use common::truth::{objdump, table};
use common::{build_program, list, run, sites, Work, C_PROGRAM};

#[test]
fn table_removed() {
    let work = Work::new("stripped-table");
    let exe = build_program(
        &work,
        "prog",
        "gcc",
        C_PROGRAM,
        &["-O2", "-pg", "-mfentry", "-mrecord-mcount"],
    );
    run(Command::new("objcopy")
        .arg("--remove-section=__mcount_loc")
        .arg(&exe));
    assert!(table(&exe, "__mcount_loc").is_empty());
    let listing = check(&exe, FENTRY_SCAN);
    assert!(listing.iter().any(|f| f.name == "fib"));
}

#[test]
fn symbols_stripped_calls_found_by_sweeping() {
    let work = Work::new("stripped-symbols-scan");
    let exe = build_program(&work, "prog", "gcc", C_PROGRAM, &["-O2", "-pg", "-mfentry"]);
    // objdump cannot name the GOT targets once the file is stripped: read it first.
    let disasm = objdump(&exe);
    let before: BTreeSet<u64> = disasm.hook_calls(&["__fentry__"]);
    run(Command::new("strip").arg("--strip-all").arg(&exe));
    let listing = list(&exe);
    let found: BTreeSet<u64> = sites(&listing).iter().map(|(_, s)| s.address).collect();
    assert_eq!(found, before);
    // Each function is named after its address, the one objdump gave its
    // symbol before the strip (the fentry call is its first instruction).
    for f in &listing {
        assert_eq!(f.name, format!("prog+{:#x}", f.address));
        assert_eq!(
            disasm.function_at(f.address).map(|(a, _)| a),
            Some(f.address),
            "{f:?}"
        );
    }
}

#[test]
fn symbols_stripped_table_kept() {
    let work = Work::new("stripped-symbols-table");
    let exe = build_program(
        &work,
        "prog",
        "clang-16",
        C_PROGRAM,
        &["-O2", "-fpatchable-function-entry=5"],
    );
    run(Command::new("strip").arg("--strip-all").arg(&exe));
    let listing = list(&exe);
    let found: BTreeSet<u64> = sites(&listing).iter().map(|(_, s)| s.address).collect();
    let recorded: BTreeSet<u64> = table(&exe, "__patchable_function_entries").into_iter().collect();
    assert_eq!(found, recorded);
    assert!(sites(&listing).iter().all(|(_, s)| s.len == 5 && s.form == "nop"));
}
