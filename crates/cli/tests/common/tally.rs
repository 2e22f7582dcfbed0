//! What a data directory holds, counted from its events with the format
//! crate's reader (an independent reading of what `report` shows): calls
//! per function, ends, losses said, calls not traced, damage.

use std::collections::HashMap;
use std::path::Path;

use fntrace_format::EventKind;

/// What a data directory holds, over all its processes and threads.
#[derive(Debug, Default)]
pub struct Tally {
    /// Entries per function (raw name).
    pub calls: HashMap<String, u64>,
    /// Exits and unwinds.
    pub ends: u64,
    /// Entries in all.
    pub entries: u64,
    /// Lost events (said in the trace).
    pub lost: u64,
    /// Calls the runtime did not trace (`process.json`).
    pub untraced: u64,
    /// Damage notes.
    pub damage: Vec<String>,
}

impl Tally {
    pub fn of(dir: &Path) -> Tally {
        let trace = fntrace_format::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut t = Tally {
            damage: trace.damage.clone(),
            ..Tally::default()
        };
        for p in &trace.processes {
            t.untraced += p.info.untraced;
            for &tid in &p.tids {
                let mut events = p.events(tid);
                for e in &mut events {
                    match e.kind {
                        EventKind::Entry | EventKind::EntryCaller(_) => {
                            t.entries += 1;
                            *t.calls.entry(p.functions.name(e.fid)).or_default() += 1;
                        }
                        EventKind::Exit | EventKind::Unwind => t.ends += 1,
                        EventKind::Lost(n) => t.lost += n.max(1),
                        _ => {}
                    }
                }
                t.damage.extend(events.damage().map(str::to_string));
            }
        }
        t
    }

    pub fn calls(&self, name: &str) -> u64 {
        self.calls.get(name).copied().unwrap_or(0)
    }

    /// Whole: nothing damaged, nothing lost, every call closed.
    pub fn assert_whole(&self, what: &str) {
        assert!(self.damage.is_empty(), "{what}: damage {:?}", self.damage);
        assert_eq!(self.lost, 0, "{what}: lost events");
        assert_eq!(self.entries, self.ends, "{what}: entries and ends");
    }

    /// Whole but for a few events said lost, in a storm of `handled`
    /// signals: a fast path writes its event's word just after reserving
    /// it; a signal in between whose handlers (a storm keeps delivering
    /// pending ones before the thread runs again) fill the rest of the
    /// chunk sends it to the file with the word still 0, read as one lost
    /// event (`docs/TRACING.md`; 0 to 13 in a run of 0.4 to 2.1 million
    /// handled signals). Every count may then fall short by that much, and
    /// no more. Returns how many.
    pub fn assert_whole_but_said(&self, what: &str, handled: u64) -> u64 {
        assert!(self.damage.is_empty(), "{what}: damage {:?}", self.damage);
        assert!(
            self.lost <= 8 + handled / 20_000,
            "{what}: {} events lost in {handled} signals",
            self.lost
        );
        // (The function tracer records entries only.)
        let ends = if self.ends == 0 { self.entries } else { self.ends };
        assert!(
            self.entries.abs_diff(ends) <= self.lost,
            "{what}: entries and ends"
        );
        self.lost
    }
}

/// `a` equals `b` to within `slack`.
pub fn near(a: u64, b: u64, slack: u64) -> bool {
    a.abs_diff(b) <= slack
}

/// The number after `key` in `text` (`handled 123`).
pub fn number_after(text: &str, key: &str) -> u64 {
    let at = text.find(key).unwrap_or_else(|| panic!("no '{key}' in: {text}"));
    text[at + key.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after '{key}' in: {text}"))
}
