//! Turning a thread's events into calls, for `report`, `graph` and tests.
//!
//! [`CallBuilder`] is fed one thread's events in order and hands out
//! finished [`Call`]s in post-order (a call after its children):
//! - `Entry` and `EntryCaller` open a call;
//! - `Exit` closes the innermost open call of its function; calls opened
//!   above it were lost track of (their exits were not recorded: `longjmp`,
//!   tracing turned off) and are closed as [`End::Unwound`] at the same
//!   time. An `Exit` without a matching open call is ignored (the trace
//!   started in the middle of the stack);
//! - `Unwind` closes like `Exit`, the call itself as [`End::Unwound`];
//! - `Lost` (events dropped, chunks missing, a word never written) marks
//!   every call open then: however such a call is closed later (its
//!   function's exit, a caller's, an unwind, the end of the thread), it
//!   ends as [`End::ExitLost`], since its exit may be among the events
//!   lost and the exit read may be another call's, entered in the gap;
//!   readers leave such calls out of times and count them apart;
//! - calls still open at [`CallBuilder::finish`] end there as
//!   [`End::Unfinished`];
//! - `Call` events (`--time-filter`) are whole calls that arrive after
//!   their children; they are buffered and nested by time containment at
//!   [`CallBuilder::finish`]: a call's parent is the innermost other
//!   `Call` whose time span contains its own (`parent.start <= start &&
//!   end <= parent.end`); of two calls with the same span, the one that
//!   arrived later is the parent (it returned later); spans that overlap
//!   without containment (damaged data) are not nested;
//! - `Mark` events change nothing;
//! - at most [`MAX_DEPTH`](crate::stack::MAX_DEPTH) calls are open: a
//!   deeper entry is left out ([`CallBuilder::note`]).
//!
//! A runtime never mixes `Call` events with `Entry`/`Exit` events in one
//! thread. If a trace does, the two kinds form separate trees: `Call`
//! events are nested only among themselves, do not count in the self time
//! of `Entry`/`Exit` calls, and are handed out after all of those.
//!
//! Times that go backwards (damaged data) never panic: a call's end is at
//! least its start and times subtract with saturation.

use crate::read::{Event, EventKind};
use crate::stack::CallStack;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Its `Exit` was recorded (or it is a whole `Call` event).
    Returned,
    /// It was left without returning: an `Unwind` event, or an exit of a
    /// function below it on the stack.
    Unwound,
    /// Still open when the thread's events ended.
    Unfinished,
    /// Open when events were lost: its exit may be among them, and an exit
    /// read later may be another call's, so its end is unknown. Its times
    /// are not durations (`end_ns` is where the reader closed it).
    ExitLost,
}

/// One call of a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The function.
    pub fid: u32,
    /// The function of the enclosing call, if any.
    pub parent: Option<u32>,
    /// The nesting depth: 0 for an outermost call.
    pub depth: u32,
    /// When the call started (ns).
    pub start_ns: u64,
    /// When it ended (ns, at least `start_ns`).
    pub end_ns: u64,
    /// Its duration minus the durations of its direct children (ns).
    pub self_ns: u64,
    /// How it ended.
    pub end: End,
    /// Its recorded arguments (`-A`, `-a`), as `replay` writes them.
    pub args: Option<std::sync::Arc<str>>,
    /// Its recorded return value (`-R`, `-a`).
    pub ret: Option<std::sync::Arc<str>>,
}

impl Call {
    /// The call's duration (ns).
    pub fn total_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// A call that has been entered and not yet left.
#[derive(Debug, Clone)]
struct Open {
    start_ns: u64,
    child_ns: u64,
    args: Option<std::sync::Arc<str>>,
}

/// Builds the calls of one thread from its events.
#[derive(Debug, Clone, Default)]
pub struct CallBuilder {
    stack: CallStack<Open>,
    whole: Vec<Whole>,
}

impl CallBuilder {
    /// A builder with no open call.
    pub fn new() -> Self {
        CallBuilder::default()
    }

    /// The number of calls open now.
    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// The damage note of thread file `label` when entries nested deeper
    /// than [`MAX_DEPTH`](crate::stack::MAX_DEPTH) were left out.
    pub fn note(&self, label: &str) -> Option<String> {
        self.stack.note(label)
    }

    /// Feeds the next event; calls it finishes are appended to `out`.
    pub fn push(&mut self, ev: &Event, out: &mut Vec<Call>) {
        match ev.kind {
            EventKind::Entry | EventKind::EntryCaller(_) => {
                self.stack.push(
                    ev.fid,
                    Open {
                        start_ns: ev.ns,
                        child_ns: 0,
                        args: ev.values.as_deref().map(|v| crate::values::list(v).into()),
                    },
                );
            }
            EventKind::Exit => {
                let ret = ev.values.as_deref().map(|v| crate::values::list(v).into());
                self.close(ev.fid, ev.ns, End::Returned, ret, out)
            }
            EventKind::Unwind => self.close(ev.fid, ev.ns, End::Unwound, None, out),
            EventKind::Call { dur_ns } => {
                let ret = ev.values.as_deref().map(|v| crate::values::list(v).into());
                self.whole
                    .push(Whole::new(ev.fid, ev.ns, dur_ns, self.whole.len(), ret))
            }
            EventKind::Lost(_) => self.stack.lose(),
            EventKind::Mark(_) => {}
        }
    }

    /// Ends the thread at `last_ns`: open calls end there as
    /// [`End::Unfinished`] (or [`End::ExitLost`] if open at a loss),
    /// innermost first, then the buffered `Call` events are nested and
    /// appended.
    pub fn finish(mut self, last_ns: u64, out: &mut Vec<Call>) {
        while !self.stack.is_empty() {
            self.pop(last_ns, End::Unfinished, None, out);
        }
        resolve_whole(self.whole, out);
    }

    fn close(&mut self, fid: u32, ns: u64, end: End, ret: Option<std::sync::Arc<str>>, out: &mut Vec<Call>) {
        let Some(i) = self.stack.position(fid) else {
            return;
        };
        while self.stack.len() > i + 1 {
            self.pop(ns, End::Unwound, None, out);
        }
        self.pop(ns, end, ret, out);
    }

    fn pop(&mut self, ns: u64, end: End, ret: Option<std::sync::Arc<str>>, out: &mut Vec<Call>) {
        let end = if self.stack.top_spans_loss() {
            End::ExitLost
        } else {
            end
        };
        let Some((fid, open)) = self.stack.pop() else {
            return;
        };
        let end_ns = ns.max(open.start_ns);
        let total = end_ns - open.start_ns;
        if let Some(parent) = self.stack.last_mut() {
            parent.child_ns = parent.child_ns.saturating_add(total);
        }
        out.push(Call {
            fid,
            parent: self.stack.last().map(|(p, _)| *p),
            depth: u32::try_from(self.stack.len()).unwrap_or(u32::MAX),
            start_ns: open.start_ns,
            end_ns,
            self_ns: total.saturating_sub(open.child_ns),
            end,
            args: open.args,
            ret: if end == End::Returned { ret } else { None },
        });
    }
}

/// All the calls of a thread's events, ending open calls at the time of the
/// last event.
pub fn calls(events: impl IntoIterator<Item = Event>) -> Vec<Call> {
    let mut builder = CallBuilder::new();
    let mut out = Vec::new();
    let mut last_ns = 0;
    for ev in events {
        last_ns = last_ns.max(ev.ns);
        builder.push(&ev, &mut out);
    }
    builder.finish(last_ns, &mut out);
    out
}

/// One buffered `CALL` event.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Whole {
    fid: u32,
    start_ns: u64,
    end_ns: u64,
    order: usize,
    /// Its return value, if recorded.
    ret: Option<std::sync::Arc<str>>,
}

impl Whole {
    /// The call of `fid` that ended at `end_ns` after `dur_ns`; `order`
    /// counts arrivals.
    fn new(fid: u32, end_ns: u64, dur_ns: u64, order: usize, ret: Option<std::sync::Arc<str>>) -> Whole {
        Whole {
            fid,
            start_ns: end_ns.saturating_sub(dur_ns),
            end_ns,
            order,
            ret,
        }
    }
}

/// Nests the buffered `CALL` events by time containment (see the module
/// documentation) and appends them to `out` in post-order.
fn resolve_whole(mut calls: Vec<Whole>, out: &mut Vec<Call>) {
    // Parents before children: by start, then longest first, then the
    // latest arrival first.
    calls.sort_by(|a, b| {
        a.start_ns
            .cmp(&b.start_ns)
            .then(b.end_ns.cmp(&a.end_ns))
            .then(b.order.cmp(&a.order))
    });
    let mut stack: Vec<(Whole, u64)> = Vec::new();
    for call in calls {
        // The stack holds the chain of spans that contain each other; the
        // ones that do not contain `call` are finished.
        while stack.last().is_some_and(|(top, _)| top.end_ns < call.end_ns) {
            pop_whole(&mut stack, out);
        }
        stack.push((call, 0));
    }
    while !stack.is_empty() {
        pop_whole(&mut stack, out);
    }
}

fn pop_whole(stack: &mut Vec<(Whole, u64)>, out: &mut Vec<Call>) {
    let Some((call, child_ns)) = stack.pop() else {
        return;
    };
    let total = call.end_ns - call.start_ns;
    if let Some((_, parent_child_ns)) = stack.last_mut() {
        *parent_child_ns = parent_child_ns.saturating_add(total);
    }
    out.push(Call {
        fid: call.fid,
        parent: stack.last().map(|(p, _)| p.fid),
        depth: u32::try_from(stack.len()).unwrap_or(u32::MAX),
        start_ns: call.start_ns,
        end_ns: call.end_ns,
        self_ns: total.saturating_sub(child_ns),
        end: End::Returned,
        args: None,
        ret: call.ret,
    });
}
