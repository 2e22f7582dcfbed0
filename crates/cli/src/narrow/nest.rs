//! Whole calls (`record -t`, the kernel's `tracing_thresh`) read back
//! nested. The runtime writes a call that lasted long enough as one `CALL`
//! event at its end, so a thread's calls arrive callees first (`nap`,
//! `slow`, `main`). Every reader wants them as a recording of entries and
//! exits: a call that began inside another's span is its callee, and
//! `replay` shows `main() { slow() { nap(); } }` as uftrace does.
//!
//! A call's callers arrive after it, the outermost last: a thread's whole
//! calls are held (their events only: `-t` keeps few) and put in order
//! when it ends, each `CALL` becoming an entry at its start and an exit at
//! its end (with its return value). At most [`HELD`] events are held: past
//! that, what is held is let go in order, and a caller that arrives later
//! shows after its callees, as before.

use std::collections::VecDeque;

use fntrace_format::read::{Event, EventKind, ThreadEvents};

/// The most events a thread holds to nest its whole calls.
pub const HELD: usize = 1 << 22;

/// A thread's events with its whole calls nested.
pub struct Nested {
    inner: ThreadEvents,
    /// Events in order, ready.
    ready: VecDeque<Event>,
    /// Whole calls (and the losses and marks among them) not yet ordered.
    held: Vec<Event>,
    /// The thread has `CALL` events: everything after the first is held.
    holding: bool,
}

impl Nested {
    pub fn new(inner: ThreadEvents) -> Nested {
        Nested {
            inner,
            ready: VecDeque::new(),
            held: Vec::new(),
            holding: false,
        }
    }

    /// The thread's stream.
    pub fn inner(&self) -> &ThreadEvents {
        &self.inner
    }

    /// Puts the held events in order, into `ready`.
    fn release(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.ready.extend(order(held));
    }
}

impl Iterator for Nested {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Some(ev);
            }
            let Some(ev) = self.inner.next() else {
                if self.held.is_empty() {
                    return None;
                }
                self.release();
                continue;
            };
            self.holding |= matches!(ev.kind, EventKind::Call { .. });
            if !self.holding {
                return Some(ev);
            }
            self.held.push(ev);
            if self.held.len() >= HELD {
                self.release();
            }
        }
    }
}

/// Whole calls and the events among them, in the order a recording of
/// entries and exits would have them: each call entered at its start and
/// left at its end, a call inside another's span nested in it; a loss or
/// mark where it happened.
fn order(held: Vec<Event>) -> Vec<Event> {
    // Each item: its start, its end (a point for other events), its place
    // in the stream, and the event. Among those that start together the
    // longest is the caller; of two calls with one span, the one written
    // later (a caller ends after its callees).
    let mut items: Vec<(u64, u64, usize, Event)> = held
        .into_iter()
        .enumerate()
        .map(|(i, ev)| match ev.kind {
            EventKind::Call { dur_ns } => (ev.ns.saturating_sub(dur_ns), ev.ns, i, ev),
            _ => (ev.ns, ev.ns, i, ev),
        })
        .collect();
    items.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
    let mut out = Vec::with_capacity(items.len() * 2);
    // Open calls: their end and their exit.
    let mut open: Vec<(u64, Event)> = Vec::new();
    for (start, end, _, ev) in items {
        // The open calls that ended before this began.
        while open.last().is_some_and(|(top_end, _)| *top_end <= start) {
            if let Some((_, exit)) = open.pop() {
                out.push(exit);
            }
        }
        match ev.kind {
            EventKind::Call { .. } => {
                // Calls inside a longer one that ends earlier cannot
                // happen; one that outlasts the open call closes it first.
                while open.last().is_some_and(|(top_end, _)| end > *top_end) {
                    if let Some((_, exit)) = open.pop() {
                        out.push(exit);
                    }
                }
                out.push(Event::new(start, EventKind::Entry, ev.fid));
                let exit = Event {
                    ns: end,
                    kind: EventKind::Exit,
                    fid: ev.fid,
                    values: ev.values,
                };
                open.push((end, exit));
            }
            _ => out.push(ev),
        }
    }
    while let Some((_, exit)) = open.pop() {
        out.push(exit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(fid: u32, start: u64, end: u64) -> Event {
        Event::new(end, EventKind::Call { dur_ns: end - start }, fid)
    }

    fn shape(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e.kind {
                EventKind::Entry => format!("+{}@{}", e.fid, e.ns),
                EventKind::Exit => format!("-{}@{}", e.fid, e.ns),
                _ => format!("?@{}", e.ns),
            })
            .collect()
    }

    /// main { slow { nap } leaf } as `-t` writes it: nap, slow, leaf, main.
    #[test]
    fn callees_first_become_nested() {
        let held = vec![call(3, 20, 50), call(2, 10, 60), call(4, 70, 80), call(1, 0, 100)];
        assert_eq!(
            shape(&order(held)),
            ["+1@0", "+2@10", "+3@20", "-3@50", "-2@60", "+4@70", "-4@80", "-1@100"]
        );
    }

    /// A call and its callee that began at once: the longer is the caller;
    /// a loss between two calls stays between them.
    #[test]
    fn ties_and_points() {
        let lost = Event::new(65, EventKind::Lost(3), 0);
        let held = vec![call(2, 10, 40), call(1, 10, 60), lost, call(3, 60, 90)];
        assert_eq!(
            shape(&order(held)),
            ["+1@10", "+2@10", "-2@40", "-1@60", "+3@60", "?@65", "-3@90"]
        );
    }
}
