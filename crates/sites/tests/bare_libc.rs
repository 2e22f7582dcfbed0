//! Bare sites in the system's `libc.so.6` (Debian's: stripped, CET), as
//! it is: its exported functions from `.dynsym`, the others from
//! `.eh_frame`, compared with what `readelf` lists; and, when its debug
//! file is installed, from the debug file. One test in a binary of its
//! own, since it sets `FNTRACE_DEBUG_FILE_DIRECTORY`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::bare::{called_frames, check_places, skip_word};
use fntrace_sites::debugfile::DEBUG_DIRS_VAR;
use fntrace_sites::{Binary, Source};
use fntrace_testkit::truth::{self, Symbol};
use fntrace_testkit::{run, Work};

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

fn discover(path: &Path) -> Binary {
    let data = std::fs::read(path).unwrap();
    fntrace_sites::discover_file(path, &data).unwrap()
}

/// Where the symbol discovery keeps among aliases comes first: global,
/// weak, local, then the first.
fn rank(s: &Symbol) -> u8 {
    match s.bind.as_str() {
        "GLOBAL" => 0,
        "WEAK" => 1,
        _ => 2,
    }
}

/// The path of `path`'s debug file under `/usr/lib/debug/.build-id`.
fn installed_debug_file(path: &Path) -> Option<String> {
    let notes = run(Command::new("readelf").arg("-n").arg(path));
    let id = notes.lines().find_map(|l| l.trim().strip_prefix("Build ID: "))?;
    let file = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
    Path::new(&file).exists().then_some(file)
}

#[test]
fn libc() {
    let libc = Path::new(LIBC);
    assert!(libc.exists(), "the test reads {LIBC}");
    let work = Work::new("bare-libc");
    // No debug file: what a system without libc6-dbg sees.
    std::env::set_var(DEBUG_DIRS_VAR, work.path("no-debug-files"));
    let binary = discover(libc);
    let sections = truth::sections(libc);

    // Its defined functions of .dynsym, one per address.
    let mut aliases: BTreeMap<u64, Vec<Symbol>> = BTreeMap::new();
    for sym in truth::symbols(libc, true) {
        let exec = sections.iter().any(|s| Some(s.index) == sym.section && s.exec);
        if exec && (sym.kind == "FUNC" || sym.kind == "IFUNC") {
            aliases.entry(sym.address).or_default().push(sym);
        }
    }
    let mut expected: BTreeMap<u64, Option<&str>> = BTreeMap::new();
    let mut ranges = Vec::new();
    let mut ifuncs = 0;
    for (address, symbols) in &aliases {
        let mut kept = symbols.iter().min_by_key(|s| rank(s)).unwrap().clone();
        if symbols.iter().any(|s| s.kind == "IFUNC") {
            kept.kind = "IFUNC".into();
            ifuncs += 1;
        }
        let section = sections.iter().find(|s| Some(s.index) == kept.section).unwrap();
        expected.insert(*address, skip_word(&kept, &section.name));
        ranges.push((*address, address + kept.size.max(1)));
    }
    // The FDEs of a call's frame that no .dynsym function covers.
    let mut from_fdes = BTreeSet::new();
    for frame in called_frames(libc) {
        if !ranges
            .iter()
            .any(|&(a, end)| a <= frame.start && frame.start < end)
        {
            expected.insert(frame.start, None);
            from_fdes.insert(frame.start);
        }
    }

    let mut got: BTreeMap<u64, Option<&str>> = BTreeMap::new();
    for s in &binary.sites {
        let f = binary.function_of(s).unwrap();
        let source = match from_fdes.contains(&f.address) {
            true => Source::EhFrame,
            false => Source::DynSym,
        };
        assert_eq!(s.source, source, "{}", f.name);
        got.insert(f.address, None);
    }
    for u in &binary.unpatchable {
        let f = &binary.functions[u.function];
        let word = expected.get(&f.address).copied().flatten();
        assert!(
            word.is_some_and(|w| u.reason.contains(w)),
            "{}: {}",
            f.name,
            u.reason
        );
        got.insert(f.address, word);
    }
    assert_eq!(got, expected);
    assert!(binary.rejected.is_empty(), "{:?}", binary.rejected);
    let unpatchable = |word: &str| {
        binary
            .unpatchable
            .iter()
            .filter(|u| u.reason.contains(word))
            .count()
    };
    assert_eq!(unpatchable("ifunc resolver"), ifuncs);
    assert!(ifuncs > 20, "{ifuncs} IFUNC symbols");
    // vfork, setjmp, _setjmp, __sigsetjmp, getcontext, clone.
    assert!(unpatchable("never patched") >= 6);
    assert!(binary.sites.len() > 2500, "{} sites", binary.sites.len());
    assert!(from_fdes.len() > 1000, "{} from .eh_frame", from_fdes.len());
    // Each after endbr64 where there is one (Debian 12's libc is not
    // built for CET: 10 functions have one).
    let endbr = check_places(libc, &binary, &sections);
    eprintln!(
        "libc.so.6: {} bare sites ({} from .eh_frame, {endbr} after endbr64), {} unpatchable",
        binary.sites.len(),
        from_fdes.len(),
        binary.unpatchable.len()
    );

    // With the debug file, if it is installed: its names, and fewer
    // functions, each missing one being one that .eh_frame cannot tell
    // from a function, and the debug file's names can (a split part, an
    // IFUNC resolver, __clone3), or no function at all (a tail inside
    // one, with an FDE of its own).
    let Some(debug) = installed_debug_file(libc) else {
        eprintln!("libc's debug file is not installed: only its stripped view was checked");
        return;
    };
    std::env::remove_var(DEBUG_DIRS_VAR);
    let named = discover(libc);
    assert!(
        named.sites.iter().all(|s| s.source == Source::DebugFile),
        "{debug}"
    );
    let starts = |b: &Binary| -> BTreeSet<u64> {
        b.sites
            .iter()
            .map(|s| b.function_of(s).unwrap().address)
            .collect()
    };
    let (stripped, with_names) = (starts(&binary), starts(&named));
    assert!(with_names.is_subset(&stripped));
    for address in stripped.difference(&with_names) {
        let refused = named
            .unpatchable
            .iter()
            .any(|u| named.functions[u.function].address == *address);
        let inside = named
            .functions
            .iter()
            .any(|f| f.address < *address && *address < f.address + f.size);
        assert!(refused || inside, "{address:#x}");
    }
    assert!(stripped.len() - with_names.len() < 50);
}
