//! When a reader has nothing to show, every reader (`replay`, `report`,
//! `graph`, `info`, `dump`, `flamegraph`) ends the same way, as uftrace
//! does when there is no data: one line `fntrace: error: DIR: why` and exit
//! status 1 (`info` prints what it found first). Nothing to show is: no
//! process recorded, none readable, no events — or, for `report`, `graph`
//! and `info`, neither events nor a profile table. `live` prints the reason
//! as a warning and still exits with the command's status.

use std::path::Path;

use fntrace_format::read::Trace;

/// The error of a reader with nothing to show: the reason, one line.
#[derive(Debug)]
pub struct NothingToShow(pub String);

impl std::fmt::Display for NothingToShow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NothingToShow {}

/// Fails with [`NothingToShow`] and `reason`.
pub fn fail<T>(reason: String) -> anyhow::Result<T> {
    Err(NothingToShow(reason).into())
}

/// Why a trace has no events: no process, none readable, only profile
/// tables, or no events at all.
pub fn no_events(trace: &Trace, dir: &Path) -> String {
    let dir = dir.display();
    if trace.processes.is_empty() && trace.skipped > 0 {
        return format!(
            "{dir}: no process could be read ({} skipped, see the warnings above)",
            trace.skipped
        );
    }
    if trace.processes.is_empty() {
        return format!("{dir}: no process was recorded (did the runtime load?)");
    }
    if trace.processes.iter().all(|p| p.profile.is_some()) {
        return format!(
            "{dir}: recorded with the profile tracer, which keeps no events; see 'fntrace report'"
        );
    }
    format!("{dir}: the trace has no events")
}

/// Why `report` and `graph` find no function: no process, or neither
/// events nor a profile table, or no call among the `events` read.
pub fn no_calls(trace: &Trace, dir: &Path, events: u64) -> String {
    let profiles = trace.processes.iter().any(|p| p.profile.is_some());
    if trace.processes.is_empty() || (events == 0 && !profiles) {
        return no_events(trace, dir);
    }
    format!("{}: no function was called in the trace", dir.display())
}

/// Why an export gives no output: no events, or no call with a duration
/// (folded stacks, flame graphs).
pub fn no_durations(trace: &Trace, dir: &Path, events: u64) -> String {
    if events == 0 {
        return no_events(trace, dir);
    }
    let function_tracer = trace.processes.iter().all(|p| p.info.tracer == "function");
    if function_tracer {
        format!(
            "{}: recorded with the function tracer, which records entries without durations; see 'fntrace dump --chrome'",
            dir.display()
        )
    } else {
        format!("{}: no call in the trace lasted any time", dir.display())
    }
}
