//! Every kind of site, traced through the runtime alone (`LD_PRELOAD`,
//! configured by environment), against the truth: the calls logged by a
//! `-finstrument-functions` build of the same program. The program's output
//! and exit status must not change, with or without the register frame.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::{run, runtime, Work};

const OPT: &[&str] = &["-O1", "-fno-inline", "-fno-optimize-sibling-calls"];

/// Function name → (entries, exits), from the instrumented build.
fn truth(work: &Work) -> BTreeMap<String, (u64, u64)> {
    let mut args = OPT.to_vec();
    args.extend([
        "-no-pie",
        "-finstrument-functions",
        "-finstrument-functions-exclude-file-list=cyg.c",
        "counts.c",
        "cyg.c",
    ]);
    let program = work.build("gcc", &args, "truth");
    let log = work.path("truth.log").display().to_string();
    let out = run(
        &work.0,
        &program,
        &["15"],
        &[("CYG_OUT", &log)],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(3));
    let nm = Command::new("nm").arg(&program).output().unwrap();
    let names: BTreeMap<u64, String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (addr, kind, name) = (w.next()?, w.next()?, w.next()?);
            matches!(kind, "T" | "t")
                .then(|| Some((u64::from_str_radix(addr, 16).ok()?, name.to_string())))?
        })
        .collect();
    std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            let addr = u64::from_str_radix(v[0], 16).unwrap();
            (
                names[&addr].clone(),
                (v[1].parse().unwrap(), v[2].parse().unwrap()),
            )
        })
        .collect()
}

/// Function name → (entries, exits), from the runtime's counting client.
fn counted(stderr: &str) -> BTreeMap<String, (u64, u64)> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("fntrace-count: "))
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            let num = |s: &str, k: &str| s.strip_prefix(k).unwrap().parse::<u64>().unwrap();
            (v[0].to_string(), (num(v[2], "entries="), num(v[3], "exits=")))
        })
        .collect()
}

struct Style {
    compiler: &'static str,
    flags: &'static [&'static str],
    exits: bool,
}

/// The functions of the C runtime's start files (crt*.o), which a plain
/// build has too — traced as bare sites where they are called after the
/// runtime started — and the instrumented build does not log.
const CRT: &[&str] = &[
    "frame_dummy",
    "register_tm_clones",
    "deregister_tm_clones",
    "__do_global_dtors_aux",
    "_init",
    "_fini",
];

const STYLES: &[Style] = &[
    Style {
        compiler: "gcc",
        flags: &["-fpatchable-function-entry=5"],
        exits: false,
    },
    Style {
        compiler: "gcc",
        flags: &["-fpatchable-function-entry=8,3"],
        exits: false,
    },
    Style {
        compiler: "gcc",
        flags: &["-pg", "-mfentry", "-mrecord-mcount"],
        exits: false,
    },
    Style {
        compiler: "gcc",
        flags: &["-pg"],
        exits: false,
    },
    Style {
        compiler: "gcc",
        flags: &[
            "-no-pie",
            "-fno-pic",
            "-pg",
            "-mfentry",
            "-mnop-mcount",
            "-mrecord-mcount",
            "-minstrument-return=nop5",
            "-mrecord-return",
        ],
        exits: true,
    },
    Style {
        compiler: "clang-16",
        flags: &["-fpatchable-function-entry=5"],
        exits: false,
    },
    Style {
        compiler: "clang-16",
        flags: &["-pg", "-mfentry"],
        exits: false,
    },
    Style {
        compiler: "clang-16",
        flags: &["-fxray-instrument", "-fxray-instruction-threshold=1"],
        exits: true,
    },
    // Plain builds: no site a compiler left, every function traced through
    // its own first instructions (issue 19) — PIE and not, with `endbr64`,
    // and clang's code.
    Style {
        compiler: "gcc",
        flags: &[],
        exits: false,
    },
    Style {
        compiler: "gcc",
        flags: &["-fcf-protection"],
        exits: false,
    },
    Style {
        compiler: "gcc",
        flags: &["-no-pie", "-fno-pic"],
        exits: false,
    },
    Style {
        compiler: "clang-16",
        flags: &[],
        exits: false,
    },
];

#[test]
fn every_kind_of_site_counts_the_calls_the_instrumented_build_logs() {
    let work = Work::new("counts");
    let truth = truth(&work);
    assert!(truth.len() >= 8, "{truth:?}");
    let plain = work.build("gcc", &[OPT, &["counts.c"]].concat(), "plain");
    let expected = run(&work.0, &plain, &["15"], &[], Duration::from_secs(20));
    let preload = runtime().display().to_string();
    for (i, style) in STYLES.iter().enumerate() {
        let mut args = OPT.to_vec();
        args.extend_from_slice(style.flags);
        args.push("counts.c");
        let program = work.build(style.compiler, &args, &format!("counts{i}"));
        for regs in ["0", "1"] {
            let what = format!("{} {:?} regs={regs}", style.compiler, style.flags);
            let env = [
                ("LD_PRELOAD", preload.as_str()),
                ("FNTRACE_COUNT", "1"),
                ("FNTRACE_REGS", regs),
            ];
            let out = run(&work.0, &program, &["15"], &env, Duration::from_secs(20));
            assert_eq!(out.status.code(), Some(3), "{what}");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&expected.stdout),
                "{what}: output changed"
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            let got = counted(&stderr);
            for (function, &(entries, exits)) in &truth {
                let (e, x) = got.get(function).copied().unwrap_or_default();
                assert_eq!(e, entries, "{what}: entries of {function}\n{stderr}");
                if style.exits {
                    assert_eq!(x, exits, "{what}: exits of {function}\n{stderr}");
                }
            }
            let bare = style
                .flags
                .iter()
                .all(|f| ["-fcf-protection", "-no-pie", "-fno-pic"].contains(f));
            assert!(
                got.keys()
                    .all(|f| truth.contains_key(f) || bare && CRT.contains(&f.as_str())),
                "{what}: extra functions\n{stderr}"
            );
        }
    }
}
