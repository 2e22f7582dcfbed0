//! `fntrace tui` (#21) in a real terminal (tmux): each view shows what the
//! non-interactive reader prints for the same recording — the graph's
//! lines, the report's table, a function's backtraces — and folding,
//! searching, sorting and filtering change it as those readers' options
//! do. The recording is of `filters.c`, whose call tree its source makes
//! (main { outer { inner { leaf leaf } leaf } slow { nap leaf } stop
//! outer {...} }): `graph_call_tree` (e2e.rs) checks `graph` against it.

mod common;

use std::path::Path;

use common::procs::{have, runtime, text};
use common::styles::Style;
use common::terminal::Terminal;
use common::tracedata::{dropped_in_a_loop, LOST_IN_A_LOOP};
use common::{fntrace_output, programs, Work};

/// The graph's title line, above its rows.
const TITLE: &str = "# TOTAL TIME   FUNCTION";

/// `filters` built with fentry sites and recorded; `None` (said) where
/// tmux or the compiler is missing.
fn recorded(name: &str) -> Option<(Work, String)> {
    if !have("tmux") {
        common::skip(name, "tmux is not installed");
        return None;
    }
    let work = Work::new(name);
    let source = programs().join("e2e/filters.c");
    let exe = Style::Fentry.build(&source, &work.path("filters"), false, &["-O0"])?;
    runtime();
    let data = work.path("trace.data").display().to_string();
    let exe = exe.display().to_string();
    let out = fntrace_output(&["record", "--no-libcall", "-o", &data, "--", &exe]);
    assert!(out.status.success(), "record: {}", text(&out.stderr));
    Some((work, data))
}

/// What a reader prints (it must succeed).
fn reader(args: &[&str]) -> String {
    let out = fntrace_output(args);
    assert!(out.status.success(), "fntrace {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// The lines of a graph after its title, without the blank lines between
/// branches, as the browser shows them.
fn graph_rows(printed: &str) -> Vec<String> {
    let lines = printed.lines().skip_while(|l| *l != TITLE).skip(1);
    lines
        .filter(|l| !l.split(" : ").next().unwrap_or("").trim().is_empty())
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// The rows of the screen between the line `after` and the status line,
/// blank ones left out.
fn rows(screen: &[String], after: &str) -> Vec<String> {
    let status = screen.iter().rposition(|l| !l.is_empty()).unwrap();
    let start = screen.iter().position(|l| l == after).expect("the title line") + 1;
    screen[start..status]
        .iter()
        .filter(|l| !l.is_empty())
        .cloned()
        .collect()
}

/// A graph's rows without their fold marks, and the marks.
fn unmarked(rows: &[String]) -> (Vec<String>, String) {
    let marks = rows.iter().map(|r| r.chars().next().unwrap()).collect();
    (rows.iter().map(|r| r[1..].to_string()).collect(), marks)
}

/// The function of a graph row (`... : +-(2) outer`).
fn function(row: &str) -> &str {
    row.rsplit(") ").next().unwrap()
}

fn start(work: &Work, data: &str, name: &str) -> Terminal {
    let exe = env!("CARGO_BIN_EXE_fntrace");
    Terminal::start(name, &work.dir, &format!("{exe} tui {data}"), 150, 60)
}

/// The call graph (G): the rows are `graph`'s, marked `-` where callees
/// are shown and ` ` at leaves; folding `outer` hides its callees, marks
/// it `+`, and unfolds again; a search for a function under a folded one
/// unfolds the way to it; `C` folds everything under main.
#[test]
fn tui_graph_folds_and_searches() {
    let Some((work, data)) = recorded("tui-graph") else {
        return;
    };
    let graph = graph_rows(&reader(&["graph", &data]));
    assert_eq!(graph.len(), 10, "graph of filters:\n{}", graph.join("\n"));
    let term = start(&work, &data, "graph");
    let screen = term.wait_status("1/10 filters");
    let (shown, marks) = unmarked(&rows(&screen, TITLE));
    assert_eq!(shown, graph, "the graph view against graph");
    // filters, main, outer, inner, slow have callees; leaf, nap, stop do
    // not.
    assert_eq!(marks, "----  -   ");

    // Fold outer (the third row): its three callees' rows go.
    term.keys(&["Down", "Down", "Enter"]);
    let screen = term.wait_status("3/7 outer");
    let (shown, marks) = unmarked(&rows(&screen, TITLE));
    let mut folded = graph.clone();
    folded.drain(3..6);
    assert_eq!(shown, folded, "outer folded");
    assert_eq!(&marks[..3], "--+");
    term.keys(&["Enter"]);
    term.wait_status("3/10 outer");

    // Folded again, then a search for inner: the way to it unfolds.
    term.keys(&["Left"]);
    term.wait_status("3/7 outer");
    term.keys(&["/"]);
    term.type_text("inn");
    term.keys(&["Enter"]);
    let screen = term.wait_status("4/10 inner");
    assert_eq!(unmarked(&rows(&screen, TITLE)).0, graph);
    // The next match of a pattern: leaf under inner, then under outer.
    term.keys(&["/"]);
    term.type_text("l*f");
    term.keys(&["Enter"]);
    term.wait_status("5/10 leaf");
    term.keys(&["n"]);
    term.wait_status("6/10 leaf");
    term.keys(&["N"]);
    term.wait_status("5/10 leaf");
    term.keys(&["u"]);
    term.wait_status("4/10 inner");

    // Everything main calls folded: main's callees are left.
    term.keys(&["C", "Home"]);
    let screen = term.wait_status("1/5 filters");
    let folded = rows(&screen, TITLE);
    let names: Vec<&str> = folded.iter().map(|r| function(r)).collect();
    assert_eq!(names, ["filters", "main", "outer", "slow", "stop"]);
    term.keys(&["E"]);
    term.wait_status("1/10 filters");

    term.keys(&["q"]);
    let (status, _) = term.wait_exit();
    assert_eq!(status, 0, "tui's exit status");
}

/// The report (R) is `report`'s table, sorted as `report -s KEY` sorts it
/// as `s` steps through the keys; `g` on a function shows `graph DATA
/// FUNC`: every backtrace that reached it, then its graph.
#[test]
fn tui_report_sorts_and_graphs_a_function() {
    let Some((work, data)) = recorded("tui-report") else {
        return;
    };
    let term = start(&work, &data, "report");
    term.wait_status("1/10 filters");
    term.keys(&["R"]);
    for (i, key) in ["total", "self", "calls", "avg", "min", "max", "name"]
        .iter()
        .enumerate()
    {
        if i > 0 {
            term.keys(&["s"]);
        }
        let screen = term.wait(&format!("the report by {key}"), |s| {
            s[0].contains(&format!("Report, by {key}"))
        });
        let printed = reader(&["report", "-s", key, &data]);
        let table: Vec<&str> = printed.lines().map(str::trim_end).collect();
        let header = screen
            .iter()
            .position(|l| l.trim_end() == table[0])
            .expect("the table's titles");
        let shown: Vec<&str> = screen[header..header + table.len()]
            .iter()
            .map(|l| l.as_str())
            .collect();
        assert_eq!(shown, table, "the report view by {key} against report -s {key}");
    }

    // By name: leaf is the fourth function (inner, leaf, main, nap...).
    term.keys(&["/"]);
    term.type_text("leaf");
    term.keys(&["Enter"]);
    term.wait_status("leaf");
    term.keys(&["g"]);
    let screen = term.wait("the graph of leaf", |s| s[0].contains("Graph of leaf"));
    let printed = reader(&["graph", &data, "leaf"]);
    let expected: Vec<&str> = printed
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    let status = screen.iter().rposition(|l| !l.is_empty()).unwrap();
    let shown: Vec<String> = screen[1..status]
        .iter()
        .filter(|l| !l.is_empty())
        // The graph's row carries a fold mark.
        .map(|l| match l.contains(" : ") {
            true => l[1..].to_string(),
            false => l.clone(),
        })
        .collect();
    assert_eq!(shown, expected, "g on leaf against graph DATA leaf");
    // The cursor is on leaf itself, the last row, under its backtraces.
    let n = printed.lines().count();
    term.wait_status(&format!("{n}/{n} leaf"));
    // Escape and q apart: together they are Alt-q.
    term.keys(&["Escape"]);
    term.wait("the report again", |s| s[0].ends_with("· Report, by name"));
    term.keys(&["q"]);
    assert_eq!(term.wait_exit().0, 0);
}

/// Filters typed at `f` are the readers' options: the views become those
/// of `graph -F inner` and `report -F inner`; a pattern that matches
/// nothing is refused on the status line and changes nothing.
#[test]
fn tui_filters_as_the_readers() {
    let Some((work, data)) = recorded("tui-filters") else {
        return;
    };
    let term = start(&work, &data, "filters");
    term.wait_status("1/10 filters");
    term.keys(&["f"]);
    term.type_text("-F inner -N nosuch");
    term.keys(&["Enter"]);
    let screen = term.wait_status("matches no function");
    assert_eq!(rows(&screen, TITLE).len(), 10, "a wrong filter changes nothing");

    term.keys(&["f"]);
    term.wait_status("filters: -F inner -N nosuch");
    for _ in 0.." -N nosuch".len() {
        term.keys(&["BSpace"]);
    }
    term.keys(&["Enter"]);
    let screen = term.wait_status("filters applied");
    assert!(screen[0].contains("filters: -F inner"), "{}", screen[0]);
    let expected = graph_rows(&reader(&["graph", "-F", "inner", &data]));
    assert_eq!(unmarked(&rows(&screen, TITLE)).0, expected);

    term.keys(&["R"]);
    let printed = reader(&["report", "-F", "inner", &data]);
    let table: Vec<&str> = printed.lines().map(str::trim_end).collect();
    let screen = term.wait("the filtered report", |s| s.iter().any(|l| l == table[2]));
    let header = screen.iter().position(|l| l == table[0]).unwrap();
    assert_eq!(&screen[header..header + table.len()], table.as_slice());
    term.keys(&["q"]);
    assert_eq!(term.wait_exit().0, 0);
}

/// Without a terminal, tui says it needs one (exit 1), and writes nothing
/// to its output; a data directory that does not exist is an error of one
/// line, in a terminal too.
#[test]
fn tui_needs_a_terminal_and_a_recording() {
    let Some((work, data)) = recorded("tui-errors") else {
        return;
    };
    let out = fntrace_output(&["tui", &data]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(err.contains("needs a terminal"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let exe = env!("CARGO_BIN_EXE_fntrace");
    let missing = Path::new(&work.dir).join("missing.data");
    let command = format!("{exe} tui {}", missing.display());
    let term = Terminal::start("missing", &work.dir, &command, 150, 20);
    let (status, screen) = term.wait_exit();
    assert_eq!(status, 1, "{}", screen.join("\n"));
    let said: Vec<&String> = screen.iter().filter(|l| l.starts_with("fntrace:")).collect();
    assert_eq!(said.len(), 1, "{}", screen.join("\n"));
    assert!(said[0].contains("missing.data"), "{}", said[0]);
}

/// What the trace lost is said above every view, as every reader says it
/// (`losses.rs`): on a recording whose buffers were full, the graph, the
/// report and a function's graph all start with it.
#[test]
fn tui_says_what_was_lost() {
    if !have("tmux") {
        return common::skip("tui_says_what_was_lost", "tmux is not installed");
    }
    let work = Work::new("tui-losses");
    let d = dropped_in_a_loop(&work);
    let said = format!("# {LOST_IN_A_LOOP}; 3 calls whose exit was lost, their times not counted");
    let exe = env!("CARGO_BIN_EXE_fntrace");
    // Wide enough for the whole line.
    let term = Terminal::start("losses", &work.dir, &format!("{exe} tui {}", d.path()), 250, 30);
    let screen = term.wait_status("1/");
    assert_eq!(screen[1], said, "the graph view");
    term.keys(&["R"]);
    let screen = term.wait("the report", |s| s[0].contains("Report"));
    assert_eq!(screen[1], said, "the report view");
    term.keys(&["g"]);
    let screen = term.wait("a function's graph", |s| s[0].contains("Graph of"));
    assert_eq!(screen[1], said, "a function's graph");
    term.keys(&["q"]);
    term.wait("the report again", |s| s[0].contains("Report"));
    term.keys(&["q"]);
    assert_eq!(term.wait_exit().0, 0);
}
