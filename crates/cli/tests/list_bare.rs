//! `fntrace list` on plain x86-64 builds, which no compiler prepared: a
//! `bare` site in every function, in the three forms (text, `--sites`,
//! `--json`), the functions left alone listed with their reason, and a
//! stripped copy named from `.eh_frame`; each decoded as the runtime will
//! decode it (`jump`, and the instruction boundaries inside the jump).
//! Places, bytes and boundaries are checked against `objdump -d`; the
//! functions against the program's source.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{build_program, fntrace_ok, hex_u64, list, run, truth, Work, C_PROGRAM};
use serde_json::Value;

/// The functions of the C test program that a plain `-O2` build keeps (by
/// its source: nothing of it is `inline`d away but these).
const FUNCTIONS: &[&str] = &[
    "custom_section",
    "fib",
    "helper",
    "helper",
    "leaf",
    "main",
    "rarely",
    "tail",
    "util_helper_value",
    "util_sum",
    "util_varargs",
];

fn build(work: &Work, name: &str, flags: &[&str]) -> PathBuf {
    let mut args = vec!["-O2"];
    args.extend(flags);
    build_program(work, name, "gcc", C_PROGRAM, &args)
}

/// A `--sites` line: (address, len, kind, form, source, name+offset,
/// bytes, what follows them).
type Line = (u64, usize, String, String, String, String, Vec<u8>, String);

fn sites_lines(path: &Path, patterns: &[&str]) -> Vec<Line> {
    let mut args = vec!["list", "--sites", path.to_str().unwrap()];
    args.extend(patterns);
    let (out, err) = fntrace_ok(&args);
    assert!(err.is_empty(), "{err}");
    out.lines()
        .map(|l| {
            let (head, rest) = l.split_once(" [").unwrap();
            let (bytes, tail) = rest.split_once(']').unwrap();
            let f: Vec<&str> = head.split_whitespace().collect();
            assert_eq!(f.len(), 6, "{l}");
            (
                u64::from_str_radix(f[0], 16).unwrap(),
                f[1].parse().unwrap(),
                f[2].to_string(),
                f[3].to_string(),
                f[4].to_string(),
                f[5].to_string(),
                bytes
                    .split_whitespace()
                    .map(|b| u8::from_str_radix(b, 16).unwrap())
                    .collect(),
                tail.to_string(),
            )
        })
        .collect()
}

/// A function of `list --json`, with its one site: (name, size, form,
/// boundaries, refused).
type JsonFunction = (String, u64, String, Option<Vec<u64>>, Option<String>);

fn json_functions(path: &Path) -> BTreeMap<u64, JsonFunction> {
    let (out, _) = fntrace_ok(&["list", "--json", path.to_str().unwrap()]);
    let json: Value = serde_json::from_str(&out).unwrap();
    json.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let sites = f["sites"].as_array().unwrap();
            assert_eq!(sites.len(), 1, "{f}");
            let site = &sites[0];
            assert_eq!(site["kind"], "bare");
            let boundaries = site["boundaries"]
                .as_array()
                .map(|b| b.iter().map(|b| b.as_u64().unwrap()).collect());
            let function = (
                f["name"].as_str().unwrap().to_string(),
                f["size"].as_u64().unwrap(),
                site["form"].as_str().unwrap().to_string(),
                boundaries,
                site["refused"].as_str().map(str::to_string),
            );
            (hex_u64(&f["address"]), function)
        })
        .collect()
}

/// Checks the `--sites` lines of `path` against objdump and `list
/// --json`: each bare site after `endbr64` where objdump shows one, with
/// the bytes objdump shows, its form `jump` (`jump+pad` for a function of
/// fewer than 5 bytes after it, whose jump takes the padding) with the
/// instruction starts objdump shows inside the jump's 5 bytes and the
/// function; the same in the JSON. Returns the reasons of the functions
/// left alone, by name.
fn check_sites(path: &Path, source: &str) -> BTreeMap<String, String> {
    let disasm = truth::objdump(path);
    let json = json_functions(path);
    let mut refused = BTreeMap::new();
    for (address, len, kind, form, src, at, bytes, tail) in sites_lines(path, &[]) {
        assert_eq!((kind.as_str(), src.as_str()), ("bare", source), "{at}");
        let (name, offset) = at.rsplit_once("+0x").unwrap();
        let start = address - u64::from_str_radix(offset, 16).unwrap();
        let (json_name, size, json_form, boundaries, reason) = &json[&start];
        assert_eq!((json_name.as_str(), json_form), (name, &form), "{at}");
        if form == "refused" {
            assert!(
                len == 0 && bytes.is_empty(),
                "{at}: the functions this program has can be patched"
            );
            let reason = reason.as_deref().unwrap();
            assert_eq!(tail, format!(" refused: {reason}"));
            refused.insert(name.to_string(), reason.to_string());
            continue;
        }
        let pad = if disasm.insn(start).unwrap().text == "endbr64" {
            4
        } else {
            0
        };
        assert_eq!(address, start + pad, "{at}");
        assert_eq!(bytes, disasm.bytes(address, 5), "{at}");
        assert_eq!(len, 5);
        let end = start + size;
        let expected_form = if end - address < 5 { "jump+pad" } else { "jump" };
        assert_eq!(form, expected_form, "{at}");
        let inside: Vec<u64> = disasm
            .insns
            .range(address + 1..(address + 5).min(end))
            .map(|(a, _)| a - address)
            .collect();
        assert_eq!(boundaries.as_ref(), Some(&inside), "{at}");
        let shown: Vec<String> = inside.iter().map(|b| format!("+{b}")).collect();
        let expected_tail = match shown.is_empty() {
            true => String::new(),
            false => format!(" boundaries {}", shown.join(",")),
        };
        assert_eq!(tail, expected_tail, "{at}");
        assert!(reason.is_none());
    }
    refused
}

#[test]
fn plain_build() {
    let work = Work::new("list-bare-plain");
    let exe = build(&work, "prog", &["-fcf-protection"]);
    let p = exe.to_str().unwrap();

    // Text: one line per function, kind bare, at the function's address.
    let (text, err) = fntrace_ok(&["list", p]);
    assert!(err.is_empty(), "{err}");
    let mut names: Vec<&str> = text.lines().map(|l| l.rsplit(' ').next().unwrap()).collect();
    names.sort();
    assert_eq!(names, FUNCTIONS);
    assert!(
        text.lines().all(|l| l.split_whitespace().nth(1) == Some("bare")),
        "{text}"
    );

    // JSON: the same functions, each with its bare site; the functions left
    // alone follow with `refused`.
    let json = list(&exe);
    let listed: BTreeMap<u64, String> = json
        .iter()
        .filter(|f| f.sites.iter().all(|s| s.len > 0))
        .map(|f| (f.address, f.name.clone()))
        .collect();
    assert_eq!(listed.len(), FUNCTIONS.len());
    assert!(json.iter().all(|f| f.kind == "bare" && f.sites.len() == 1));
    let symbols = truth::symbols(&exe, false);
    for (address, name) in &listed {
        assert!(
            symbols.iter().any(|s| s.address == *address && s.name == *name),
            "{name}"
        );
    }

    // --sites: places and bytes, and the reasons.
    let refused = check_sites(&exe, "symtab");
    let reason = |name: &str| refused.get(name).map(String::as_str).unwrap_or("");
    assert!(reason("_start").starts_with("never patched"), "{refused:?}");
    assert!(reason("main.cold").contains("split part"), "{refused:?}");
    assert!(reason("frame_dummy").contains("no size"), "{refused:?}");
    assert!(reason("_init").contains("in .init"), "{refused:?}");
    // A pattern selects among them too.
    let only = sites_lines(&exe, &["main*"]);
    let selected: Vec<&str> = only.iter().map(|l| l.5.as_str()).collect();
    assert_eq!(selected, ["main.cold+0x0", "main+0x4"]);
}

#[test]
fn stripped_build() {
    let work = Work::new("list-bare-stripped");
    let exe = build(&work, "prog", &[]);
    let stripped = work.path("prog.s");
    run(Command::new("strip").arg("-o").arg(&stripped).arg(&exe));
    let unnamed: BTreeMap<u64, String> = list(&stripped).into_iter().map(|f| (f.address, f.name)).collect();
    // The functions of the symbols, each found from its FDE, none refused
    // (the functions skipped there have no FDE, or fail its check).
    let listing = list(&exe);
    let whole: Vec<u64> = listing
        .iter()
        .filter(|f| f.sites.iter().all(|s| s.len > 0))
        .map(|f| f.address)
        .collect();
    assert_eq!(unnamed.keys().copied().collect::<Vec<_>>(), whole);
    assert!(
        listing.len() > whole.len(),
        "the whole file's functions left alone"
    );
    for (address, name) in &unnamed {
        assert_eq!(*name, format!("prog.s+{address:#x}"));
    }
    let refused = check_sites(&stripped, "eh_frame");
    assert!(refused.is_empty(), "{refused:?}");
}
