//! Site discovery in relocatable objects, compared with the relocations
//! `readelf -r` lists: calls relocated against `__fentry__`/`mcount`, and
//! table entries relocated against their code.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::truth::relocations;
use common::{cc, list, program, sites, Work};
use fntrace_sites::recordmcount;

fn object(work: &Work, compiler: &str, src: &str, flags: &[&str]) -> PathBuf {
    let obj = work.path(&format!("{compiler}.o"));
    let source = program(src);
    let mut args = vec!["-c", "-O2", &source, "-o", obj.to_str().unwrap()];
    args.extend(flags);
    cc(compiler, &args);
    obj
}

/// (section, offset) of the sites of one kind that fntrace lists.
fn listed(obj: &Path, kinds: &[&str]) -> BTreeSet<(String, u64)> {
    sites(&list(obj))
        .into_iter()
        .filter(|(_, s)| kinds.contains(&s.kind.as_str()))
        .map(|(_, s)| (s.section.clone(), s.address))
        .collect()
}

/// Call sites from relocations against `hooks`: the call starts one byte
/// (`e8`, PLT32/PC32) or two bytes (`ff 15`, GOTPCREL[X]) before the field.
fn relocated_calls(obj: &Path, hooks: &[&str]) -> BTreeSet<(String, u64)> {
    relocations(obj)
        .into_iter()
        .filter(|r| hooks.contains(&r.symbol.as_str()))
        .map(|r| {
            let back = if r.r_type.contains("GOTPCREL") { 2 } else { 1 };
            (r.section, r.offset - back)
        })
        .collect()
}

/// Entries of table `name`: relocations against a section symbol + addend.
fn table_entries(obj: &Path, name: &str, step: u64) -> BTreeSet<(String, u64)> {
    relocations(obj)
        .into_iter()
        .filter(|r| r.section == name && r.offset % step == 0)
        .map(|r| (r.symbol, r.addend as u64))
        .collect()
}

#[test]
fn calls_found_from_relocations() {
    let work = Work::new("objects-calls");
    for (compiler, flags, kind, hooks) in [
        ("gcc", &["-pg", "-mfentry"][..], "fentry", &["__fentry__"][..]),
        ("clang-16", &["-pg", "-mfentry"], "fentry", &["__fentry__"]),
        ("clang-14", &["-pg"], "mcount", &["mcount"]),
    ] {
        let obj = object(&work, compiler, "c/main.c", flags);
        let truth = relocated_calls(&obj, hooks);
        assert!(truth.len() >= 5, "{compiler}: {truth:?}");
        assert_eq!(listed(&obj, &[kind]), truth, "{compiler} {flags:?}");
    }
}

#[test]
fn tables_read_through_relocations() {
    let work = Work::new("objects-tables");
    // gcc -mrecord-mcount: .quad entries against .text (+ offset).
    let obj = object(&work, "gcc", "c/main.c", &["-pg", "-mfentry", "-mrecord-mcount"]);
    let truth = table_entries(&obj, "__mcount_loc", 8);
    assert_eq!(listed(&obj, &["fentry"]), truth);
    assert_eq!(truth, relocated_calls(&obj, &["__fentry__"]));

    // -fpatchable-function-entry with -ffunction-sections: one table per function.
    let obj = object(
        &work,
        "gcc",
        "c/util.c",
        &["-fpatchable-function-entry=5,2", "-ffunction-sections"],
    );
    let truth = table_entries(&obj, "__patchable_function_entries", 8);
    assert_eq!(truth.len(), 4, "{truth:?}");
    assert_eq!(listed(&obj, &["patchable"]), truth);
    assert!(sites(&list(&obj))
        .iter()
        .all(|(_, s)| s.prefix == 2 && s.len == 5));

    // XRay: address fields every 32 bytes, PC64 relocations.
    let obj = object(
        &work,
        "clang-16",
        "c/main.c",
        &["-fxray-instrument", "-fxray-instruction-threshold=1"],
    );
    let truth = table_entries(&obj, "xray_instr_map", 32);
    assert_eq!(listed(&obj, &["xray-entry", "xray-exit", "xray-tail"]), truth);
}

#[test]
fn rewritten_objects_list_the_same_sites_from_their_table() {
    let work = Work::new("objects-recorded");
    let obj = object(
        &work,
        "clang-16",
        "c/main.c",
        &["-pg", "-mfentry", "-ffunction-sections"],
    );
    let before = list(&obj);
    assert!(sites(&before).iter().all(|(_, s)| s.source == "relocation"));
    // What `fntrace recordmcount` does: the object rewritten with its table.
    let data = std::fs::read(&obj).unwrap();
    let rewritten = recordmcount::record(&data)
        .unwrap()
        .output
        .expect("a rewritten object");
    std::fs::write(&obj, rewritten).unwrap();
    let after = list(&obj);
    assert!(sites(&after).iter().all(|(_, s)| s.source == "__mcount_loc"));
    let key = |l: &[common::ListedFunction]| -> BTreeSet<(String, u64, String)> {
        sites(l)
            .into_iter()
            .map(|(f, s)| (s.section.clone(), s.address, f.name.clone()))
            .collect()
    };
    assert_eq!(key(&before), key(&after));
}
