//! A data directory with nothing to show is the same outcome for every
//! reader (issue 16), as with uftrace: exit status 1 and one line
//! `fntrace: error: DIR: why` — no process recorded, no process readable,
//! no events. A trace of the profile tracer has data for `report`,
//! `graph` and `info`, and nothing to show for the others.

mod common;

use common::readers::{every_reader, Run};
use common::scenarios;
use common::tracedata::DataDir;
use common::Work;

fn all_fail(runs: &[Run], why: &str) {
    for run in runs {
        assert_eq!(run.code(), Some(1), "{:?}: {}", run.args, run.stderr());
        let stderr = run.stderr();
        let last = stderr.lines().last().unwrap_or("");
        assert!(last.contains(why), "{:?}: '{why}' not in {stderr}", run.args);
    }
}

#[test]
fn no_process_recorded() {
    let work = Work::new("no-data-process");
    let d = DataDir::new(&work, "empty.data");
    d.info(&["./prog"], "function_graph", 0, 1000);
    all_fail(
        &every_reader(d.path()),
        "empty.data: no process was recorded (did the runtime load?)",
    );
}

#[test]
fn no_process_readable() {
    let work = Work::new("no-data-unreadable");
    let d = DataDir::new(&work, "unreadable.data");
    d.info(&["./prog"], "function_graph", 0, 1000);
    d.process(1, &["./prog"], "function_graph", &["main"]);
    std::fs::write(d.dir.join("p1/process.json"), "{").unwrap();
    let runs = every_reader(d.path());
    all_fail(&runs, "unreadable.data: no process could be read (1 skipped");
    for run in &runs {
        assert!(
            run.notes().contains("p1/process.json: cannot parse"),
            "{:?}",
            run.args
        );
    }
}

#[test]
fn no_events() {
    let work = Work::new("no-data-events");
    let d = DataDir::new(&work, "noevents.data");
    d.info(&["./prog"], "function_graph", 0, 1000);
    d.process(1, &["./prog"], "function_graph", &["main"]);
    // A process without a thread file, then with an empty one.
    all_fail(&every_reader(d.path()), "noevents.data: the trace has no events");
    d.thread(1, 1, &[]);
    all_fail(&every_reader(d.path()), "noevents.data: the trace has no events");
}

#[test]
fn profile_tracer() {
    let work = Work::new("no-data-profile");
    let d = scenarios::profile(&work);
    for run in every_reader(d.path()) {
        let has_data = ["report", "graph", "info"].contains(&run.args[0].as_str());
        match has_data {
            true => assert_eq!(run.code(), Some(0), "{:?}: {}", run.args, run.stderr()),
            false => {
                assert_eq!(run.code(), Some(1), "{:?}", run.args);
                assert!(run.stderr().contains("profile tracer"), "{:?}", run.args);
            }
        }
    }
}
