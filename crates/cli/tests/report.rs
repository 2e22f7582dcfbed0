//! `fntrace report` and `fntrace graph` on synthetic data directories:
//! counts and times checked number by number through `--json`, the text
//! forms against `tests/expected/`.

mod common;

use serde_json::Value;

use common::scenarios;
use common::tracedata::expect_file;
use common::{assert_fails, fntrace_ok, fntrace_output, Work};

/// `report --json`: `(name, [calls, total, self, min, max, avg])` rows.
fn report(args: &[&str]) -> Vec<(String, [u64; 6])> {
    let mut all = vec!["report", "--json"];
    all.extend(args);
    let (out, _) = fntrace_ok(&all);
    let json: Value = serde_json::from_str(&out).expect("JSON");
    json.as_array()
        .expect("array")
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
            (
                r["name"].as_str().unwrap().to_string(),
                [
                    n("calls"),
                    n("total_ns"),
                    n("self_ns"),
                    n("min_ns"),
                    n("max_ns"),
                    n("avg_ns"),
                ],
            )
        })
        .collect()
}

fn row<'a>(rows: &'a [(String, [u64; 6])], name: &str) -> &'a [u64; 6] {
    &rows
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} in {rows:?}"))
        .1
}

#[test]
fn nested_calls_and_threads() {
    let work = Work::new("report-threads");
    let d = scenarios::threads(&work);
    let rows = report(&[d.path()]);
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "slow",
            "main",
            "child_work",
            "b",
            "ns::worker(int)",
            "jumper",
            "deep",
            "a",
            "leaf"
        ]
    );
    // main: 40 us in p200; p100's main was open when events were lost
    // (its exit may be among them): counted apart, in no time.
    assert_eq!(row(&rows, "main"), &[1, 40_000, 10_100, 40_000, 40_000, 40_000]);
    let (json, warning) = fntrace_ok(&["report", "--json", d.path()]);
    let json: Value = serde_json::from_str(&json).unwrap();
    let exit_lost: Vec<(&str, u64)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["exit_lost"].as_u64().unwrap()))
        .filter(|&(_, n)| n > 0)
        .collect();
    assert_eq!(exit_lost, [("main", 1)]);
    assert_eq!(
        warning,
        "fntrace: warning: the trace is incomplete: 8 of 40 events lost (20.0%: the buffers \
         were full; a larger --buffer-size avoids it); 1 chunk missing; 1 call whose exit was \
         lost, its time not counted\n"
    );
    assert_eq!(row(&rows, "a"), &[1, 2000, 1510, 2000, 2000, 2000]);
    // The unwound call counts up to its UNWIND; the unfinished leaf (0 ns
    // long, at the end of thread 101) counts too.
    assert_eq!(row(&rows, "deep"), &[1, 2500, 2500, 2500, 2500, 2500]);
    assert_eq!(row(&rows, "leaf"), &[5, 690, 690, 0, 300, 138]);
    assert_eq!(
        row(&rows, "ns::worker(int)"),
        &[2, 12_500, 12_400, 1000, 11_500, 6250]
    );

    let by_calls = report(&["--sort", "calls", d.path()]);
    assert_eq!(by_calls[0].0, "leaf");
    let by_name = report(&["-s", "name", d.path()]);
    assert_eq!(by_name[0].0, "a");
    let by_self = report(&["--sort", "self", d.path()]);
    assert_eq!(by_self[1].0, "child_work");
    // Several keys, the first first (uftrace's -s total,self,call,avg,min,
    // max,func): each order checked against the rows' own numbers
    // ([calls, total, self, min, max, avg]), the last ties by name.
    for (keys, columns) in [
        ("calls,avg", &[(0, true), (5, true)][..]),
        ("call,func", &[(0, true)][..]),
        ("min,max", &[(3, true), (4, true)][..]),
        ("avg", &[(5, true)][..]),
        ("self,total", &[(2, true), (1, true)][..]),
    ] {
        let mut want = rows.clone();
        want.sort_by(|(an, a), (bn, b)| {
            columns
                .iter()
                .map(|&(c, _)| b[c].cmp(&a[c]))
                .fold(std::cmp::Ordering::Equal, std::cmp::Ordering::then)
                .then_with(|| an.cmp(bn))
        });
        let got = report(&["-s", keys, d.path()]);
        assert_eq!(got, want, "-s {keys}");
    }
    assert_ne!(
        report(&["-s", "calls,avg", d.path()]),
        report(&["-s", "calls", "-s", "name", d.path()]),
        "the second key decides ties"
    );

    let tid = report(&["--tid", "101", d.path()]);
    let names: Vec<&str> = tid.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["slow", "ns::worker(int)", "leaf"]);
    let raw = report(&["--no-demangle", "--tid", "101", d.path()]);
    assert_eq!(raw[1].0, "_ZN2ns6workerEi");

    let (text, err) = fntrace_ok(&["report", d.path()]);
    assert_eq!(err, "");
    expect_file("report_threads.txt", &text);
}

#[test]
fn recursion_counts_outermost_calls() {
    let work = Work::new("report-recursion");
    let d = scenarios::recursion(&work);
    let rows = report(&[d.path()]);
    // fact: 100..600 holding 200..500 holding 300..400, then 700..710.
    assert_eq!(row(&rows, "fact"), &[4, 510, 490, 10, 500, 227]);
    assert_eq!(row(&rows, "main"), &[1, 1000, 490, 1000, 1000, 1000]);
    assert_eq!(row(&rows, "helper"), &[1, 20, 20, 20, 20, 20]);
    let (text, _) = fntrace_ok(&["graph", "--gprof", d.path(), "fact"]);
    expect_file("graph_recursion.txt", &text);
}

/// `--avg-self` (uftrace's): the spread of each call's self time. fact's
/// calls keep 200 (100..600 less 200..500), 200 (less 300..400), 80 (less
/// helper's 20) and 10 ns to themselves; main 490.
#[test]
fn spread_of_self_times() {
    let work = Work::new("report-avg-self");
    let d = scenarios::recursion(&work);
    let (out, _) = fntrace_ok(&["report", "--json", d.path()]);
    let json: Value = serde_json::from_str(&out).unwrap();
    let fact = json
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "fact")
        .unwrap();
    assert_eq!(
        (&fact["self_min_ns"], &fact["self_max_ns"], &fact["self_avg_ns"]),
        (&Value::from(10), &Value::from(200), &Value::from(122))
    );
    let (text, _) = fntrace_ok(&["report", "--avg-self", "-s", "min", d.path()]);
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0][5..8], ["Min", "self", "Max"], "{text}");
    let order: Vec<&str> = lines[2..].iter().map(|w| *w.last().unwrap()).collect();
    assert_eq!(order, ["main", "helper", "fact"], "by shortest self time: {text}");
    let fact = lines.iter().find(|w| w.last() == Some(&"fact")).unwrap();
    assert_eq!(
        fact[5..11],
        ["0.010", "us", "0.200", "us", "0.122", "us"],
        "{text}"
    );
    // A profile table keeps no call's self time: no range, said as such.
    let d = scenarios::profile(&work);
    let (text, _) = fntrace_ok(&["report", "--avg-self", d.path()]);
    assert!(
        text.lines()
            .nth(2)
            .is_some_and(|l| l.contains("         -           -")),
        "{text}"
    );
}

#[test]
fn time_filter_calls_nest_by_time() {
    let work = Work::new("report-time-filter");
    let d = scenarios::time_filter(&work);
    let rows = report(&[d.path()]);
    assert_eq!(
        row(&rows, "main"),
        &[1, 1_990_000, 1_925_000, 1_990_000, 1_990_000, 1_990_000]
    );
    assert_eq!(row(&rows, "worker"), &[1, 50_000, 30_000, 50_000, 50_000, 50_000]);
    assert_eq!(row(&rows, "leafy"), &[2, 35_000, 35_000, 15_000, 20_000, 17_500]);
    let (text, _) = fntrace_ok(&["graph", "--gprof", d.path()]);
    expect_file("graph_time_filter.txt", &text);
}

#[test]
fn profile_table() {
    let work = Work::new("report-profile");
    let d = scenarios::profile(&work);
    let rows = report(&[d.path()]);
    assert_eq!(
        rows,
        [
            (
                "main".to_string(),
                [1, 900_000, 100_000, 900_000, 900_000, 900_000]
            ),
            (
                "work".to_string(),
                [4, 800_000, 800_000, 150_000, 250_000, 200_000]
            ),
        ]
    );
}

#[test]
fn function_tracer_counts_calls_and_callers() {
    let work = Work::new("report-function");
    let d = scenarios::function_tracer(&work);
    let rows = report(&[d.path()]);
    assert_eq!(row(&rows, "leaf"), &[2, 0, 0, 0, 0, 0]);
    let (text, _) = fntrace_ok(&["graph", "--gprof", d.path()]);
    expect_file("graph_function.txt", &text);
}

#[test]
fn graph() {
    let work = Work::new("graph-threads");
    let d = scenarios::threads(&work);
    let (text, err) = fntrace_ok(&["graph", "--gprof", d.path()]);
    assert_eq!(err, "");
    expect_file("graph_threads.txt", &text);
    let (one, _) = fntrace_ok(&["graph", "--gprof", d.path(), "ns::*"]);
    let one = one
        .strip_prefix("# the trace is incomplete: ")
        .and_then(|rest| rest.split_once("\n\n"));
    let one = one.expect("the losses first").1;
    assert!(
        one.starts_with("ns::worker(int): 2 calls, total 12.500 us, self 12.400 us\n"),
        "{one}"
    );
    assert_eq!(one.lines().filter(|l| !l.starts_with(' ')).count(), 1, "{one}");
    let out = fntrace_output(&["graph", "--gprof", d.path(), "nothing*"]);
    assert_fails(&out, 1, "no function");
    // --tid (#21): the functions and counts of those threads alone, as
    // `report --tid` counts them.
    let (text, _) = fntrace_ok(&["graph", "--gprof", "--tid", "101", d.path()]);
    let heads: Vec<(String, u64)> = text
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('#') && l.contains(": "))
        .map(|l| {
            let (name, rest) = l.split_once(": ").unwrap();
            (name.to_string(), rest.split(' ').next().unwrap().parse().unwrap())
        })
        .collect();
    let mut want: Vec<(String, u64)> = report(&["--tid", "101", d.path()])
        .into_iter()
        .map(|(n, v)| (n, v[0]))
        .collect();
    let mut got = heads.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{text}");
    let out = fntrace_output(&["graph", "--gprof", "--tid", "999", d.path()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn empty_and_missing() {
    let work = Work::new("report-empty");
    let d = common::tracedata::DataDir::new(&work, "empty.data");
    d.info(&["./prog"], "function_graph", 0, 1000);
    let out = fntrace_output(&["report", d.path()]);
    assert_fails(&out, 1, "no process was recorded");
    let out = fntrace_output(&["report", "--json", d.path()]);
    assert_fails(&out, 1, "no process was recorded");
    let out = fntrace_output(&["report", "/nonexistent/x.data"]);
    assert_fails(&out, 1, "cannot read");
    let out = fntrace_output(&["graph", "/nonexistent/x.data"]);
    assert_fails(&out, 1, "cannot read");
}

/// `report A --diff B`: every function of either recording, with its
/// calls, total and self time in each — the numbers the two reports give
/// on their own, zero where it did not run — the largest change of total
/// time first (of calls with `-s calls`), ties by name.
#[test]
fn diff_of_two_recordings() {
    let work = Work::new("report-diff");
    let a = scenarios::threads(&work);
    let b = scenarios::recursion(&work);
    let (ra, rb) = (report(&[a.path()]), report(&[b.path()]));
    for (keys, column) in [("total", 1), ("calls", 0)] {
        let (json, _) = fntrace_ok(&["report", "--json", "-s", keys, a.path(), "--diff", b.path()]);
        let json: Value = serde_json::from_str(&json).unwrap();
        let rows = json.as_array().unwrap();
        let side = |r: &Value, k: &str| -> [u64; 3] {
            [
                r[k]["calls"].as_u64().unwrap(),
                r[k]["total_ns"].as_u64().unwrap(),
                r[k]["self_ns"].as_u64().unwrap(),
            ]
        };
        let own = |rows: &[(String, [u64; 6])], name: &str| {
            rows.iter()
                .find(|(n, _)| n == name)
                .map_or([0; 3], |(_, v)| [v[0], v[1], v[2]])
        };
        let mut names: Vec<String> = ra.iter().chain(&rb).map(|(n, _)| n.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(rows.len(), names.len(), "one row per function of either");
        let mut changes = Vec::new();
        for r in rows {
            let name = r["name"].as_str().unwrap();
            assert_eq!(side(r, "base"), own(&ra, name), "{name} base");
            assert_eq!(side(r, "new"), own(&rb, name), "{name} new");
            changes.push((
                own(&ra, name)[column].abs_diff(own(&rb, name)[column]),
                name.to_string(),
            ));
        }
        let mut sorted = changes.clone();
        sorted.sort_by(|x, y| y.0.cmp(&x.0).then_with(|| x.1.cmp(&y.1)));
        assert_eq!(changes, sorted, "-s {keys}: the largest change first");
    }
    let (text, _) = fntrace_ok(&["report", a.path(), "--diff", b.path()]);
    assert!(text.lines().next().unwrap().starts_with("# base: "), "{text}");
    assert!(text.contains("Total base") && text.contains("fact"), "{text}");
    let out = fntrace_output(&["report", a.path(), "--diff", "/nonexistent.data"]);
    assert_fails(&out, 1, "/nonexistent.data");
}
