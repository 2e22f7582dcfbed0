//! `fntrace recordmcount` on gcc 12's `__patchable_function_entries`: one
//! table per object, linked to the object's first function, which makes
//! g++ fail to link templates used in two objects and loses the entries
//! of an object whose first function `--gc-sections` collects. After the
//! tool every entry is in a piece linked to its own code section and in
//! that section's COMDAT group (readelf), the entries themselves are those
//! gcc wrote, the objects link with ld.bfd, gold and lld, and every
//! function is listed once, from the table, where nm puts it.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::functions::{listed_from_table, nm_functions};
use common::objects::{link, objects, recordmcount, TEMPLATES_PROGRAM as CXX};
use common::truth::{relocations, table};
use common::{build_program, require, run, Work};

const TABLE: &str = "__patchable_function_entries";

/// A section as `readelf -SW` shows it.
#[derive(Debug)]
struct Section {
    name: String,
    offset: u64,
    flags: String,
    link: usize,
    info: usize,
}

/// The sections of `path` by index, from `readelf -SW`.
fn sections(path: &Path) -> BTreeMap<usize, Section> {
    require("readelf");
    let out = run(Command::new("readelf").arg("-SW").arg(path));
    out.lines()
        .filter_map(|line| {
            // "  [ 8] __patchable_function_entries PROGBITS  0…0 000088 000020 00 WAL  6   0  8"
            let (index, rest) = line.trim_start().strip_prefix('[')?.split_once(']')?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // Without flags their column is empty: 9 fields, not 10.
            let (flags, link, info) = match fields.len() {
                10 => (fields[6], fields[7], fields[8]),
                9 => ("", fields[6], fields[7]),
                _ => return None,
            };
            let section = Section {
                name: fields[0].to_string(),
                offset: u64::from_str_radix(fields[3], 16).ok()?,
                flags: flags.to_string(),
                link: link.parse().ok()?,
                info: info.parse().ok()?,
            };
            Some((index.trim().parse().ok()?, section))
        })
        .collect()
}

/// The COMDAT group of each member section, from `readelf -gW`.
fn groups(path: &Path) -> BTreeMap<usize, usize> {
    let out = run(Command::new("readelf").arg("-gW").arg(path));
    let index = |s: &str| {
        s.split_once('[')?
            .1
            .split_once(']')?
            .0
            .trim()
            .parse::<usize>()
            .ok()
    };
    let mut group = None;
    let mut of = BTreeMap::new();
    for line in out.lines() {
        if line.starts_with("COMDAT group section") {
            group = index(line);
        } else if let (Some(g), Some(member)) = (group, index(line)) {
            of.insert(member, g);
        }
    }
    of
}

/// The symbols of each table piece's relocations, by piece, from
/// `readelf -rW` (a relocation section is told from its namesakes by its
/// offset, and names its piece in `sh_info`).
fn piece_symbols(path: &Path, sections: &BTreeMap<usize, Section>) -> BTreeMap<usize, Vec<String>> {
    let piece_at: BTreeMap<u64, usize> = sections
        .values()
        .filter(|s| s.name.ends_with(TABLE) && s.name.starts_with(".rel"))
        .map(|s| (s.offset, s.info))
        .collect();
    let out = run(Command::new("readelf").arg("-rW").arg(path));
    let mut piece = None;
    let mut symbols: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("Relocation section '") {
            // "Relocation section '.rela__patchable_function_entries' at offset 0x750 contains 4 entries:"
            let offset = rest
                .split(" at offset 0x")
                .nth(1)
                .and_then(|r| r.split(' ').next());
            piece = offset
                .and_then(|o| u64::from_str_radix(o, 16).ok())
                .and_then(|o| piece_at.get(&o).copied());
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let (Some(p), true) = (piece, fields.len() >= 5 && fields[2].starts_with("R_")) {
            symbols.entry(p).or_default().push(fields[4].to_string());
        }
    }
    symbols
}

/// The table's entries of each object as (symbol, addend), sorted.
fn entries(objects: &[PathBuf]) -> Vec<Vec<(String, i64)>> {
    objects
        .iter()
        .map(|o| {
            let mut e: Vec<_> = relocations(o)
                .into_iter()
                .filter(|r| r.section == TABLE)
                .map(|r| (r.symbol, r.addend))
                .collect();
            e.sort();
            e
        })
        .collect()
}

/// Every table piece of `object` holds the entries of one code section
/// (gcc's are against section symbols, named as the section), is linked
/// to it (`SHF_LINK_ORDER`) and in its COMDAT group if it has one. Returns
/// the number of pieces with entries.
fn check_pieces(object: &Path) -> usize {
    let sections = sections(object);
    let groups = groups(object);
    let symbols = piece_symbols(object, &sections);
    for (index, piece) in sections.iter().filter(|(_, s)| s.name == TABLE) {
        let code = &sections[&piece.link];
        assert!(piece.flags.contains('L'), "{}: {piece:?}", object.display());
        assert_eq!(
            groups.get(index),
            groups.get(&piece.link),
            "{}: the group of piece {index}, linked to {}",
            object.display(),
            code.name
        );
        for symbol in symbols.get(index).into_iter().flatten() {
            assert_eq!(symbol, &code.name, "{}: piece {index}", object.display());
        }
    }
    symbols.len()
}

/// The 32-bit big-endian words of section `name` of `path`, from
/// `readelf -x` (MIPS o32).
fn be_words(path: &Path, name: &str) -> Vec<u64> {
    let out = run(Command::new("readelf").args(["-x", name]).arg(path));
    out.lines()
        .filter(|l| l.trim_start().starts_with("0x"))
        .flat_map(|l| {
            l.split_whitespace()
                .skip(1)
                .take(4)
                .take_while(|g| g.len() == 8)
                .map(|g| u64::from_str_radix(g, 16).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn gxx_templates_in_three_objects() {
    let work = Work::new("recordmcount_patchable-gxx");
    let objs = objects(&work, "o", "g++", CXX, &["-O2", "-fpatchable-function-entry=5"]);
    // As g++ 12 writes them, the objects do not link (issue 17).
    let plain = Command::new("g++")
        .args(&objs)
        .arg("-o")
        .arg(work.path("plain"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert!(!plain.status.success());
    assert!(
        stderr.contains("referenced in section `__patchable_function_entries'")
            && stderr.contains("defined in discarded section"),
        "{stderr}"
    );

    let before = entries(&objs);
    let said = recordmcount(&objs);
    assert_eq!(said.matches("; regrouped ").count(), 3, "{said}");
    assert_eq!(entries(&objs), before, "the entries are gcc's, no more, no fewer");
    for o in &objs {
        assert!(check_pieces(o) > 3, "{}", o.display());
    }
    // A second run changes nothing.
    let once: Vec<Vec<u8>> = objs.iter().map(|o| std::fs::read(o).unwrap()).collect();
    let said = recordmcount(&objs);
    assert_eq!(said.matches("grouped by section already").count(), 3, "{said}");
    let twice: Vec<Vec<u8>> = objs.iter().map(|o| std::fs::read(o).unwrap()).collect();
    assert!(once == twice, "the second run rewrote an object");

    let expected = run(&mut Command::new(build_program(
        &work,
        "reference",
        "g++",
        CXX,
        &["-O2"],
    )));
    let realloc_insert =
        "_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx17__normal_iteratorIPiS1_EEDpOT_";
    for linker in ["bfd", "gold", "lld"] {
        for gc in [false, true] {
            let bin = work.path(&format!("{linker}-{gc}"));
            let mut extra = vec![format!("-fuse-ld={linker}")];
            extra.extend(gc.then(|| "-Wl,--gc-sections".to_string()));
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            link("g++", &objs, &bin, &extra);
            assert_eq!(run(&mut Command::new(&bin)), expected, "{}", bin.display());
            if linker == "gold" && gc {
                // gold's --gc-sections ignores SHF_LINK_ORDER: it collects
                // every piece (clang's too, below).
                assert!(table(&bin, TABLE).is_empty());
                continue;
            }
            let listing = listed_from_table(&bin, &objs, 0, &[]);
            let copies = listing.iter().filter(|f| f.symbol == realloc_insert).count();
            assert_eq!(copies, 1, "{}: {listing:#?}", bin.display());
        }
    }
    let clang = objects(
        &work,
        "clang",
        "clang++-16",
        CXX,
        &["-O2", "-fpatchable-function-entry=5"],
    );
    let bin = work.path("clang-gold-gc");
    link(
        "clang++-16",
        &clang,
        &bin,
        &["-fuse-ld=gold", "-Wl,--gc-sections"],
    );
    assert!(table(&bin, TABLE).is_empty());
}

#[test]
fn gcc_entries_survive_gc_sections() {
    let work = Work::new("recordmcount_patchable-gc");
    let sources = ["build/unused_first.c", "build/main_gc.c"];
    let flags = ["-O2", "-ffunction-sections", "-fpatchable-function-entry=5"];
    let objs = objects(&work, "o", "gcc", &sources, &flags);
    // As gcc writes them, unused_first.o's table goes with never_called:
    // called() has no entry, and fntrace finds its NOPs by scanning.
    let bin = work.path("plain");
    link("gcc", &objs, &bin, &["-Wl,--gc-sections"]);
    let called = nm_functions(&bin)
        .into_iter()
        .find(|(_, name)| name == "called")
        .unwrap()
        .0;
    assert!(!table(&bin, TABLE).contains(&called));
    let listing = common::list(&bin);
    let recovered = listing.iter().find(|f| f.symbol == "called").unwrap();
    assert_eq!(recovered.sites[0].source, "code-scan");

    recordmcount(&objs);
    for linker in ["bfd", "lld"] {
        let bin = work.path(linker);
        link(
            "gcc",
            &objs,
            &bin,
            &[&format!("-fuse-ld={linker}"), "-Wl,--gc-sections"],
        );
        let listing = listed_from_table(&bin, &objs, 0, &[]);
        let names: Vec<&str> = listing.iter().map(|f| f.symbol.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.contains(&"called") && names.contains(&"main"));
        let out = Command::new(&bin).status().unwrap();
        assert_eq!(out.code(), Some(0));
    }
}

/// MIPS o32, big-endian, REL: the addend of an entry is its word, which
/// must move with it. gcc 12 puts a function's NOPs before its label (see
/// docs/SITES.md), so each entry is the function's address less 12.
#[test]
fn mips_rel_entries_keep_their_words() {
    let work = Work::new("recordmcount_patchable-mips");
    let gcc = "mips-linux-gnu-gcc";
    // Without -ffunction-sections: most entries are .text + offset, and
    // main (.text.startup), custom_section and rarely are elsewhere.
    let objs = objects(
        &work,
        "o",
        gcc,
        common::C_PROGRAM,
        &["-O2", "-fpatchable-function-entry=3"],
    );
    let said = recordmcount(&objs);
    assert!(said.contains("; regrouped "), "{said}");
    let ours: Vec<String> = objs
        .iter()
        .flat_map(|o| nm_functions(o))
        .map(|(_, n)| n)
        .collect();
    for gc in [false, true] {
        let bin = work.path(&format!("prog-{gc}"));
        let extra: &[&str] = if gc {
            &["-static", "-Wl,--gc-sections"]
        } else {
            &["-static"]
        };
        link(gcc, &objs, &bin, extra);
        let mut found = be_words(&bin, TABLE);
        found.sort();
        let mut expected: Vec<u64> = nm_functions(&bin)
            .into_iter()
            .filter(|(_, name)| ours.contains(name))
            .map(|(address, _)| address - 12)
            .collect();
        expected.sort();
        assert_eq!(found.len(), 11, "{found:x?}");
        assert_eq!(found, expected);
    }
}

/// What flags do for plain g++ 12 without the tool (besides `-flto`, a row
/// of the build table): none of these makes the objects link; `-fno-weak`
/// does, by making every template and inline function local to each
/// object, a copy per object (an inline function's static variables and
/// address then differ between objects); `-fno-toplevel-reorder` does for
/// this program, where it happens to put a discarded copy first, and the
/// entries of those objects are lost (found again by scanning).
#[test]
fn gxx_12_flags_without_the_tool() {
    let work = Work::new("recordmcount_patchable-flags");
    let build = |name: &str, flag: &str| -> (Vec<PathBuf>, PathBuf, std::process::Output) {
        let objs = objects(
            &work,
            name,
            "g++",
            CXX,
            &["-O2", "-fpatchable-function-entry=5", flag],
        );
        let bin = work.path(name).join("prog");
        let out = Command::new("g++")
            .args(&objs)
            .arg("-o")
            .arg(&bin)
            .output()
            .unwrap();
        (objs, bin, out)
    };
    for flag in [
        "-ffunction-sections",
        "-fno-inline",
        "-fvisibility-inlines-hidden",
        "-fno-semantic-interposition",
        "-fno-gnu-unique",
        "-fno-implicit-inline-templates",
        "-fno-reorder-functions",
    ] {
        let (_, _, out) = build(flag.trim_start_matches('-'), flag);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("defined in discarded section"),
            "{flag}: {stderr}"
        );
    }

    let (_, bin, out) = build("no-weak", "-fno-weak");
    assert!(out.status.success());
    let copies =
        |listing: &[common::ListedFunction]| listing.iter().filter(|f| f.symbol == "_Z3mixi").count();
    let local_mix = nm_functions(&bin).iter().filter(|(_, n)| n == "_Z3mixi").count();
    assert_eq!(local_mix, 3);
    assert_eq!(copies(&common::list(&bin)), 3);

    let (_, bin, out) = build("no-toplevel-reorder", "-fno-toplevel-reorder");
    assert!(out.status.success());
    let listing = common::list(&bin);
    assert!(
        listing
            .iter()
            .any(|f| f.sites.iter().any(|s| s.source == "code-scan")),
        "{listing:#?}"
    );
}

/// A table whose relocations do not each cover an entry of their own is
/// refused with one line, and the object is left as it was.
#[test]
fn a_broken_table_is_refused() {
    let work = Work::new("recordmcount_patchable-broken");
    let objs = objects(
        &work,
        "o",
        "g++",
        &CXX[..1],
        &["-O2", "-fpatchable-function-entry=5"],
    );
    let relocs = sections(&objs[0])
        .into_values()
        .find(|s| s.name == format!(".rela{TABLE}"))
        .unwrap();
    let mut data = std::fs::read(&objs[0]).unwrap();
    // The second relocation (24 bytes each) now points at the first entry.
    let second = relocs.offset as usize + 24;
    data[second..second + 8].copy_from_slice(&0u64.to_le_bytes());
    std::fs::write(&objs[0], &data).unwrap();
    let out = common::fntrace_output(&["recordmcount", objs[0].to_str().unwrap()]);
    common::assert_fails(&out, 1, "not on an entry of its own");
    assert!(std::fs::read(&objs[0]).unwrap() == data, "the object changed");
}
