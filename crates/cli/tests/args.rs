//! Arguments and return values (#20): `-A` and `-R` record what a call was
//! given and what it returned, and `replay` shows them as uftrace does
//! (`add(3, 4) = 7;`).
//!
//! The truth is the program's own: every function of
//! `programs/args/values.c` prints its call, just before it returns, in
//! the form the trace shows it (floating-point values exactly, as C's
//! `%a`). Integers of every width and sign, octal, hex, characters,
//! pointers, strings (empty, `NULL`, unreadable, cut by an unreadable
//! page), doubles and floats mixed with integers, arguments on the stack
//! (integer and vector), a variadic function, recursion and threads. The
//! recorded calls, in the order they returned, per thread, equal the
//! printed ones — built as users build: `-pg -mfentry` (entry sites,
//! returns hijacked), plain `-O2` (functions no compiler prepared: the
//! bare routine, with all sixteen vector registers in its frame) and
//! clang's XRay (exit sleds: return values at the exit site).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{cc, fntrace_output, program, run, Work};

/// The specs: one `-A` and one `-R` per function of the program.
const SPECS: &[(&str, &str)] = &[
    ("s8@arg1/i8,arg2/u8", "s8@retval/i8"),
    ("s16@arg1/i16,arg2/u16", "s16@retval/i16"),
    ("s32@arg1/i32,arg2/u32", "s32@retval/i32"),
    ("s64@arg1,arg2/u,arg3/x", "s64@retval"),
    ("octal@arg1/o32", "octal@retval/o32"),
    ("letter@arg1/c,arg2/i32", "letter@retval/c"),
    ("ptr@arg1/p", "ptr@retval/p"),
    ("str@arg1/s,arg2/i32", "str@retval/s"),
    ("bad@arg1/s", "bad@retval/i32"),
    ("mixed@arg1/i32,fparg1,arg2,fparg2/32,arg3/c", "mixed@retval/f"),
    ("fret@fparg1/32,fparg2/32", "fret@retval/f32"),
    (
        "stack10@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8,arg9,arg10",
        "stack10@retval",
    ),
    (
        "fstack@fparg1,fparg8,fparg9%stack+1,fparg10%stack+2",
        "fstack@retval/f",
    ),
    ("sumv@arg1/i32,arg2/i32,arg3/i32,arg4/i32", "sumv@retval/i32"),
    ("fib@arg1/i32", "fib@retval/i32"),
];

fn build(work: &Work, name: &str, compiler: &str, flags: &[&str]) -> PathBuf {
    let exe = work.path(name);
    let src = program("args/values.c");
    let mut args = vec!["-O2", "-pthread", &src, "-o", exe.to_str().unwrap()];
    args.extend(flags);
    cc(compiler, &args);
    exe
}

/// The calls the program printed, per thread (`T<n>`), in order.
fn printed(stdout: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in stdout.lines() {
        let (thread, call) = line.split_once(' ').expect("T<n> CALL");
        out.entry(thread.to_string()).or_default().push(call.to_string());
    }
    out
}

/// The calls of the specs' functions that `replay` shows, per thread, in
/// the order they returned: `name(args) = value`, from a leaf's line, or
/// from a call's opening line and its closing `} = value /* name */`.
fn recorded(replay: &str, names: &[&str]) -> Vec<Vec<String>> {
    let mut threads: BTreeMap<u32, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for line in replay.lines().filter(|l| !l.starts_with('#')) {
        let Some((head, text)) = line.split_once('|') else {
            continue;
        };
        let tid: u32 = head.split(')').next().unwrap().trim().parse().expect("tid");
        let text = text.trim();
        let (open, calls) = threads.entry(tid).or_default();
        let wanted = |call: &str| names.iter().any(|n| call.starts_with(&format!("{n}(")));
        if let Some(call) = text.strip_suffix(';') {
            if wanted(call) {
                calls.push(call.to_string());
            }
        } else if let Some(call) = text.strip_suffix(" {") {
            open.push(call.to_string());
        } else if let Some(rest) = text.strip_prefix('}') {
            let entry = open.pop().expect("a closing line closes an open call");
            if let Some((value, name)) = rest.trim().strip_prefix("= ").and_then(|r| r.split_once(" /* ")) {
                assert!(entry.starts_with(name.trim_end_matches(" */")), "{line}");
                if wanted(&entry) {
                    calls.push(format!("{entry} = {value}"));
                }
            } else if wanted(&entry) {
                calls.push(entry);
            }
        }
    }
    threads
        .into_values()
        .map(|(_, calls)| calls)
        .filter(|c| !c.is_empty())
        .collect()
}

/// C's `%a` (`-0x1.8p+3`, `0x0p+0`) as a number.
fn hex_float(s: &str) -> Option<f64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let s = s.strip_prefix("0x")?;
    let (mantissa, exp) = s.split_once('p')?;
    let exp: i32 = exp.parse().ok()?;
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut v = u64::from_str_radix(int, 16).ok()? as f64;
    for (i, c) in frac.chars().enumerate() {
        v += c.to_digit(16)? as f64 / 16f64.powi(i as i32 + 1);
    }
    let v = v * 2f64.powi(exp);
    Some(if neg { -v } else { v })
}

/// Whether a value the trace shows is the one the program printed: the
/// same text, or the same number (a printed `%a` against the trace's
/// decimal, read as a double or, for a `float`, as a float).
fn same_value(shown: &str, truth: &str) -> bool {
    if shown == truth {
        return true;
    }
    let Some(t) = hex_float(truth) else { return false };
    shown.parse::<f64>().is_ok_and(|v| v == t) || shown.parse::<f32>().is_ok_and(|v| f64::from(v) == t)
}

/// `name(a, b) = r` (or `name(a, b)`, returning nothing) as its name and
/// values.
fn split_call(call: &str) -> (String, Vec<String>) {
    let (name, rest) = call.split_once('(').expect("name(");
    let (args, ret) = match rest.rsplit_once(") = ") {
        Some((args, ret)) => (args, Some(ret)),
        None => (rest.strip_suffix(')').expect("name(...)"), None),
    };
    let mut values: Vec<String> = if args.is_empty() {
        Vec::new()
    } else {
        args.split(", ").map(str::to_string).collect()
    };
    values.extend(ret.map(str::to_string));
    (name.to_string(), values)
}

fn same_call(shown: &str, truth: &str) -> bool {
    let (a, av) = split_call(shown);
    let (b, bv) = split_call(truth);
    a == b && av.len() == bv.len() && av.iter().zip(&bv).all(|(x, y)| same_value(x, y))
}

/// `fntrace replay` of `data`, which must succeed.
fn replay(data: &Path) -> String {
    let out = fntrace_output(&["replay", data.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The one thread's recorded calls equal the printed ones, call by call.
fn assert_same_calls(shown: &[Vec<String>], truth: &[&str], what: &str, replay: &str) {
    assert_eq!(shown.len(), 1, "{what}\n{replay}");
    assert_eq!(shown[0].len(), truth.len(), "{what}\n{replay}");
    for (c, w) in shown[0].iter().zip(truth) {
        assert!(same_call(c, w), "{what}: recorded {c}\n  the program printed {w}");
    }
}

/// Records `exe` with every spec, checks the program ran as untraced, and
/// compares the recorded calls with the printed ones, thread by thread.
fn check(exe: &Path, work: &Work, label: &str) {
    let alone = run(&mut Command::new(exe));
    let data = work.path(&format!("{label}.data"));
    let mut args: Vec<String> = vec!["record".into(), "-o".into(), data.display().to_string()];
    for (a, r) in SPECS {
        args.extend(["-A".to_string(), a.to_string(), "-R".to_string(), r.to_string()]);
    }
    args.extend(["--".to_string(), exe.display().to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fntrace_output(&argv);
    assert!(
        out.status.success(),
        "{label}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Per thread (their lines interleave as they are scheduled).
    let stable = |s: &str| {
        printed(s)
            .into_values()
            .map(|calls| {
                calls
                    .into_iter()
                    .filter(|c| !c.starts_with("bad(<unreadable 0x7"))
                    .collect()
            })
            .collect::<Vec<Vec<String>>>()
    };
    assert!(
        stable(&stdout) == stable(&alone),
        "{label}: the traced program printed something else:\n{stdout}"
    );

    let replay = replay(&data);
    let mut truth: Vec<Vec<String>> = printed(&stdout).into_values().collect();
    let names: Vec<&str> = SPECS.iter().map(|(a, _)| a.split('@').next().unwrap()).collect();
    let mut shown = recorded(&replay, &names);
    assert_eq!(shown.len(), truth.len(), "{label}: threads with calls\n{replay}");
    // Threads are matched by their first call (each worker's differs).
    truth.sort();
    shown.sort_by(|a, b| a.first().cmp(&b.first()));
    for (calls, want) in shown.iter().zip(&truth) {
        assert_eq!(
            calls.len(),
            want.len(),
            "{label}: calls of a thread\n{calls:#?}\n{want:#?}"
        );
        for (c, w) in calls.iter().zip(want) {
            assert!(
                same_call(c, w),
                "{label}: recorded {c}\n  the program printed {w}"
            );
        }
    }
    // The Chrome export carries them: the first s8 call's arguments on its
    // `B`, its return value on its `E`.
    let chrome = fntrace_output(&["dump", "--chrome", data.to_str().unwrap()]);
    assert!(
        chrome.status.success(),
        "{}",
        String::from_utf8_lossy(&chrome.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&chrome.stdout).expect("chrome JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let calls = common::chrome_calls(events);
    let (b, e) = calls.iter().find(|(b, _)| b["name"] == "s8").expect("s8");
    assert_eq!(
        b["args"],
        serde_json::json!({"arg1": "-128", "arg2": "255"}),
        "{label}"
    );
    assert_eq!(e["args"], serde_json::json!({"retval": "127"}), "{label}");
    // So does Perfetto's, as debug annotations.
    let pf = work.path(&format!("{label}.pftrace"));
    let out = fntrace_output(&[
        "dump",
        "--perfetto",
        "-o",
        pf.to_str().unwrap(),
        data.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&pf).unwrap();
    let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    assert!(
        has(b"retval") && has(b"arg1") && has(b"\"world\""),
        "{label}: no values in the Perfetto trace"
    );
    // And the Firefox profile's call markers (`Arguments`, `Returned`).
    let ff = work.path(&format!("{label}.json"));
    let out = fntrace_output(&[
        "dump",
        "--firefox",
        "-o",
        ff.to_str().unwrap(),
        data.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let profile = std::fs::read_to_string(&ff).unwrap();
    assert!(
        profile.contains("\"Arguments\"") && profile.contains(r#""\"hello world\", 6""#),
        "{label}: no values in the Firefox profile"
    );
    // Every kind of value was compared, not skipped.
    let all: String = shown.iter().flatten().cloned().collect::<Vec<_>>().join("\n");
    for must in [
        "\"world\"",
        "NULL",
        "<unreadable 0x8>",
        "\"abcde\"...",
        "0755",
        "'c'",
        "0x1010",
        "-128",
    ] {
        assert!(all.contains(must), "{label}: no {must} in\n{all}");
    }
}

#[test]
fn entry_sites_gcc_fentry() {
    let work = Work::new("args-fentry");
    let exe = build(&work, "values", "gcc", &["-pg", "-mfentry"]);
    check(&exe, &work, "fentry");
}

#[test]
fn functions_no_compiler_prepared() {
    let work = Work::new("args-plain");
    let exe = build(&work, "values", "gcc", &[]);
    check(&exe, &work, "plain");
}

#[test]
fn exit_sleds_clang_xray() {
    let work = Work::new("args-xray");
    let exe = build_xray(&work);
    check(&exe, &work, "xray");
}

/// `values.c` built by clang with XRay sleds in every function.
fn build_xray(work: &Work) -> PathBuf {
    build(
        work,
        "values",
        "clang-16",
        &["-fxray-instrument", "-fxray-instruction-threshold=1"],
    )
}

/// A malformed spec is a one-line error naming what is wrong (exit 2, as
/// every bad option); a pattern that matches no function is refused as
/// `-F`'s are (exit 1). Nothing is recorded.
#[test]
fn bad_specs_are_one_line_errors() {
    let work = Work::new("args-bad");
    let exe = build(&work, "values", "gcc", &["-pg", "-mfentry"]);
    let data = work.path("bad.data");
    for (option, spec, code, says) in [
        ("-A", "s32@arg0", 2, "arguments count from 1"),
        ("-A", "s32@arg1/q", 2, "unknown format 'q'"),
        ("-A", "s32@arg1%rzz", 2, "unknown register 'rzz'"),
        ("-A", "s32", 2, "expected FUNCTION@"),
        ("-R", "s32@arg1", 2, "-R takes FUNC@retval"),
        ("-A", "nosuch@arg1", 1, "'nosuch' matches no function"),
    ] {
        let out = fntrace_output(&[
            "record",
            "-o",
            data.to_str().unwrap(),
            option,
            spec,
            exe.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{spec}: {err}");
        assert!(err.contains(says), "{spec}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{spec}: {err}");
        assert!(!data.exists(), "{spec}: a data directory was written");
    }
}

/// `-a`: names and types from DWARF (`programs/args/auto.c`, built `-g`):
/// integers of each width and sign, `bool`, `char`, enums by name (and a
/// value without one as its number), pointers, strings, floats mixed with
/// integers, structs by value (shown `{...}`, and the arguments after one
/// passed on the stack still right), eight arguments; at entry sites and
/// at functions no compiler prepared.
#[test]
fn auto_args_from_dwarf() {
    let work = Work::new("args-auto");
    let names = [
        "ints", "flag", "paint", "unnamed", "name", "mix", "bypair", "bybig", "eight", "nothing",
    ];
    for (label, flags) in [("fentry", &["-pg", "-mfentry"][..]), ("plain", &[][..])] {
        let exe = work.path(&format!("auto-{label}"));
        let src = program("args/auto.c");
        let mut args = vec!["-g", "-O2", &src, "-o", exe.to_str().unwrap()];
        args.extend(flags);
        cc("gcc", &args);
        let alone = run(&mut Command::new(&exe));
        let data = work.path(&format!("auto-{label}.data"));
        let out = fntrace_output(&[
            "record",
            "-o",
            data.to_str().unwrap(),
            "-a",
            "--",
            exe.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), alone, "{label}");
        let replay = replay(&data);
        let shown = recorded(&replay, &names);
        let truth: Vec<&str> = alone.lines().collect();
        assert_same_calls(&shown, &truth, label, &replay);
        // With library calls traced (the default), a libc function without
        // DWARF takes its built-in prototype.
        assert!(replay.contains("puts(\"nothing()\") = 10;"), "{label}\n{replay}");
    }
}

/// Hostile specs: every function's first arguments read as strings and
/// its return value as one (integers, code and stack addresses, NULL,
/// garbage), library calls included: the program prints and exits as it
/// does untraced, and what could not be read is shown as such.
#[test]
fn wrong_specs_never_break_the_program() {
    let work = Work::new("args-hostile");
    let exe = build(&work, "values", "gcc", &[]);
    let alone = run(&mut Command::new(&exe));
    let data = work.path("hostile.data");
    let out = fntrace_output(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "-A",
        "*@arg1/s,arg2/s,arg3/s,arg9/s,fparg1",
        "-R",
        "*@retval/s",
        "--",
        exe.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stable = |s: &str| {
        let mut lines: Vec<String> = s
            .lines()
            .filter(|l| !l.contains("unreadable 0x7"))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(stable(&String::from_utf8_lossy(&out.stdout)), stable(&alone));
    let text = replay(&data);
    assert!(text.contains("<unreadable 0x"), "{text}");
    assert!(text.contains("s32(<unreadable 0x"), "{text}");
}

/// Integer arguments in their registers and integer return values, at
/// entry sites: the fast paths record them (`DATA_REGISTERS` events after
/// the `ENTRY`s and after the `EXIT`s, counted in the thread files), on
/// four threads, and every value equals what the program printed.
#[test]
fn fast_path_integer_values() {
    let work = Work::new("args-fast");
    let exe = build(&work, "values", "gcc", &["-pg", "-mfentry"]);
    // Return values of some (s16 and sumv show theirs without).
    let rets = [
        "s8@retval/i8",
        "s32@retval/i32",
        "s64@retval",
        "octal@retval/o32",
        "letter@retval/c",
        "ptr@retval/p",
        "fib@retval/i32",
    ];
    fast_values(&work, &exe, &rets, 150);
}

/// The same integer arguments in an XRay build (clang's entry and exit
/// sleds): the fast entry that does not hijack the return, closed by the
/// exit sleds' fast path.
#[test]
fn fast_path_integer_arguments_xray() {
    let work = Work::new("args-fast-xray");
    let exe = build_xray(&work);
    fast_values(&work, &exe, &[], 0);
}

/// Records `exe` with integer specs and `rets`, compares every value with
/// what the program printed, and counts the register payloads the fast
/// paths wrote: after more than 200 entries and at least
/// `exits_at_least` exits.
fn fast_values(work: &Work, exe: &Path, rets: &[&str], exits_at_least: usize) {
    let data = work.path("fast.data");
    let specs = [
        "s8@arg1/i8,arg2/u8",
        "s16@arg1/i16,arg2/u16",
        "s32@arg1/i32,arg2/u32",
        "s64@arg1,arg2/u,arg3/x",
        "octal@arg1/o32",
        "letter@arg1/c,arg2/i32",
        "ptr@arg1/p",
        "sumv@arg1/i32,arg2/i32,arg3/i32,arg4/i32",
        "fib@arg1/i32",
    ];
    let mut args = vec!["record", "-o", data.to_str().unwrap()];
    for s in &specs {
        args.extend(["-A", s]);
    }
    for r in rets {
        args.extend(["-R", r]);
    }
    args.extend(["--", exe.to_str().unwrap()]);
    let out = fntrace_output(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let replay = replay(&data);
    let names: Vec<&str> = specs.iter().map(|s| s.split('@').next().unwrap()).collect();
    let with_ret = |name: &str| rets.iter().any(|r| r.split('@').next() == Some(name));
    let mut shown = recorded(&replay, &names);
    let mut truth: Vec<Vec<String>> = printed(&stdout)
        .into_values()
        .map(|calls| {
            calls
                .into_iter()
                .filter(|c| names.iter().any(|n| c.starts_with(&format!("{n}("))))
                .collect()
        })
        .filter(|c: &Vec<String>| !c.is_empty())
        .collect();
    assert_eq!(shown.len(), truth.len(), "{replay}");
    truth.sort();
    shown.sort_by(|a, b| a.first().cmp(&b.first()));
    let mut compared = 0;
    for (calls, want) in shown.iter().zip(&truth) {
        assert_eq!(calls.len(), want.len(), "{calls:#?}\n{want:#?}");
        for (c, w) in calls.iter().zip(want) {
            let (name, mut values) = split_call(w);
            let ret = values.pop().expect("the program prints every result");
            let mut expected = format!("{name}({})", values.join(", "));
            if with_ret(&name) {
                expected = format!("{expected} = {ret}");
            }
            assert!(same_call(c, &expected), "recorded {c}, the program printed {w}");
            compared += 1;
        }
    }
    assert_eq!(compared, 264, "every call of main and the three workers");
    // They came from the fast paths: register payloads after entries and
    // after exits.
    let (mut entries, mut exits) = (0, 0);
    for p in std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .filter(|p| p.path().is_dir())
    {
        for t in std::fs::read_dir(p.path()).unwrap().flatten() {
            if t.path().extension().is_some_and(|e| e == "events") {
                let mut before = None;
                for item in fntrace_format::RawEvents::open(&t.path(), "t", None) {
                    match item {
                        fntrace_format::RawItem::Data { tag, .. }
                            if tag == fntrace_format::event::DATA_REGISTERS =>
                        {
                            match before {
                                Some(fntrace_format::event::Kind::Entry) => entries += 1,
                                Some(fntrace_format::event::Kind::Exit) => exits += 1,
                                _ => {}
                            }
                        }
                        fntrace_format::RawItem::Event { kind, .. } => before = Some(kind),
                        _ => before = None,
                    }
                }
            }
        }
    }
    assert!(
        entries > 200,
        "{entries} calls' arguments recorded by the fast path"
    );
    assert!(
        exits >= exits_at_least,
        "{exits} calls' return values recorded by the fast path"
    );
}

/// The other tracers: the `function` tracer records arguments with its
/// entries (`s32(3, 4) <-main+0x1b`), `--time-filter` return values with
/// its whole calls (`} = 7 /* s32 */`); what each cannot record is a
/// warning on the command line, and the profiler records no values at all.
/// Every value equals what the program printed, thread by thread.
#[test]
fn values_with_other_tracers() {
    let work = Work::new("args-tracers");
    let exe = build(&work, "values", "gcc", &["-pg", "-mfentry"]);
    let exe = exe.to_str().unwrap();
    let names = ["s32", "fib", "str"];
    // The program's calls of `names`, per thread, sorted: `name(args)`
    // and `name = ret`.
    let truth = |stdout: &str, args: bool| -> Vec<Vec<String>> {
        let mut threads: Vec<Vec<String>> = printed(stdout)
            .into_values()
            .map(|calls| {
                let mut calls: Vec<String> = calls
                    .iter()
                    .filter(|c| names.iter().any(|n| c.starts_with(&format!("{n}("))))
                    .map(|c| {
                        let (name, mut values) = split_call(c);
                        let ret = values.pop().unwrap();
                        if args {
                            format!("{name}({})", values.join(", "))
                        } else {
                            format!("{name} = {ret}")
                        }
                    })
                    .collect();
                calls.sort();
                calls
            })
            .filter(|c: &Vec<String>| !c.is_empty())
            .collect();
        threads.sort();
        threads
    };
    let shown = |replay: &str, pick: &dyn Fn(&str) -> Option<String>| -> Vec<Vec<String>> {
        let mut threads: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in replay.lines().filter(|l| !l.starts_with('#')) {
            let tid = line.split(')').next().unwrap().trim().to_string();
            if let Some(call) = pick(line) {
                if names
                    .iter()
                    .any(|n| call.starts_with(&format!("{n}(")) || call.starts_with(&format!("{n} = ")))
                {
                    threads.entry(tid).or_default().push(call);
                }
            }
        }
        let mut threads: Vec<Vec<String>> = threads
            .into_values()
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        threads.sort();
        threads
    };

    // `record OPTIONS -- exe` into `name`, which must succeed and say
    // `warning`: the program's output and the data directory.
    let record = |name: &str, options: &[&str], warning: &str| -> (String, PathBuf) {
        let data = work.path(name);
        let mut args = vec!["record", "-o", data.to_str().unwrap()];
        args.extend(options);
        args.extend(["--", exe]);
        let out = fntrace_output(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains(&format!("warning: {warning}")), "{stderr}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), data)
    };

    let (stdout, data) = record(
        "function.data",
        &[
            "--tracer",
            "function",
            "-A",
            "s32@arg1/i32,arg2/u32",
            "-A",
            "fib@arg1/i32",
            "-A",
            "str@arg1/s,arg2/i32",
            "-R",
            "s32@retval/i32",
        ],
        "the function tracer records entries only",
    );
    let replay = self::replay(&data);
    // ` 1234)   0.012792: s32(3, 4) <-main+0x1b`
    let entries = shown(&replay, &|l| {
        let (_, rest) = l.split_once(": ")?;
        Some(rest.split(" <-").next()?.to_string())
    });
    assert_eq!(entries, truth(&stdout, true), "{replay}");
    assert!(entries.iter().map(Vec::len).sum::<usize>() > 120);

    let (stdout, data) = record(
        "time.data",
        &[
            "-t",
            "1ns",
            "-A",
            "s32@arg1/i32",
            "-R",
            "s32@retval/i32",
            "-R",
            "fib@retval/i32",
            "-R",
            "str@retval/s",
        ],
        "--time-filter records each call whole",
    );
    let replay = self::replay(&data);
    // ` 1234)   0.801 us    |  } = 3 /* s32 */`
    let returns = shown(&replay, &|l| {
        let (_, text) = l.split_once('|')?;
        let (value, name) = text.trim().strip_prefix("} = ")?.split_once(" /* ")?;
        Some(format!("{} = {value}", name.trim_end_matches(" */")))
    });
    assert_eq!(returns, truth(&stdout, false), "{replay}");

    record(
        "profile.data",
        &["--tracer", "profile", "-A", "s32@arg1"],
        "the profile tracer keeps counts and times only",
    );
}

/// `-a` on C++ (`programs/args/cart.cpp`, `g++ -g`): a member function's
/// `this` and reference parameters as addresses, its double, under its
/// demangled name without the parameter list; a free function's reference;
/// `std::string`s by reference, by value and returned, one cut at 128 bytes.
#[test]
fn auto_args_cxx() {
    let work = Work::new("args-cxx");
    let exe = work.path("cart");
    let src = program("args/cart.cpp");
    cc(
        "g++",
        &["-g", "-O2", "-pg", "-mfentry", &src, "-o", exe.to_str().unwrap()],
    );
    let alone = run(&mut Command::new(&exe));
    let data = work.path("cart.data");
    let out = fntrace_output(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "-a",
        "--no-libcall",
        "--",
        exe.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(stdout.lines().count(), alone.lines().count());
    let replay = replay(&data);
    let shown = recorded(&replay, &["shop::Cart::add", "scale", "label"]);
    let truth: Vec<&str> = stdout.lines().collect();
    assert_same_calls(&shown, &truth, "", &replay);
    // The same strings asked for by hand, with uftrace's `S` (arg1 is the
    // address the result is built at: the hidden pointer).
    let data = work.path("label.data");
    let out = fntrace_output(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "--no-libcall",
        "-A",
        "label@arg2/S,arg3/S,arg4/i32",
        "-R",
        "label@retval/S",
        "--",
        exe.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let by_hand = self::replay(&data);
    let shown = recorded(&by_hand, &["label"]);
    let truth: Vec<&str> = stdout.lines().filter(|l| l.starts_with("label(")).collect();
    assert_eq!(truth.len(), 3);
    assert_same_calls(&shown, &truth, "-A ...@arg2/S", &by_hand);
}

/// `-a` on Rust (`programs/args/sum.rs`, `rustc -g -C opt-level=2`):
/// integers, `bool`, `u8`, `f64` and their results, against the program's
/// own output; a function whose convention LLVM changed (`DW_CC_nocall`:
/// an argument and the result dropped) is shown without values, never
/// with what happens to be in the registers.
#[test]
fn auto_args_rust() {
    let work = Work::new("args-rust");
    common::require("rustc");
    let exe = work.path("sum");
    run(Command::new("rustc")
        .args([
            "-g",
            "-C",
            "opt-level=2",
            "--edition=2021",
            "-o",
            exe.to_str().unwrap(),
        ])
        .arg(program("args/sum.rs")));
    let alone = Command::new(&exe).output().unwrap();
    let data = work.path("sum.data");
    let out = fntrace_output(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "-a",
        "--no-libcall",
        "--",
        exe.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), alone.status.code());
    assert_eq!(out.stdout, alone.stdout);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let replay = replay(&data);
    let shown = recorded(&replay, &["sum::add", "sum::flag", "sum::scale", "pick"]);
    let truth: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_same_calls(&shown, &truth, "", &replay);
    assert!(
        replay.contains("sum::ignored() {") || replay.contains("sum::ignored();"),
        "{replay}"
    );
}

/// `report --by-args`: a function recorded with its arguments counts per
/// argument list (`fib(1)`, `fib(2)`, ...), each as often as the program
/// printed that call; without the option, once.
#[test]
fn report_groups_by_argument_values() {
    let work = Work::new("args-report");
    let exe = build(&work, "values", "gcc", &["-pg", "-mfentry"]);
    let data = work.path("report.data");
    let out = fntrace_output(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "-A",
        "fib@arg1/i32",
        "--",
        exe.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut truth: BTreeMap<String, u64> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(call) = line.strip_prefix("T0 fib(") {
            let n = call.split(')').next().unwrap();
            *truth.entry(format!("fib({n})")).or_default() += 1;
        }
    }
    let rows = |extra: &[&str]| -> BTreeMap<String, u64> {
        common::report_calls(&data, extra)
            .into_iter()
            .filter(|(n, _)| n.starts_with("fib"))
            .collect()
    };
    assert_eq!(rows(&["--by-args"]), truth);
    let plain = rows(&[]);
    assert_eq!(plain.get("fib"), Some(&truth.values().sum()));
}
