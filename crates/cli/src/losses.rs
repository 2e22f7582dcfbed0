//! The one line every reader states when a trace is incomplete, in its
//! header (`replay`, `report`, `graph`), its metadata (`dump --chrome`,
//! `--perfetto`, `--firefox`), its subtitle (`flamegraph`), `info`, or on
//! stderr where a format has no room for it (`dump --folded`, `report
//! --json`): how many events were lost, what fraction, why, and what
//! avoids it (`docs/FORMAT.md`, "Losses").

use fntrace_format::meta::RunInfo;
use fntrace_format::read::{Losses, Process, Trace};

/// `Some("the trace is incomplete: ...")`, or `None` when nothing was lost.
/// `exit_lost`: the calls whose exit was lost, when the reader counted
/// them.
pub fn summary(losses: &Losses, trace: &Trace, exit_lost: Option<u64>) -> Option<String> {
    if losses.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if losses.lost > 0 {
        let mut why = Vec::new();
        if losses.dropped > 0 {
            why.push(format!(
                "the buffers were full; a larger --buffer-size{} avoids it",
                if lossy(trace.info.as_ref()) {
                    ", or recording without --lossy,"
                } else {
                    ""
                }
            ));
        }
        if !losses.write_errors.is_empty() {
            why.push(format!(
                "{}; room on the disk avoids it",
                losses.write_errors.join("; ")
            ));
        }
        if losses.unwritten > 0 {
            why.push(format!(
                "{} reserved and never written by a signal handler",
                losses.unwritten
            ));
        }
        if why.is_empty() {
            why.push("counted by the runtime".into());
        }
        parts.push(format!(
            "{} of {} events lost ({}: {})",
            losses.lost,
            losses.events + losses.lost,
            percent(losses.lost_fraction()),
            why.join("; ")
        ));
    } else if !losses.write_errors.is_empty() {
        parts.push(losses.write_errors.join("; "));
    }
    if losses.missing_chunks > 0 {
        parts.push(count(losses.missing_chunks, "chunk missing", "chunks missing"));
    }
    if losses.flight_chunks > 0 {
        parts.push(format!(
            "{} by the flight recorder (recording without the flight recorder keeps them)",
            count(
                losses.flight_chunks,
                "older chunk not kept",
                "older chunks not kept"
            )
        ));
    }
    if losses.untraced > 0 {
        parts.push(format!(
            "{} ({} of the calls: nested deeper than {} calls, or made by signal handlers that interrupted the tracer or by a library traced whole for the tracer itself)",
            count(losses.untraced, "call not traced", "calls not traced"),
            percent(losses.untraced_fraction()),
            fntrace_format::limits::MAX_NESTING
        ));
    }
    if let Some(n) = exit_lost.filter(|&n| n > 0) {
        parts.push(count(
            n,
            "call whose exit was lost, its time not counted",
            "calls whose exit was lost, their times not counted",
        ));
    }
    Some(format!("the trace is incomplete: {}", parts.join("; ")))
}

/// `N thing` or `N things`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Whether the run asked for a lossy recording (`options.lossy`).
fn lossy(info: Option<&RunInfo>) -> bool {
    info.and_then(|i| i.options.get("lossy"))
        .is_some_and(|v| v.as_bool() == Some(true))
}

/// A share as a percentage: `12.5%`, `0.03%`, `<0.01%`.
pub fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p > 0.0 && p < 0.01 {
        "<0.01%".into()
    } else if p >= 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.2}%")
    }
}

/// The losses of the threads `selected` (`trace::select`): one pass over
/// their events, for readers that state them before reading (`replay`).
pub fn scan(selected: &[(&Process, Vec<u32>)]) -> Losses {
    let mut all = Losses::new();
    for (process, tids) in selected {
        all.merge(Losses::scan(process, tids));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        assert_eq!(percent(0.0), "0.00%");
        assert_eq!(percent(0.00001), "<0.01%");
        assert_eq!(percent(0.0123), "1.23%");
        assert_eq!(percent(0.5), "50.0%");
        assert_eq!(percent(1.0), "100.0%");
    }
}
