//! `fntrace replay` on synthetic data directories: the function_graph
//! layout, threads merged by time, filters, lost and unwound calls, the
//! function tracer, `--time-filter` calls and damaged files. Expected
//! outputs are in `tests/expected/` (`FNTRACE_BLESS=1` rewrites them).

mod common;

use common::scenarios;
use common::tracedata::expect_file;
use common::{assert_fails, fntrace_ok, fntrace_output, Work};

/// The graph part of each line of `replay ARGS DIR` (after its `|`).
fn graph_lines(dir: &str, args: &[&str]) -> Vec<String> {
    let mut all = args.to_vec();
    all.push(dir);
    let (out, _) = replay(&all);
    out.lines()
        .skip(1)
        .map(|l| l.split_once('|').unwrap().1.trim_end().to_string())
        .collect()
}

/// `fntrace replay ARGS...`: must succeed; returns stdout and stderr.
fn replay(args: &[&str]) -> (String, String) {
    let mut all = vec!["replay", "--color", "never"];
    all.extend(args);
    fntrace_ok(&all)
}

#[test]
fn threads_and_processes() {
    let work = Work::new("replay-threads");
    let d = scenarios::threads(&work);
    let (out, err) = replay(&[d.path()]);
    assert_eq!(err, "");
    expect_file("replay_threads.txt", &out);
}

#[test]
fn filters() {
    let work = Work::new("replay-filters");
    let d = scenarios::threads(&work);
    let (out, _) = replay(&[d.path(), "-F", "main", "-N", "ns::worker"]);
    expect_file("replay_filter.txt", &out);
    let (out, _) = replay(&[d.path(), "-N", "a", "-N", "jumper", "--tid", "100"]);
    expect_file("replay_notrace.txt", &out);
    let (out, _) = replay(&[d.path(), "--tid", "101", "--no-demangle"]);
    expect_file("replay_tid.txt", &out);
}

#[test]
fn colour() {
    let work = Work::new("replay-colour");
    let d = scenarios::threads(&work);
    let out = fntrace_output(&["replay", "--color", "always", d.path(), "--tid", "101"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\x1b[31m# 2500.000 us \x1b[0m|  slow();"), "{text}");
    let (plain, _) = replay(&[d.path()]);
    assert!(!plain.contains('\x1b'));
}

#[test]
fn function_tracer() {
    let work = Work::new("replay-function");
    let d = scenarios::function_tracer(&work);
    let (out, err) = replay(&[d.path()]);
    assert_eq!(err, "");
    expect_file("replay_function.txt", &out);
}

#[test]
fn time_filter() {
    let work = Work::new("replay-time-filter");
    let d = scenarios::time_filter(&work);
    let (out, _) = replay(&[d.path()]);
    expect_file("replay_time_filter.txt", &out);
}

#[test]
fn truncated_thread_file() {
    let work = Work::new("replay-truncated");
    let d = scenarios::truncated(&work);
    let (out, err) = replay(&[d.path()]);
    expect_file("replay_truncated.txt", &out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("fntrace: warning: p500/t500.events: offset "),
        "{err}"
    );
}

#[test]
fn profile_trace_has_nothing_to_replay() {
    let work = Work::new("replay-profile");
    let d = scenarios::profile(&work);
    let out = fntrace_output(&["replay", d.path()]);
    assert_fails(&out, 1, "profile tracer");
}

#[test]
fn empty_trace_says_so() {
    let work = Work::new("replay-empty");
    let d = common::tracedata::DataDir::new(&work, "empty.data");
    d.info(&["./prog"], "function_graph", 0, 1000);
    let out = fntrace_output(&["replay", d.path()]);
    assert_fails(&out, 1, "no process was recorded");

    d.process(1, &["./prog"], "function_graph", &["main"]);
    d.thread(1, 1, &[]);
    let out = fntrace_output(&["replay", d.path()]);
    assert_fails(&out, 1, "has no events");
}

#[test]
fn errors() {
    let work = Work::new("replay-errors");
    let out = fntrace_output(&["replay", "/nonexistent/fntrace.data"]);
    assert_fails(&out, 1, "/nonexistent/fntrace.data: cannot read");
    let empty = work.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = fntrace_output(&["replay", empty.to_str().unwrap()]);
    assert_fails(&out, 1, "not a fntrace data directory");
    let d = scenarios::threads(&work);
    let out = fntrace_output(&["replay", "--tid", "999", d.path()]);
    assert_fails(&out, 1, "no thread 999 in the trace");
    let out = fntrace_output(&["report", "--tid", "999", d.path()]);
    assert_fails(&out, 1, "no thread 999 in the trace");
    let out = fntrace_output(&["replay", "-F", "[", empty.to_str().unwrap()]);
    assert_fails(&out, 2, "bad filter pattern");
}

/// `-f` (uftrace's output fields), one column at a time, on the recursion
/// scenario whose every event time is known: main at T0, fact at +100,
/// +200, +300, helper +350..+370, the facts end at +400, +500, +600, a
/// leaf fact +700..+710, main ends at +1000 (ns). `time` is the event's
/// (a call's start on its opening line and a leaf, its end on a closing
/// line), `elapsed` counts from the process start (T0), `delta` from the
/// thread's previous line, `addr` is the function's; the default columns
/// stay `tid,duration`.
#[test]
fn output_fields() {
    use common::tracedata::{address, T0};
    let work = Work::new("replay-fields");
    let d = scenarios::recursion(&work);
    let at = [0u64, 100, 200, 300, 350, 400, 500, 600, 700, 1000];
    let fids = [0u32, 1, 1, 1, 2, 1, 1, 1, 1, 0];
    let us = |ns: u64| format!("{}.{:03} us", ns / 1000, ns % 1000);
    let column = |field: &str| -> (Vec<String>, Vec<String>) {
        let (out, _) = replay(&["-f", field, d.path()]);
        let mut lines = out.lines();
        let header = lines.next().unwrap();
        assert!(
            header.starts_with('#') && header.ends_with("FUNCTION"),
            "{header}"
        );
        // A column keeps its width: every `|` where FUNCTION's text starts.
        let text_at = header.len() - "FUNCTION".len();
        assert!(
            out.lines().skip(1).all(|l| l.find('|') == Some(text_at - 3)),
            "-f {field}:\n{out}"
        );
        lines
            .map(|l| {
                let (left, text) = l.split_once('|').unwrap();
                (left.trim().to_string(), text.trim().to_string())
            })
            .unzip()
    };
    let (_, texts) = column("tid,duration");
    let (default, _) = replay(&[d.path()]);
    let (both, _) = replay(&["-f", "tid,duration", d.path()]);
    assert_eq!(both, default, "tid,duration is the default");
    let expected: [(&str, Vec<String>); 4] = [
        (
            "time",
            at.iter()
                .map(|k| format!("{}.{:09}", (T0 + k) / 1_000_000_000, (T0 + k) % 1_000_000_000))
                .collect(),
        ),
        ("elapsed", at.iter().map(|&k| us(k)).collect()),
        (
            "delta",
            std::iter::once(String::new())
                .chain(at.windows(2).map(|w| us(w[1] - w[0])))
                .collect(),
        ),
        (
            "addr",
            fids.iter().map(|&f| format!("{:#x}", address(f))).collect(),
        ),
    ];
    for (field, want) in expected {
        let (got, text) = column(field);
        assert_eq!(got, want, "-f {field}");
        assert_eq!(text, texts, "-f {field}: the same lines");
    }
    let out = fntrace_output(&["replay", "-f", "time,nope", d.path()]);
    assert_eq!(out.status.code(), Some(2));
}

/// `-r START~STOP`: the calls that began in the range, by elapsed time
/// (units) or by timestamp (as `-f time` shows them), on the recursion
/// scenario: 250..650 ns holds the innermost fact (300..400) and its
/// helper (350..370); the calls around them began before, the leaf fact
/// (700) after. A call shown is shown whole (its closing line too, whenever
/// it comes). Either end may be left out.
#[test]
fn time_range() {
    let work = Work::new("replay-range");
    let d = scenarios::recursion(&work);
    let texts = |range: &str| -> Vec<String> {
        let (out, _) = replay(&["-r", range, d.path()]);
        out.lines()
            .skip(1)
            .map(|l| l.split_once('|').unwrap().1.trim().to_string())
            .collect()
    };
    let inner = ["fact() {", "helper();", "} /* fact */"];
    assert_eq!(texts("250ns~650ns"), inner);
    assert_eq!(texts("5.00000025~5.00000065"), inner);
    // A call shown is shown whole: main began in `~50ns`, its end too;
    // none of its callees did, so it is one line (as uftrace shows it).
    assert_eq!(texts("650ns~"), ["fact();"]);
    assert_eq!(texts("~50ns"), ["main();"]);
    let out = fntrace_output(&["replay", "-r", "30ms~20ms", d.path()]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `-H` (uftrace's `--hide`) hides a function but not what it calls, which
/// moves up in its place; `-N` hides both. On the recursion scenario:
/// hiding every `fact` leaves main calling helper.
#[test]
fn hide_a_function_not_its_callees() {
    let work = Work::new("replay-hide");
    let d = scenarios::recursion(&work);
    let lines = |args: &[&str]| graph_lines(d.path(), args);
    assert_eq!(
        lines(&["-H", "fact"]),
        ["  main() {", "    helper();", "  } /* main */"]
    );
    // A call whose callees are all hidden is one line, as uftrace's
    // `replay -N b` shows `a();`.
    assert_eq!(lines(&["-N", "fact"]), ["  main();"]);
    let all = lines(&[]);
    let without_helper: Vec<String> = all.iter().filter(|l| !l.contains("helper")).cloned().collect();
    // The innermost fact called only helper: it is a leaf now.
    let mut expected = without_helper.clone();
    let at = expected.iter().position(|l| l.trim() == "} /* fact */").unwrap();
    assert_eq!(expected[at - 1].trim(), "fact() {");
    expected[at - 1] = expected[at - 1].replace("fact() {", "fact();");
    expected.remove(at);
    assert_eq!(lines(&["-H", "helper"]), expected);
    let out = fntrace_output(&["replay", "-H", "nosuch", d.path()]);
    assert_fails(&out, 1, "-H 'nosuch' matches no function");
}

/// `-C` (uftrace's `--caller-filter`): the calls of a function, as leaves
/// (what they call hidden), and the calls that led to them; the others
/// not at all. On the recursion scenario, helper is called only from the
/// innermost fact: its three facts and main are shown, the leaf fact
/// (700) is not.
#[test]
fn caller_filter_shows_how_a_function_was_reached() {
    let work = Work::new("replay-callers");
    let d = scenarios::recursion(&work);
    let lines = |args: &[&str]| graph_lines(d.path(), args);
    assert_eq!(
        lines(&["-C", "helper"]),
        [
            "  main() {",
            "    fact() {",
            "      fact() {",
            "        fact() {",
            "          helper();",
            "        } /* fact */",
            "      } /* fact */",
            "    } /* fact */",
            "  } /* main */",
        ]
    );
    // fact's every call, as a leaf (the nested ones are its callees, hidden).
    assert_eq!(
        lines(&["-C", "fact"]),
        ["  main() {", "    fact();", "    fact();", "  } /* main */"]
    );
    let out = fntrace_output(&["replay", "-C", "nosuch", d.path()]);
    assert_fails(&out, 1, "-C 'nosuch' matches no function");
}

/// `--column-view` (uftrace's): each thread's lines start `--column-offset`
/// levels (two spaces each) to the right of the previous thread's, the
/// threads in the order they first print; nothing else changes.
#[test]
fn column_view() {
    let work = Work::new("replay-columns");
    let d = scenarios::threads(&work);
    let (plain, _) = replay(&[d.path(), "--tid", "100", "--tid", "101"]);
    let (columns, _) = replay(&[
        d.path(),
        "--tid",
        "100",
        "--tid",
        "101",
        "--column-view",
        "--column-offset",
        "3",
    ]);
    let lines = |text: &str| -> Vec<(String, String)> {
        text.lines()
            .filter_map(|l| {
                let (tid, rest) = l.split_once(')')?;
                let (_, body) = rest.split_once('|')?;
                Some((tid.trim().to_string(), body.to_string()))
            })
            .collect()
    };
    let (plain, columns) = (lines(&plain), lines(&columns));
    assert_eq!(plain.len(), columns.len());
    let mut shift = std::collections::BTreeMap::new();
    for ((tid, a), (tid2, b)) in plain.iter().zip(&columns) {
        assert_eq!(tid, tid2);
        assert_eq!(a.trim_start(), b.trim_start(), "only the indentation changes");
        let extra = b.len() - b.trim_start().len() - (a.len() - a.trim_start().len());
        assert_eq!(
            *shift.entry(tid.clone()).or_insert(extra),
            extra,
            "{tid}: one column"
        );
    }
    let first = &plain[0].0;
    let expected: std::collections::BTreeMap<String, usize> = plain
        .iter()
        .map(|(t, _)| (t.clone(), if t == first { 0 } else { 6 }))
        .collect();
    assert_eq!(shift, expected);
}
