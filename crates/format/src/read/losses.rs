//! What a trace lost, summed over the threads and processes a reader read:
//! the numbers every reader states in its header or metadata
//! (`docs/FORMAT.md`, "Losses").
//!
//! Each source counts what it can know:
//! - the thread files hold the events dropped while a buffer was full
//!   (chunk headers' `lost`, `LOST` events), the words reserved and never
//!   written (read as zero), and gaps of sequence numbers (chunks that
//!   never reached the file: their events are not counted there);
//! - `process.json` holds the runtime's own count (`lost`: the events
//!   dropped, and those of the chunks it could not write), the calls it
//!   did not trace (`untraced`) and its first write error.
//!
//! A process's events lost are the larger of the runtime's count and the
//! files' count of dropped events (either can miss the other's: the
//! runtime's is stale after a crash, the files lack unwritten chunks),
//! plus the words never written, which the runtime cannot know of.
//!
//! Use: [`Losses::thread`] for each thread read to its end, then
//! [`Losses::process`] once for its process.

use super::{Process, ThreadEvents};

/// The losses of the threads and processes read so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Losses {
    /// Events read (`Lost` events, which stand for events not there, not
    /// counted).
    pub events: u64,
    /// Calls recorded: entries and whole calls.
    pub calls: u64,
    /// Events lost (see the module documentation).
    pub lost: u64,
    /// Of them, the files say were dropped (buffers full).
    pub dropped: u64,
    /// Of them, words reserved and never written.
    pub unwritten: u64,
    /// Chunks missing from a thread's sequence (not the flight recorder's).
    pub missing_chunks: u64,
    /// Older chunks the flight recorder did not keep.
    pub flight_chunks: u64,
    /// Calls the runtime did not trace (`process.json`'s `untraced`).
    pub untraced: u64,
    /// Each process's first write error, `p12: cannot write ...`.
    pub write_errors: Vec<String>,
    /// The threads read since the last [`Losses::process`].
    pending: Pending,
}

/// A process's threads, before its `process.json` is added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Pending {
    events: u64,
    calls: u64,
    dropped: u64,
    unwritten: u64,
    missing: u64,
    flight: u64,
}

impl Losses {
    /// No loss at all.
    pub fn new() -> Losses {
        Losses::default()
    }

    /// Adds a thread whose events were read (to their end, or to damage).
    pub fn thread(&mut self, events: &ThreadEvents) {
        let p = &mut self.pending;
        p.events += events.read();
        p.calls += events.calls();
        p.unwritten += events.unwritten();
        p.dropped += events.lost().saturating_sub(events.unwritten());
        if events.flight() {
            p.flight += events.lost_chunks();
        } else {
            p.missing += events.lost_chunks();
        }
    }

    /// Adds `process`, whose threads were given to [`Losses::thread`]
    /// since the last call (none for a profile table).
    pub fn process(&mut self, process: &Process) {
        let p = std::mem::take(&mut self.pending);
        let info = &process.info;
        self.events += p.events;
        self.calls += p.calls;
        self.dropped += p.dropped;
        self.unwritten += p.unwritten;
        self.lost += info.lost.max(p.dropped) + p.unwritten;
        self.missing_chunks += p.missing;
        self.flight_chunks += p.flight;
        self.untraced += info.untraced;
        if let Some(e) = &info.write_error {
            self.write_errors.push(format!("{}: {e}", process.name));
        }
    }

    /// The losses of `tids` of `process` (all its threads when empty),
    /// read from its files: one pass over their events.
    pub fn scan(process: &Process, tids: &[u32]) -> Losses {
        let mut losses = Losses::new();
        for &tid in process
            .tids
            .iter()
            .filter(|t| tids.is_empty() || tids.contains(t))
        {
            let mut events = process.events(tid);
            events.by_ref().for_each(drop);
            losses.thread(&events);
        }
        losses.process(process);
        losses
    }

    /// Adds `other`'s processes.
    pub fn merge(&mut self, other: Losses) {
        self.events += other.events;
        self.calls += other.calls;
        self.lost += other.lost;
        self.dropped += other.dropped;
        self.unwritten += other.unwritten;
        self.missing_chunks += other.missing_chunks;
        self.flight_chunks += other.flight_chunks;
        self.untraced += other.untraced;
        self.write_errors.extend(other.write_errors);
    }

    /// Whether nothing was lost.
    pub fn is_empty(&self) -> bool {
        self.lost == 0
            && self.missing_chunks == 0
            && self.flight_chunks == 0
            && self.untraced == 0
            && self.write_errors.is_empty()
    }

    /// The share of events lost: lost / (read + lost).
    pub fn lost_fraction(&self) -> f64 {
        fraction(self.lost, self.events)
    }

    /// The share of calls not traced: untraced / (recorded + untraced).
    pub fn untraced_fraction(&self) -> f64 {
        fraction(self.untraced, self.calls)
    }
}

/// `part / (part + rest)`, 0 when both are 0.
fn fraction(part: u64, rest: u64) -> f64 {
    let all = part as f64 + rest as f64;
    if all == 0.0 {
        0.0
    } else {
        part as f64 / all
    }
}
