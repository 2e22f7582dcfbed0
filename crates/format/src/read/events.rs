//! The events of one thread, in nanoseconds: what readers iterate over.
//!
//! [`ThreadEvents`] streams a thread file through [`RawEvents`] and turns
//! its words into [`Event`]s:
//! - times are the running tick converted with the process's
//!   [`Clock::to_ns`];
//! - `TIME` events only set the running tick and are never yielded;
//! - a chunk header's `lost` count yields `Lost(n)` at the chunk's start;
//! - a gap of sequence numbers (chunks that never reached the file) yields
//!   `Lost(0)` at the start of the chunk after the gap: `0` means "an
//!   unknown number of events"; when a chunk has both, `Lost(0)` comes
//!   first;
//! - `CALL` durations are converted to nanoseconds with
//!   [`Clock::ticks_to_ns`].
//!
//! Iteration stops at the first damage; every event before it is yielded
//! and [`ThreadEvents::damage`] tells where and why.

use std::collections::VecDeque;
use std::path::Path;

use super::raw::{RawEvents, RawItem};
use crate::event::{Kind, DATA_ARGS, DATA_REGISTERS, DATA_RETVAL};
use crate::meta::Clock;
use crate::values::{self, Value};

/// What happened at an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The function was entered.
    Entry,
    /// The function was entered from this caller address (tracer
    /// `function`).
    EntryCaller(u64),
    /// The function returned.
    Exit,
    /// The function was left without returning (`longjmp`, thread end, lost
    /// track).
    Unwind,
    /// This many events were dropped just before (0: an unknown number,
    /// from a gap of chunk sequence numbers).
    Lost(u64),
    /// A whole call of the function that ended at this event and lasted
    /// `dur_ns` (`--time-filter`).
    Call {
        /// The call's duration (ns).
        dur_ns: u64,
    },
    /// Tracing was turned on (`true`) or off (`false`) by a trigger.
    Mark(bool),
}

/// One event of a thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// When (ns, `CLOCK_MONOTONIC`).
    pub ns: u64,
    /// What.
    pub kind: EventKind,
    /// The function id (for `Lost` and `Mark`, the raw `fid` bits of the
    /// word, or 0 for the `Lost` events made from chunk headers).
    pub fid: u32,
    /// The values recorded with it (`-A`, `-R`): an entry's arguments, an
    /// exit's return value.
    pub values: Option<Values>,
}

/// Recorded values, shared (events are cloned as readers pass them on).
pub type Values = std::sync::Arc<[Value]>;

impl Event {
    /// An event without values.
    pub fn new(ns: u64, kind: EventKind, fid: u32) -> Event {
        Event {
            ns,
            kind,
            fid,
            values: None,
        }
    }
}

/// The events of one thread file, streamed with bounded memory.
#[derive(Debug)]
pub struct ThreadEvents {
    raw: RawEvents,
    clock: Clock,
    pending: VecDeque<Event>,
    lost: u64,
    lost_chunks: u64,
    flight: bool,
    read: u64,
    calls: u64,
    /// An item read after an event to look for its `DATA`, not yet used.
    peeked: Option<RawItem>,
}

impl ThreadEvents {
    /// The events of `raw`, with times converted by `clock`.
    pub fn new(raw: RawEvents, clock: Clock) -> ThreadEvents {
        ThreadEvents {
            raw,
            clock,
            pending: VecDeque::new(),
            lost: 0,
            lost_chunks: 0,
            flight: false,
            read: 0,
            calls: 0,
            peeked: None,
        }
    }

    /// The events of the thread file at `path` (see [`RawEvents::open`]).
    pub fn open(path: &Path, label: impl Into<String>, tid: Option<u32>, clock: Clock) -> ThreadEvents {
        ThreadEvents::new(RawEvents::open(path, label, tid), clock)
    }

    /// The events of a thread file held in memory.
    pub fn from_bytes(
        bytes: Vec<u8>,
        label: impl Into<String>,
        tid: Option<u32>,
        clock: Clock,
    ) -> ThreadEvents {
        ThreadEvents::new(RawEvents::from_bytes(bytes, label, tid), clock)
    }

    /// The name of the file in damage notes (`p1/t2.events`).
    pub fn label(&self) -> &str {
        self.raw.label()
    }

    /// Set once iteration stopped at damage: `p1/t2.events: offset N:
    /// reason`.
    pub fn damage(&self) -> Option<&str> {
        self.raw.damage()
    }

    /// Events known to be lost so far: the `lost` counts of chunk headers
    /// plus the payloads of `LOST` events. Chunks missing from the sequence
    /// hold an unknown number of events: they are counted by
    /// [`ThreadEvents::lost_chunks`] instead.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Events yielded so far, `Lost` events (which stand for events not
    /// there) not counted.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Calls recorded so far: entries and whole calls (`CALL`).
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Of [`ThreadEvents::lost`], the words read as zero: events reserved
    /// and never written (a signal handler between the two).
    pub fn unwritten(&self) -> u64 {
        self.raw.unwritten()
    }

    /// Chunks missing so far (gaps in the sequence numbers).
    pub fn lost_chunks(&self) -> u64 {
        self.lost_chunks
    }

    /// Whether the chunks come from the flight recorder (flag
    /// `FLAG_FLIGHT`): missing chunks were overwritten on purpose.
    pub fn flight(&self) -> bool {
        self.flight
    }

    /// Whether the thread's last chunk (flag `FLAG_LAST`) was read: the
    /// thread ended with the runtime still writing.
    pub fn saw_last(&self) -> bool {
        self.raw.saw_last()
    }

    /// The clock used for times.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    fn event(&mut self, kind: Kind, fid: u32, payload: Option<u64>, tick: u64) -> Option<Event> {
        let payload = payload.unwrap_or(0);
        let kind = match kind {
            Kind::Entry => EventKind::Entry,
            Kind::EntryCaller => EventKind::EntryCaller(payload),
            Kind::Exit => EventKind::Exit,
            Kind::Unwind => EventKind::Unwind,
            Kind::Time => return None,
            Kind::Lost => {
                self.lost = self.lost.saturating_add(payload);
                EventKind::Lost(payload)
            }
            Kind::Call => EventKind::Call {
                dur_ns: self.clock.ticks_to_ns(payload),
            },
            Kind::Mark => EventKind::Mark(fid != 0),
        };
        self.read += u64::from(!matches!(kind, EventKind::Lost(_)));
        self.calls += u64::from(matches!(
            kind,
            EventKind::Entry | EventKind::EntryCaller(_) | EventKind::Call { .. }
        ));
        Some(Event::new(self.clock.to_ns(tick), kind, fid))
    }
}

impl ThreadEvents {
    /// The values of the event just read, if a `DATA` event follows it.
    fn values_after(&mut self) -> Option<Values> {
        match self.raw.next() {
            Some(RawItem::Data { tag, .. }) if matches!(tag, DATA_ARGS | DATA_RETVAL | DATA_REGISTERS) => {
                let decode = if tag == DATA_REGISTERS {
                    values::decode_registers
                } else {
                    values::decode
                };
                Some(match decode(self.raw.data()) {
                    Ok(v) => v.into(),
                    Err(reason) => vec![Value::Damaged(reason)].into(),
                })
            }
            Some(RawItem::Data { .. }) => None,
            other => {
                self.peeked = other;
                None
            }
        }
    }
}

impl Iterator for ThreadEvents {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if let Some(ev) = self.pending.pop_front() {
            return Some(ev);
        }
        loop {
            let item = match self.peeked.take() {
                Some(item) => item,
                None => self.raw.next()?,
            };
            match item {
                RawItem::Chunk { header, missing, .. } => {
                    self.flight |= header.is_flight();
                    let ns = self.clock.to_ns(header.start);
                    let lost = |n| Event::new(ns, EventKind::Lost(n), 0);
                    if missing > 0 {
                        self.lost_chunks = self.lost_chunks.saturating_add(missing);
                        self.pending.push_back(lost(0));
                    }
                    if header.lost > 0 {
                        self.lost = self.lost.saturating_add(u64::from(header.lost));
                        self.pending.push_back(lost(u64::from(header.lost)));
                    }
                    if let Some(ev) = self.pending.pop_front() {
                        return Some(ev);
                    }
                }
                RawItem::Event {
                    kind,
                    fid,
                    payload,
                    tick,
                    ..
                } => {
                    if let Some(mut ev) = self.event(kind, fid, payload, tick) {
                        if matches!(
                            ev.kind,
                            EventKind::Entry
                                | EventKind::Exit
                                | EventKind::EntryCaller(_)
                                | EventKind::Call { .. }
                        ) {
                            ev.values = self.values_after();
                        }
                        return Some(ev);
                    }
                }
                // Values after no event they belong to (the event was a
                // lost one): nothing to show them with.
                RawItem::Data { .. } => {}
            }
        }
    }
}
