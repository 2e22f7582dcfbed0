//! The reader on a small real program whose calls are known
//! (`tests/programs/real/known.c`, `known_other.c`): what callgrind counts
//! on a plain `-O2` build, against the source's numbers and against the
//! entries a `-finstrument-functions` build of the same source logs; and
//! the format's rules on hand-written input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::{cc, enters, program, Work};

/// The test program's sources.
fn sources() -> Vec<PathBuf> {
    ["real/known.c", "real/known_other.c"]
        .iter()
        .map(|s| PathBuf::from(program(s)))
        .collect()
}

/// Runs `cmd`; it must succeed and print what known.c prints without
/// arguments.
fn run_known(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "254 10300 21 0 1\n",
        "{cmd:?}"
    );
}

/// Counts keyed by name and, for names that several functions share, the
/// rank of the function's address among theirs (link order is the same
/// in both builds: known.c's `helper` is `helper#0`).
fn keyed(counts: &BTreeMap<u64, u64>, names: &BTreeMap<u64, Vec<String>>) -> BTreeMap<String, u64> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut key_of = BTreeMap::new();
    for (address, all) in names {
        let name = all[0].as_str();
        let rank = seen.entry(name).or_default();
        key_of.insert(*address, format!("{name}#{rank}"));
        *rank += 1;
    }
    counts
        .iter()
        .map(|(address, n)| {
            let key = key_of
                .get(address)
                .unwrap_or_else(|| panic!("{address:#x} is no function's start"));
            (key.clone(), *n)
        })
        .collect()
}

#[test]
fn callgrind_counts_what_the_source_and_the_hooks_say() {
    let work = Work::new("callgrind-known");
    let srcs = sources();
    let plain = work.path("known");
    let mut args: Vec<&str> = vec!["-O2", "-pthread", "-o", plain.to_str().unwrap()];
    args.extend(srcs.iter().map(|s| s.to_str().unwrap()));
    cc("gcc", &args);
    let profile_file = work.path("known.callgrind");
    run_known(&mut command(&plain, &[], &profile_file));
    let profile = read(&profile_file, &plain);
    let counted: BTreeMap<u64, u64> = profile.by_address.iter().map(|(a, c)| (*a, c.calls)).collect();
    let by_callgrind = keyed(&counted, &enters::functions(&plain));

    let instrumented = work.path("known.instrumented");
    let src_refs: Vec<&Path> = srcs.iter().map(PathBuf::as_path).collect();
    enters::build(&src_refs, &instrumented, &["-O2"]);
    let logs = work.path("enters");
    std::fs::create_dir_all(&logs).unwrap();
    run_known(Command::new(&instrumented).env("FNTRACE_ENTERS", &logs));
    let threads = enters::read(&logs, &instrumented);
    assert_eq!(threads.len(), 2, "main and worker each logged");
    let by_hooks = keyed(&enters::counts(&threads), &enters::functions(&instrumented));

    // The source's numbers (known.c's comments), as both count them.
    let both = [
        ("fib#0", 177),
        ("leaf#0", 139),
        ("tail#0", 50),
        ("helper#0", 50),
        ("helper#1", 100),
        ("helper_b#0", 50),
        ("worker#0", 1),
        ("start#0", 1),
        ("main#0", 1),
    ];
    for (key, n) in both {
        assert_eq!(
            by_callgrind.get(key),
            Some(&n),
            "callgrind: {key} in {by_callgrind:#?}"
        );
        assert_eq!(by_hooks.get(key), Some(&n), "hooks: {key} in {by_hooks:#?}");
    }
    // qsort's comparisons: the same glibc makes as many in both runs.
    assert!(by_hooks["compare#0"] > 0);
    assert_eq!(by_callgrind["compare#0"], by_hooks["compare#0"]);
    // Tail recursion: a loop in the plain build, 4 calls in the
    // instrumented one; the loop's back edge is not a call.
    assert_eq!(by_callgrind["gcd#0"], 1);
    assert_eq!(by_hooks["gcd#0"], 4);
    // A jump to a function's first instruction is a call to callgrind:
    // 2 calls and 5 turns of the loop.
    assert_eq!(by_callgrind["spin_to_entry#0"], 7);
    assert_eq!(by_hooks.get("spin_to_entry#0"), None, "assembly has no hooks");

    // Nothing else of the program's own was called, in either build; what
    // callgrind sees besides is the C runtime's start-up code, which has
    // no hooks (`_start`, named "(below main)", and the crtstuff functions
    // without a symbol size, named by address).
    let ours: Vec<&str> = both
        .iter()
        .map(|(k, _)| *k)
        .chain(["compare#0", "gcd#0"])
        .collect();
    let extra_hooks: Vec<&String> = by_hooks.keys().filter(|k| !ours.contains(&k.as_str())).collect();
    assert!(extra_hooks.is_empty(), "hooks logged {extra_hooks:?}");
    let names: BTreeMap<String, u64> = profile.by_name();
    for (name, n) in &names {
        let runtime = name == "(below main)" || name.starts_with("0x");
        let known =
            ours.iter().any(|k| k.split('#').next() == Some(name.as_str())) || name == "spin_to_entry";
        assert!(
            known || (runtime && *n == 1),
            "callgrind saw {name} called {n} times"
        );
    }
    // The two helpers are one name to callgrind's name, two addresses.
    assert_eq!(names["helper"], 150);
}

/// One object's function calling another's, `cob=` for one call only, a
/// callee in the object named by the caller's `ob=`.
const SAMPLE: &str = "# callgrind format
version: 1
positions: instr line
events: Ir

ob=/bin/prog
fl=???
fn=main
0x1000 0 3
cob=/lib/libc.so.6
cfn=printf
calls=2 0x5000 0
0x1004 0 40
cfn=helper
calls=3 0x1100 0
0x1008 0 9

ob=/lib/libc.so.6
fn=qsort
0x6000 0 5
cob=/bin/prog
cfn=compare
calls=7 0x1200 0
0x6004 0 21
cfn=memcpy
calls=1 0x7000 0
0x6008 0 4

ob=/bin/prog
fn=helper
0x1100 0 9
cfn=helper
calls=4 0x1100 0
0x1104 0 12
";

#[test]
fn calls_are_summed_per_callee_of_the_object() {
    let p = parse(SAMPLE, "/bin/prog").unwrap();
    let got: Vec<(u64, &str, u64)> = p
        .by_address
        .iter()
        .map(|(a, c)| (*a, c.name.as_str(), c.calls))
        .collect();
    assert_eq!(got, [(0x1100, "helper", 7), (0x1200, "compare", 7)]);
    let libc = parse(SAMPLE, "/lib/libc.so.6").unwrap();
    assert_eq!(
        libc.by_name(),
        BTreeMap::from([("memcpy".to_string(), 1), ("printf".to_string(), 2)])
    );
    assert_eq!(p.calls_at(0x1000), 0);
}

#[test]
fn a_file_without_addresses_or_with_one_address_named_twice_is_refused() {
    let lines = SAMPLE.replace("positions: instr line", "positions: line");
    assert!(parse(&lines, "/bin/prog")
        .unwrap_err()
        .contains("--dump-instr=yes"));
    let renamed = SAMPLE.replace("cfn=compare\ncalls=7 0x1200", "cfn=compare\ncalls=7 0x1100");
    assert!(parse(&renamed, "/bin/prog")
        .unwrap_err()
        .contains("0x1100 was called helper"));
    assert!(parse("fn=main\n", "/bin/prog").is_err());
}
