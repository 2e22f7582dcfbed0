//! What a reader keeps of a recording: the filters of uftrace's `replay`,
//! `report`, `graph` and `dump`, applied to each thread's events as they
//! are read, so every command narrows the same way and prints, counts or
//! exports only what is left:
//! - `-F`: only the calls of these functions and what they call;
//! - `-N`: not these calls, nor what they call;
//! - `-H`: not these calls, but what they call;
//! - `-C`: only the calls of these functions (not what they call) and the
//!   calls that led to them;
//! - `-D N`: calls nested at most N deep, counted from the first call kept
//!   (under `-F`, the call it selects);
//! - `-r START~STOP`: the calls that began in the range;
//! - `-t DURATION`: the calls that lasted at least that long, and the calls
//!   that led to them (uftrace keeps the parents: a parent lasts at least
//!   as long as its callee, and one whose end is unknown is kept for what
//!   it holds).
//!
//! The narrowed stream is one a recording could have held: an entry is
//! kept with its exit; a kept call whose exit is not (an exit of a caller
//! that was left out closes it) is closed by an `Unwind` made at that
//! exit, as a reader closes a call left without returning. Under `-C`, the
//! entry of a call that may lead to a selected call waits (one per open
//! call: memory stays bounded) until one begins inside it, and is dropped
//! with its exit if none does. `-t` needs each call's end at its entry: a
//! thread is read twice, the first time to learn which calls are kept (one
//! bit per call).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use fntrace_filter::Filter;
use fntrace_format::read::{Event, EventKind, Process, ThreadEvents};
use fntrace_format::stack::CallStack;

use crate::range::TimeRange;
use crate::trace::{Demangle, Names};

mod flags;
mod nest;
pub use flags::NarrowFlags;
use nest::Nested;

/// The filters of a reading, for every process of a trace.
#[derive(Default)]
pub struct Narrowing {
    pub filter: Filter,
    pub notrace: Filter,
    pub hide: Filter,
    pub callers: Filter,
    pub depth: Option<usize>,
    pub range: Option<TimeRange>,
    pub threshold_ns: Option<u64>,
    /// The rules of each process (by its directory), made on first use.
    rules: RefCell<HashMap<std::path::PathBuf, Rc<Rules>>>,
}

/// What the patterns say of a function.
#[derive(Debug, Clone, Copy, Default)]
struct Matches {
    /// `-F` selects it (or there is no `-F`).
    selected: bool,
    /// `-N` hides it and its callees.
    notrace: bool,
    /// `-H` hides it alone.
    hidden: bool,
    /// `-C` selects it.
    target: bool,
}

/// The filters as one process reads them: per function, what the
/// patterns say; the range in its clock.
struct Rules {
    matches: HashMap<u32, Matches>,
    /// Matches of a function id the process does not know.
    unknown: Matches,
    filter: bool,
    callers: bool,
    depth: Option<usize>,
    range: (u64, u64),
    threshold_ns: Option<u64>,
}

impl Narrowing {
    /// Whether nothing is narrowed: every event is kept.
    pub fn keeps_everything(&self) -> bool {
        self.filter.is_empty()
            && self.notrace.is_empty()
            && self.hide.is_empty()
            && self.callers.is_empty()
            && self.depth.is_none()
            && self.range.is_none()
            && self.threshold_ns.is_none()
    }

    /// How many times each thread is read (`-t` reads it twice).
    pub fn passes(&self) -> u64 {
        if self.threshold_ns.is_some() {
            2
        } else {
            1
        }
    }

    /// The events of a thread of `process`, narrowed; `open` opens the
    /// thread's stream (twice with `-t`).
    pub fn events(&self, process: &Process, open: impl Fn() -> ThreadEvents) -> Narrowed {
        if self.keeps_everything() {
            return Narrowed::all(open());
        }
        let rules = self.rules_of(process);
        let kept = rules.threshold_ns.map(|t| lasting(Nested::new(open()), t));
        Narrowed {
            inner: Nested::new(open()),
            state: Some(Box::new(State {
                rules,
                stack: CallStack::new(),
                out: VecDeque::new(),
                kept,
                entries: 0,
            })),
        }
    }

    fn rules_of(&self, process: &Process) -> Rc<Rules> {
        let mut cache = self.rules.borrow_mut();
        let rules = cache.entry(process.dir.clone()).or_insert_with(|| {
            let mut names = Names::of(process, Demangle::No);
            let mut of = |fid: u32| {
                let name = names.get(fid);
                Matches {
                    selected: self.filter.is_empty() || name.matches(&self.filter),
                    notrace: !self.notrace.is_empty() && name.matches(&self.notrace),
                    hidden: !self.hide.is_empty() && name.matches(&self.hide),
                    target: !self.callers.is_empty() && name.matches(&self.callers),
                }
            };
            let patterns = [&self.filter, &self.notrace, &self.hide, &self.callers];
            let matches = match patterns.iter().all(|f| f.is_empty()) {
                true => HashMap::new(),
                false => process.functions.iter().map(|f| (f.fid, of(f.fid))).collect(),
            };
            Rc::new(Rules {
                matches,
                unknown: Matches {
                    selected: self.filter.is_empty(),
                    ..Matches::default()
                },
                filter: !self.filter.is_empty(),
                callers: !self.callers.is_empty(),
                depth: self.depth,
                range: self
                    .range
                    .map_or((0, u64::MAX), |r| r.resolve(process.info.clock.mono0_ns)),
                threshold_ns: self.threshold_ns,
            })
        });
        Rc::clone(rules)
    }
}

/// A thread's events as a [`Narrowing`] keeps them.
pub struct Narrowed {
    inner: Nested,
    /// None: everything is kept.
    state: Option<Box<State>>,
}

/// Where a thread is.
struct State {
    rules: Rc<Rules>,
    stack: CallStack<Frame>,
    /// Events kept, not yet taken.
    out: VecDeque<Event>,
    /// `-t`: whether each entry of the thread (in order) is kept.
    kept: Option<Vec<u64>>,
    /// Entries seen so far.
    entries: usize,
}

/// An open call of the thread.
struct Frame {
    /// Inside a call `-F` selects (or there is no `-F`).
    inside: bool,
    /// What it calls is left out (`-N`, `-D`, a call `-C` selects).
    hidden: bool,
    /// Kept calls on the stack, this one included.
    level: usize,
    /// Its entry was passed on.
    passed: bool,
    /// `-C`: its entry, waiting for a call `-C` selects to begin inside it.
    waiting: Option<Event>,
}

impl Narrowed {
    /// Every event of `events`.
    pub fn all(events: ThreadEvents) -> Narrowed {
        Narrowed {
            inner: Nested::new(events),
            state: None,
        }
    }

    /// The thread's whole stream, as read so far.
    pub fn source(&self) -> &ThreadEvents {
        self.inner.inner()
    }

    /// The name of the thread's file in damage notes.
    pub fn label(&self) -> &str {
        self.inner.inner().label()
    }

    /// Why reading stopped early, if it did, and the calls nested too
    /// deep to be followed (left out).
    pub fn damage(&self) -> impl Iterator<Item = String> + '_ {
        let inner = self.inner.inner();
        let deep = self.state.as_ref().and_then(|s| s.stack.note(inner.label()));
        inner.damage().map(str::to_string).into_iter().chain(deep)
    }

    /// Events the thread's file says were lost.
    pub fn lost(&self) -> u64 {
        self.inner.inner().lost()
    }

    /// Chunks missing from the thread's file.
    pub fn lost_chunks(&self) -> u64 {
        self.inner.inner().lost_chunks()
    }
}

impl Iterator for Narrowed {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        let Some(state) = &mut self.state else {
            return self.inner.next();
        };
        loop {
            if let Some(ev) = state.out.pop_front() {
                return Some(ev);
            }
            let ev = self.inner.next()?;
            state.feed(ev);
        }
    }
}

impl State {
    /// What a new call inherits: the innermost open call's context.
    fn context(&self) -> (bool, bool, usize) {
        match self.stack.last() {
            Some((_, f)) => (f.inside, f.hidden, f.level),
            None => (!self.rules.filter, false, 0),
        }
    }

    fn matches(&self, fid: u32) -> Matches {
        self.rules
            .matches
            .get(&fid)
            .copied()
            .unwrap_or(self.rules.unknown)
    }

    fn in_range(&self, ns: u64) -> bool {
        (self.rules.range.0..=self.rules.range.1).contains(&ns)
    }

    /// Whether a call of `fid` beginning at `ns` in the current context is
    /// kept, ignoring `-C` and `-t`.
    fn kept(&self, fid: u32, ns: u64) -> bool {
        let (inside, hidden, level) = self.context();
        let m = self.matches(fid);
        let too_deep = self.rules.depth.is_some_and(|d| level >= d);
        (inside || m.selected) && !(hidden || m.notrace || too_deep || m.hidden) && self.in_range(ns)
    }

    fn feed(&mut self, ev: Event) {
        match ev.kind {
            EventKind::Entry => self.entry(ev),
            EventKind::Exit | EventKind::Unwind => self.close(ev),
            EventKind::EntryCaller(_) => {
                if self.kept(ev.fid, ev.ns) && (!self.rules.callers || self.matches(ev.fid).target) {
                    self.out.push_back(ev);
                }
            }
            EventKind::Call { dur_ns } => {
                let long = self.rules.threshold_ns.is_none_or(|t| dur_ns >= t);
                let start = ev.ns.saturating_sub(dur_ns);
                let target = !self.rules.callers || self.matches(ev.fid).target;
                if long && target && self.kept(ev.fid, start) {
                    self.out.push_back(ev);
                }
            }
            EventKind::Lost(_) => {
                self.stack.lose();
                self.out.push_back(ev);
            }
            EventKind::Mark(_) => {
                if self.in_range(ev.ns) {
                    self.out.push_back(ev);
                }
            }
        }
    }

    fn entry(&mut self, ev: Event) {
        let (ctx_inside, ctx_hidden, level) = self.context();
        let m = self.matches(ev.fid);
        let inside = ctx_inside || m.selected;
        let too_deep = inside && self.rules.depth.is_some_and(|d| level >= d);
        let mut hidden = ctx_hidden || m.notrace || too_deep;
        let long = match &self.kept {
            Some(bits) => bits
                .get(self.entries / 64)
                .is_some_and(|w| w >> (self.entries % 64) & 1 == 1),
            None => true,
        };
        self.entries += 1;
        let shown = inside && !hidden && !m.hidden && long && self.in_range(ev.ns);
        let target = self.rules.callers && m.target;
        if shown && target {
            self.release_waiting();
            hidden = true;
        }
        let waits = shown && self.rules.callers && !target;
        let frame = Frame {
            inside,
            hidden,
            level: level + usize::from(shown),
            passed: shown && !waits,
            waiting: None,
        };
        let pushed = self.stack.push(ev.fid, frame);
        if waits {
            if let Some(frame) = self.stack.last_mut().filter(|_| pushed) {
                frame.waiting = Some(ev);
            }
        } else if shown {
            // Too deep to be held (131,072 calls open) and kept: passed on,
            // for the reader to leave out and count.
            self.out.push_back(ev);
        }
    }

    /// Passes on the entries waiting on the stack, the outermost first: a
    /// call `-C` selects began inside them.
    fn release_waiting(&mut self) {
        for frame in self.stack.values_mut() {
            if let Some(ev) = frame.waiting.take() {
                frame.passed = true;
                self.out.push_back(ev);
            }
        }
    }

    /// An exit or unwind: closes its call and those opened after it.
    fn close(&mut self, ev: Event) {
        let Some(pos) = self.stack.position(ev.fid) else {
            // Tracing began inside the call.
            if self.kept(ev.fid, ev.ns) && !self.rules.callers {
                self.out.push_back(ev);
            }
            return;
        };
        let passed = self.stack.values_mut().nth(pos).is_some_and(|f| f.passed);
        while self.stack.len() > pos + 1 {
            if let Some((fid, frame)) = self.stack.pop() {
                // A reader closes these itself at the exit, when it sees it.
                if frame.passed && !passed {
                    self.out.push_back(Event::new(ev.ns, EventKind::Unwind, fid));
                }
            }
        }
        self.stack.pop();
        if passed {
            self.out.push_back(ev);
        }
    }
}

/// `-t`: which entries of a thread (in order) begin a call that lasted at
/// least `threshold_ns`, or holds one, or whose end is unknown (open at a
/// loss, or when the thread ends): one bit each.
fn lasting(events: impl Iterator<Item = Event>, threshold_ns: u64) -> Vec<u64> {
    struct Open {
        entry: usize,
        start_ns: u64,
        holds: bool,
    }
    let mut bits: Vec<u64> = Vec::new();
    let mut stack: CallStack<Open> = CallStack::new();
    let mut entries = 0usize;
    let set = |bits: &mut Vec<u64>, i: usize| bits[i / 64] |= 1 << (i % 64);
    for ev in events {
        match ev.kind {
            EventKind::Entry => {
                if entries.is_multiple_of(64) {
                    bits.push(0);
                }
                let open = Open {
                    entry: entries,
                    start_ns: ev.ns,
                    holds: false,
                };
                if !stack.push(ev.fid, open) {
                    set(&mut bits, entries);
                }
                entries += 1;
            }
            EventKind::Exit | EventKind::Unwind => {
                let Some(pos) = stack.position(ev.fid) else {
                    continue;
                };
                while stack.len() > pos {
                    let unknown = stack.top_spans_loss();
                    let Some((_, call)) = stack.pop() else { break };
                    if unknown || call.holds || ev.ns.saturating_sub(call.start_ns) >= threshold_ns {
                        set(&mut bits, call.entry);
                        if let Some(parent) = stack.last_mut() {
                            parent.holds = true;
                        }
                    }
                }
            }
            EventKind::Lost(_) => stack.lose(),
            _ => {}
        }
    }
    while let Some((_, call)) = stack.pop() {
        set(&mut bits, call.entry);
    }
    bits
}
