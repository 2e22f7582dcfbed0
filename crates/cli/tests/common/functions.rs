//! Which functions a program's own objects define, by `nm`, and the check
//! that `fntrace list` finds each of them in the linked program once, from
//! the compiler's table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::check::{check, Expect};
use super::{require, run, ListedFunction};

/// The function symbols `nm --defined-only` lists in `path` (an object, an
/// archive or a linked file) as (address, name): text symbols, global,
/// local or weak (`T`, `t`, `W`, `w`), less the parts gcc splits off a
/// function (`.cold`), which have no entry of their own.
pub fn nm_functions(path: &Path) -> Vec<(u64, String)> {
    require("nm");
    let out = run(Command::new("nm").arg("--defined-only").arg(path));
    out.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (address, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            let function = matches!(kind, "T" | "t" | "W" | "w") && !name.contains(".cold");
            function.then(|| Some((u64::from_str_radix(address, 16).ok()?, name.to_string())))?
        })
        .collect()
}

/// Lists `bin` and checks the listing against independent readings
/// (`check`, with `-fpatchable-function-entry=N,m`), then that every site
/// comes from `__patchable_function_entries` (none recovered by scanning:
/// no entry was lost) and that the functions listed are exactly those of
/// `objects` that `nm` finds in `bin`, each once, at its address, but for
/// those named in `unpatched` (which the compiler gives no entry).
pub fn listed_from_table(bin: &Path, objects: &[PathBuf], m: u64, unpatched: &[&str]) -> Vec<ListedFunction> {
    let listing = check(bin, Expect::Patchable { m });
    for f in &listing {
        for s in &f.sites {
            assert_eq!(
                s.source,
                "__patchable_function_entries",
                "{} in {}: a site not from the table",
                f.name,
                bin.display()
            );
        }
    }
    let ours: BTreeSet<String> = objects
        .iter()
        .flat_map(|o| nm_functions(o))
        .map(|(_, name)| name)
        .filter(|name| !unpatched.contains(&name.as_str()))
        .collect();
    // Names by address: aliases (a C1 and a C2 constructor) share one.
    let mut expected: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for (address, name) in nm_functions(bin) {
        if ours.contains(&name) {
            expected.entry(address).or_default().insert(name);
        }
    }
    let mut listed: BTreeMap<u64, &str> = BTreeMap::new();
    for f in &listing {
        let before = listed.insert(f.address, &f.symbol);
        assert!(before.is_none(), "{:#x} listed twice", f.address);
    }
    assert_eq!(
        listed.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "functions listed in {} vs its own functions by nm: listed {listed:#?}, nm {expected:#?}",
        bin.display()
    );
    for (address, symbol) in &listed {
        assert!(
            expected[address].contains(*symbol),
            "{symbol} at {address:#x}: nm says {:?}",
            expected[address]
        );
    }
    listing
}
