//! Names in stripped binaries (`docs/SITES.md`, "Names"), compared with
//! `nm` of the same binary before `strip`: `.dynsym`, a separate debug
//! file found by `.gnu_debuglink` (CRC-checked) or by build ID, and
//! otherwise `FILE+0xADDRESS`, one per function: `list`, and `record` +
//! `report` of the stripped program.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{build_program, fntrace, fntrace_ok, list, run, Work, C_PROGRAM};
use serde_json::Value;

/// `nm` of `path`: function symbols (`t`/`T`) by address.
fn nm(path: &Path) -> BTreeMap<u64, String> {
    run(Command::new("nm").arg(path))
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (addr, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
            let address = u64::from_str_radix(addr, 16).ok()?;
            matches!(kind, "t" | "T").then(|| (address, name.to_string()))
        })
        .collect()
}

/// `fntrace list --json`'s `(address, name)`, by address.
fn listed(path: &Path) -> BTreeMap<u64, String> {
    list(path).into_iter().map(|f| (f.address, f.name)).collect()
}

/// The C test program, PIE, patchable entries: `prog` and its stripped
/// copy `NAME`.
fn built(work: &Work, name: &str, extra: &[&str]) -> (PathBuf, PathBuf) {
    let mut args = vec!["-O2", "-fpatchable-function-entry=5", "-Wl,--build-id"];
    args.extend(extra);
    let exe = build_program(work, "prog", "gcc", C_PROGRAM, &args);
    let stripped = work.path(name);
    run(Command::new("strip").arg("-o").arg(&stripped).arg(&exe));
    (exe, stripped)
}

#[test]
fn stripped_functions_are_named_by_address() {
    let work = Work::new("names-stripped");
    let (exe, stripped) = built(&work, "prog.s", &[]);
    let truth = nm(&exe);
    let named = listed(&exe);
    assert!(named.values().all(|n| truth.values().any(|t| t == n)));
    let unnamed = listed(&stripped);
    let expected: BTreeMap<u64, String> = named.keys().map(|&a| (a, format!("prog.s+{a:#x}"))).collect();
    assert_eq!(unnamed, expected);
    // Each at the address nm gives its function.
    assert!(unnamed.keys().all(|a| truth.contains_key(a)));
}

#[test]
fn dynsym_names_what_it_has() {
    let work = Work::new("names-dynsym");
    let (exe, stripped) = built(&work, "prog.s", &["-rdynamic"]);
    let truth = nm(&exe);
    let globals = run(Command::new("nm").args(["-D", "--defined-only"]).arg(&exe));
    let got = listed(&stripped);
    assert!(!got.is_empty());
    for (address, name) in &got {
        let real = &truth[address];
        if globals.lines().any(|l| l.ends_with(&format!(" T {real}"))) {
            assert_eq!(name, real);
        } else {
            assert_eq!(name, &format!("prog.s+{address:#x}"), "static {real}");
        }
    }
    assert!(got.values().any(|n| n == "main") && got.values().any(|n| n.starts_with("prog.s+")));
}

#[test]
fn debug_file_by_debuglink() {
    let work = Work::new("names-debuglink");
    let (exe, stripped) = built(&work, "prog.s", &[]);
    let debug = work.path("prog.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&exe)
        .arg(&debug));
    run(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&stripped));
    let named = listed(&exe);
    // Beside the binary.
    assert_eq!(listed(&stripped), named);
    // In .debug/ beside it.
    std::fs::create_dir_all(work.path(".debug")).unwrap();
    std::fs::rename(&debug, work.path(".debug/prog.debug")).unwrap();
    assert_eq!(listed(&stripped), named);
    // A debug file whose CRC does not match is not used.
    let mut bytes = std::fs::read(work.path(".debug/prog.debug")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(work.path(".debug/prog.debug"), bytes).unwrap();
    assert!(listed(&stripped).values().all(|n| n.starts_with("prog.s+0x")));
}

#[test]
fn debug_file_by_build_id_under_a_debug_root() {
    let work = Work::new("names-build-id");
    let (exe, stripped) = built(&work, "prog.s", &[]);
    let notes = run(Command::new("readelf").arg("-n").arg(&exe));
    let id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a build ID")
        .to_string();
    let root = work.path("debug-root");
    let dir = root.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&exe)
        .arg(dir.join(format!("{}.debug", &id[2..]))));
    let with_root = |roots: &str| {
        let out = fntrace()
            .env("FNTRACE_DEBUG_FILE_DIRECTORY", roots)
            .args(["list", "--json"])
            .arg(&stripped)
            .output()
            .unwrap();
        assert!(out.status.success());
        let json: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        json.iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let named: Vec<String> = listed(&exe).into_values().collect();
    assert_eq!(with_root(&format!("/nonexistent:{}", root.display())), named);
    assert!(with_root("/nonexistent")
        .iter()
        .all(|n| n.starts_with("prog.s+0x")));
}

/// `report --json` of a recording of `exe`: calls by function name (the
/// program's own functions: library calls are left out).
fn report_calls(work: &Work, exe: &Path, data: &str) -> BTreeMap<String, u64> {
    let data = work.path(data);
    let out = fntrace()
        .args(["record", "--no-libcall", "-o"])
        .arg(&data)
        .arg(exe)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (json, _) = fntrace_ok(&["report", "--json", data.to_str().unwrap()]);
    let rows: Vec<Value> = serde_json::from_str(&json).unwrap();
    rows.iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn record_and_report_keep_stripped_functions_apart() {
    let work = Work::new("names-report");
    let (exe, stripped) = built(&work, "prog.s", &[]);
    let truth = nm(&exe);
    let named = report_calls(&work, &exe, "named.data");
    let unnamed = report_calls(&work, &stripped, "stripped.data");
    assert!(named.len() > 3, "{named:?}");
    // The two static `helper`s of main.c and util.c are two rows, each
    // with its module and offset.
    let helpers: Vec<u64> = truth
        .iter()
        .filter(|(_, n)| *n == "helper")
        .map(|(a, _)| *a)
        .collect();
    assert_eq!(helpers.len(), 2);
    for address in &helpers {
        assert!(
            named.contains_key(&format!("helper [prog+{address:#x}]")),
            "{named:?}"
        );
    }
    // The same rows, each named after its function's address.
    let by_address: BTreeMap<String, u64> = named
        .iter()
        .map(|(name, &calls)| {
            let address = match name.split_once(" [prog+0x") {
                Some((_, hex)) => u64::from_str_radix(hex.trim_end_matches(']'), 16).unwrap(),
                None => truth.iter().find(|(_, n)| *n == name).map(|(a, _)| *a).unwrap(),
            };
            (format!("prog.s+{address:#x}"), calls)
        })
        .collect();
    assert_eq!(unnamed, by_address);
}
