//! `fntrace dump --chrome`, `dump --folded` and `fntrace flamegraph` on
//! synthetic data directories: Chrome JSON checked event by event and
//! against `replay` and `report`, folded stacks line by line (self times
//! computed by hand from the scenarios), SVGs for their content, and
//! failures that leave no file behind.

mod common;
mod exports;

use std::collections::BTreeMap;
use std::path::Path;

use common::{assert_fails, fntrace_output, scenarios, Work};
use exports::{chrome, chrome_openings, folded, ok, replay_openings, report};

#[test]
fn chrome_threads_and_processes() {
    let work = Work::new("export-chrome-threads");
    let d = scenarios::threads(&work);
    let (c, err) = chrome(&[d.path()]);
    assert_eq!(err, "");

    // Tracks and their names.
    assert_eq!(c.name_of(100, 0), Some("./prog arg"));
    assert_eq!(c.name_of(200, 0), Some("./prog child"));
    assert_eq!(c.name_of(100, 100), Some("main"));
    assert_eq!(c.name_of(100, 101), Some("101"));
    assert_eq!(c.name_of(200, 200), Some("main"));

    // The calls of each thread, in order and nested, as replay shows them.
    assert_eq!(chrome_openings(&c), replay_openings(d.path()));
    // As many calls per function as report counts; names demangled.
    let calls: BTreeMap<String, u64> = report(d.path())
        .into_iter()
        .map(|(n, (calls, _))| (n, calls))
        .collect();
    assert_eq!(c.calls, calls);
    assert!(c.calls.contains_key("ns::worker(int)"));
    assert!(!c.events.iter().any(|e| e["name"] == "_ZN2ns6workerEi"));
    // The exit of start_routine, whose entry was not recorded, is left out.
    assert!(c.named("start_routine").is_empty());

    // Exact times: microseconds from the process start.
    let main: Vec<(&str, f64)> = c
        .named("main")
        .iter()
        .filter(|e| e["pid"] == 100)
        .map(|e| (e["ph"].as_str().unwrap(), e["ts"].as_f64().unwrap()))
        .collect();
    assert_eq!(main, [("B", 0.0), ("E", 150.0)]);
    let deep = c.named("deep");
    assert_eq!(deep[1]["args"]["unwound"], true, "{:?}", deep);
    assert_eq!(deep[1]["ts"].as_f64(), Some(25.0));
    let leaf_end = c.named("leaf").into_iter().last().unwrap();
    assert_eq!(leaf_end["args"]["unfinished"], true);

    // Lost events and marks are instant events on their thread.
    let lost: Vec<(u64, f64)> = c
        .named("events lost")
        .iter()
        .map(|e| {
            assert_eq!((e["ph"].as_str(), e["tid"].as_u64()), (Some("i"), Some(100)));
            (e["args"]["count"].as_u64().unwrap(), e["ts"].as_f64().unwrap())
        })
        .collect();
    assert_eq!(lost, [(5, 21.0), (0, 21.5), (3, 21.5)]);
    assert_eq!(c.named("events lost")[1]["args"]["chunks_missing"], true);
    assert_eq!(c.named("trace_off")[0]["ts"].as_f64(), Some(27.0));
    assert_eq!(c.named("trace_on").len(), 1);

    let meta = &c.json["metadata"];
    assert_eq!(meta["command"], "./prog arg");
    assert_eq!(meta["argv"], serde_json::json!(["./prog", "arg"]));
    assert_eq!(meta["clock_source"], "monotonic");
    assert_eq!(meta["lost_events"], 8);
    assert_eq!(meta["lost_chunks"], 1);
    assert_eq!(meta["tracer"], "function_graph");
    assert_eq!(meta["fntrace_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(meta["damage"], serde_json::json!([]));
    assert_eq!(meta["exit_lost_calls"], 1);
    let incomplete = meta["incomplete"].as_str().unwrap();
    assert!(
        incomplete.starts_with("the trace is incomplete: 8 of 40 events lost"),
        "{incomplete}"
    );
    let main_end = c
        .named("main")
        .into_iter()
        .find(|e| e["ph"] == "E" && e["pid"] == 100);
    assert_eq!(main_end.unwrap()["args"]["exit_lost"], true);
    assert_eq!(c.json["displayTimeUnit"], "ns");

    // --tid keeps one track.
    let (one, _) = chrome(&[d.path(), "--tid", "101"]);
    assert_eq!(one.openings.keys().collect::<Vec<_>>(), [&(100, 101)]);
    assert_eq!(one.name_of(100, 0), Some("./prog arg"));
    // --no-demangle shows symbols.
    let (raw, _) = chrome(&[d.path(), "--no-demangle"]);
    assert!(raw.calls.contains_key("_ZN2ns6workerEi"));
}

#[test]
fn firefox_keeps_the_selected_threads() {
    let work = Work::new("export-firefox-tid");
    let d = scenarios::threads(&work);
    let tids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["dump", "--firefox", d.path()];
        all.extend(args);
        let (out, _) = ok(&all);
        let profile: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        let threads = profile["threads"].as_array().expect("threads");
        threads
            .iter()
            .map(|t| t["tid"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(tids(&[]), ["100", "101", "200"]);
    assert_eq!(tids(&["--tid", "101"]), ["101"]);
}

#[test]
fn chrome_function_tracer_and_time_filter() {
    let work = Work::new("export-chrome-kinds");
    let d = scenarios::function_tracer(&work);
    let (c, _) = chrome(&[d.path()]);
    let callers: Vec<&str> = c
        .events
        .iter()
        .filter(|e| e["ph"] == "i")
        .map(|e| e["args"]["caller"].as_str().unwrap())
        .collect();
    assert_eq!(callers, ["0x7f1234567890", "main+0x10", "a+0x5", "main+0x20"]);
    let calls: BTreeMap<String, u64> = report(d.path())
        .into_iter()
        .map(|(n, (calls, _))| (n, calls))
        .collect();
    assert_eq!(c.calls, calls);

    // Whole calls (`record -t`) are read back nested (`narrow::nest`):
    // begin/end pairs, the caller around its callees.
    let d = scenarios::time_filter(&work);
    let (c, _) = chrome(&[d.path()]);
    let pairs: Vec<(&str, &str, f64)> = c
        .events
        .iter()
        .filter(|e| e["ph"] == "B" || e["ph"] == "E")
        .map(|e| {
            (
                e["ph"].as_str().unwrap(),
                e["name"].as_str().unwrap(),
                e["ts"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("B", "main", 10.0),
            ("B", "worker", 10.0),
            ("B", "leafy", 10.0),
            ("E", "leafy", 30.0),
            ("E", "worker", 60.0),
            ("B", "leafy", 1485.0),
            ("E", "leafy", 1500.0),
            ("E", "main", 2000.0)
        ]
    );
    let calls: BTreeMap<String, u64> = report(d.path())
        .into_iter()
        .map(|(n, (calls, _))| (n, calls))
        .collect();
    assert_eq!(c.calls, calls);
}

#[test]
fn chrome_truncated_thread() {
    let work = Work::new("export-chrome-truncated");
    let d = scenarios::truncated(&work);
    let (c, err) = chrome(&[d.path()]);
    assert!(
        err.starts_with("fntrace: warning: p500/t500.events: offset "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // Up to the damage (the second chunk, cut short, is refused whole):
    // main and a call of a; main ends unfinished.
    let names: Vec<&str> = c
        .events
        .iter()
        .filter(|e| e["ph"] == "B")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["main", "a"]);
    assert_eq!(c.named("main")[1]["args"]["unfinished"], true);
    let damage = c.json["metadata"]["damage"].as_array().unwrap();
    assert_eq!(damage.len(), 1);
    assert!(err.contains(damage[0].as_str().unwrap()));
}

#[test]
fn folded_stacks() {
    let work = Work::new("export-folded");
    let line = |s: &str, ns: u64| (s.to_string(), ns);
    // main(0..1000) { fact(100..600) { fact { fact { helper } } } fact(700..710) }
    let d = scenarios::recursion(&work);
    assert_eq!(
        folded(&[d.path()]),
        [
            line("main", 490),
            line("main;fact", 210),
            line("main;fact;fact", 200),
            line("main;fact;fact;fact", 80),
            line("main;fact;fact;fact;helper", 20)
        ]
    );
    // Whole calls (--time-filter) nest by time.
    let d = scenarios::time_filter(&work);
    assert_eq!(
        folded(&[d.path()]),
        [
            line("main", 1_925_000),
            line("main;leafy", 15_000),
            line("main;worker", 30_000),
            line("main;worker;leafy", 20_000)
        ]
    );
    // Threads and processes merge; unwound and unfinished calls count up
    // to where they ended.
    let d = scenarios::threads(&work);
    let merged = [
        line("main", 10_100),
        line("main;a", 1510),
        line("main;a;leaf", 490),
        line("main;b", 4500),
        line("main;b;ns::worker(int)", 11_500),
        line("main;child_work", 29_900),
        line("main;jumper", 1500),
        line("main;jumper;deep", 2500),
        line("main;leaf", 100),
        line("ns::worker(int)", 900),
        line("ns::worker(int);leaf", 100),
        line("slow", 2_500_000),
    ];
    assert_eq!(folded(&[d.path()]), merged);
    let per_thread = folded(&[d.path(), "--per-thread"]);
    // p100's main was open when events were lost: no self time.
    assert_eq!(per_thread.len(), 12);
    assert_eq!(per_thread[0], line("T100;main;a", 1510));
    assert_eq!(per_thread[10], line("T200;main", 10_100));
    assert_eq!(
        folded(&[d.path(), "--tid", "200"]),
        [line("main", 10_100), line("main;child_work", 29_900)]
    );
}

#[test]
fn folded_values_add_up_to_report_self_times() {
    let work = Work::new("export-folded-sums");
    for d in [
        scenarios::threads(&work),
        scenarios::recursion(&work),
        scenarios::time_filter(&work),
        scenarios::truncated(&work),
    ] {
        let total: u64 = folded(&[d.path()]).iter().map(|(_, ns)| ns).sum();
        let selfs: u64 = report(d.path()).values().map(|(_, s)| s).sum();
        assert_eq!(total, selfs, "{}", d.path());
        // Per function too: the self time of the innermost frames.
        let mut by_leaf: BTreeMap<String, u64> = BTreeMap::new();
        for (stack, ns) in folded(&[d.path()]) {
            *by_leaf
                .entry(stack.rsplit(';').next().unwrap().to_string())
                .or_default() += ns;
        }
        for (name, (_, self_ns)) in report(d.path()) {
            assert_eq!(by_leaf.get(&name).copied().unwrap_or(0), self_ns, "{name}");
        }
    }
}

/// The frames of an inferno SVG: `(title, x in samples, width)`.
fn frames(svg: &str) -> Vec<(String, u64, u64)> {
    svg.split("<g><title>")
        .skip(1)
        .map(|g| {
            let title = g.split("</title>").next().unwrap().to_string();
            let attr = |name: &str| -> u64 {
                let at = g
                    .find(&format!("{name}=\""))
                    .unwrap_or_else(|| panic!("{name} in {g}"));
                let rest = &g[at + name.len() + 2..];
                rest[..rest.find('"').unwrap()].parse().unwrap()
            };
            (title, attr("fg:x"), attr("fg:w"))
        })
        .collect()
}

fn svg(args: &[&str], out: &Path) -> String {
    let mut all = vec!["flamegraph", "-o", out.to_str().unwrap()];
    all.extend(args);
    let (stdout, _) = ok(&all);
    assert_eq!(stdout, "");
    let text = std::fs::read_to_string(out).unwrap();
    assert!(
        text.starts_with("<?xml") || text.starts_with("<svg"),
        "{}",
        &text[..100]
    );
    assert!(text.trim_end().ends_with("</svg>"));
    text
}

#[test]
fn flame_graphs_and_charts() {
    let work = Work::new("export-flamegraph");
    let d = scenarios::threads(&work);
    let graph = svg(&[d.path()], &work.path("fg.svg"));
    assert!(graph.contains("./prog arg"), "the title is the command line");
    let titles: Vec<String> = frames(&graph).into_iter().map(|f| f.0).collect();
    for name in report(d.path()).keys() {
        assert!(
            titles.iter().any(|t| t.starts_with(&format!("{name} ("))),
            "{name} in {titles:?}"
        );
    }
    assert!(
        titles.contains(&"all (2,563,100 ns, 100%)".to_string()),
        "{titles:?}"
    );
    assert!(
        graph.contains("the trace is incomplete: 8 of 40 events lost"),
        "the losses in the subtitle"
    );

    // A flame chart: one frame per call, in time order, the thread below.
    let d = scenarios::recursion(&work);
    let chart = svg(&[d.path(), "--flamechart"], &work.path("chart.svg"));
    let f = frames(&chart);
    let find = |t: &str| {
        f.iter()
            .find(|x| x.0.starts_with(t))
            .unwrap_or_else(|| panic!("{t} in {f:?}"))
    };
    assert_eq!((find("T600 ").1, find("T600 ").2), (0, 1000));
    assert_eq!((find("main ").1, find("main ").2), (0, 1000));
    assert_eq!((find("fact (500 ns").1, find("fact (10 ns").1), (100, 700));
    assert_eq!(find("helper ").1, 350);
    assert_eq!(f.iter().filter(|x| x.0.starts_with("fact ")).count(), 4);
    // Without -o, the SVG goes to standard output.
    let (stdout, _) = ok(&["flamegraph", "--flamechart", d.path()]);
    assert!(stdout.trim_end().ends_with("</svg>"));
}

#[test]
fn failures_leave_no_file() {
    let work = Work::new("export-failures");
    let out = work.path("out.json");
    let out_s = out.to_str().unwrap();
    let tmp = work.path("out.json.tmp");
    let missing = work.path("missing.data");
    let none = |what: &str| {
        assert!(!out.exists() && !tmp.exists(), "{what}: a file was left");
    };
    for format in ["--chrome", "--folded"] {
        let r = fntrace_output(&["dump", format, "-o", out_s, missing.to_str().unwrap()]);
        assert_fails(&r, 1, "missing.data");
        none(format);
    }
    // A trace without events: the profile tracer.
    let d = scenarios::profile(&work);
    for args in [
        vec!["dump", "--chrome", "-o", out_s, d.path()],
        vec!["dump", "--folded", "-o", out_s, d.path()],
        vec!["flamegraph", "-o", out_s, d.path()],
    ] {
        assert_fails(&fntrace_output(&args), 1, "profile tracer");
        none(args[1]);
    }
    // The function tracer has events but no durations to fold.
    let d = scenarios::function_tracer(&work);
    assert_fails(
        &fntrace_output(&["dump", "--folded", "-o", out_s, d.path()]),
        1,
        "function tracer",
    );
    assert_fails(
        &fntrace_output(&["flamegraph", "-o", out_s, d.path()]),
        1,
        "function tracer",
    );
    none("function tracer");
    // Usage errors.
    let d = scenarios::recursion(&work);
    for args in [
        vec!["dump", d.path()],
        vec!["dump", "--xml", d.path()],
        vec!["dump", "--chrome", "--folded", d.path()],
        vec!["dump", "--chrome", "--per-thread", d.path()],
        vec!["flamegraph", "--flamechart", "--per-thread", d.path()],
    ] {
        let r = fntrace_output(&args);
        assert_fails(&r, 2, "");
    }
    assert_fails(
        &fntrace_output(&["dump", "--chrome", d.path(), "--tid", "9"]),
        1,
        "no thread 9",
    );
    assert_fails(
        &fntrace_output(&[
            "dump",
            "--chrome",
            "-o",
            work.path("no/such/dir/x.json").to_str().unwrap(),
            d.path(),
        ]),
        1,
        "cannot create",
    );

    // Success: the file is there, complete, and no temporary file is left.
    let (stdout, _) = ok(&["dump", "--chrome", "-o", out_s, d.path()]);
    assert_eq!(stdout, "");
    exports::Chrome::parse(&std::fs::read_to_string(&out).unwrap());
    assert!(!tmp.exists());
    // A failure later leaves the good file as it was.
    let before = std::fs::read(&out).unwrap();
    assert_fails(
        &fntrace_output(&["dump", "--chrome", "-o", out_s, missing.to_str().unwrap()]),
        1,
        "",
    );
    assert_eq!(std::fs::read(&out).unwrap(), before);
    assert!(!tmp.exists());
}
