//! Flame chart input: folded stacks in time order, not merged. Each line
//! is a stretch of time during which a thread's stack stayed the same:
//!
//! ```text
//! T100;main 1000
//! T100;main;a 500
//! T100;main;a;leaf 190
//! T100;main;a 310
//! ```
//!
//! inferno's flame chart mode (`flamegraph.pl --flamechart`) lays such
//! lines out left to right without sorting them, so a frame is one call
//! (two calls of `leaf` are two frames) and x is time. Threads come one
//! after the other, each under its own frame `T<tid>` that spans its
//! events, first to last (the time between its calls is that frame's).
//!
//! A call is a line or more, so a trace of millions of calls would make
//! millions of lines — and inferno would drop most of them: it leaves out
//! frames narrower than 0.01% of the chart. The same is done here as the
//! lines are made: a call shorter than that (known once the total is, by a
//! first pass over the events) folds its time into its caller's line, so
//! the chart looks as it would and the lines stay few (at most some per
//! 0.01% of the chart and nesting level). Lines of a call are held only
//! while it could still turn out that short.

use crate::trace::Demangle;
use fntrace_format::read::{Losses, Process};

use super::progress::Progress;
use super::stacks::{walk, FrameNames, Frames, Tree, ROOT};

/// The share of the chart (1 / `RESOLUTION`) under which inferno leaves a
/// frame out (its default `min_width`, 0.01%).
pub const RESOLUTION: u64 = 10_000;

/// Pending lines held before the ones that are settled move on.
const FLUSH: usize = 4096;

/// The flame chart of a trace.
#[derive(Default)]
pub struct ChartLines {
    tree: Tree,
    /// `(stack, ns)` in time order.
    lines: Vec<(u32, u64)>,
    /// Events read (in the second pass).
    pub events: u64,
    /// Damage notes of the thread files.
    pub damage: Vec<String>,
    /// What the trace lost.
    pub losses: Losses,
}

/// Reads `threads` twice: their time spans, then their calls.
pub fn collect(threads: &[(&Process, Vec<u32>)], demangle: Demangle, progress: &Progress) -> ChartLines {
    // The first and last event of each thread, in order.
    let mut spans = Vec::new();
    for (process, tids) in threads {
        for &tid in tids {
            let mut span: Option<(u64, u64)> = None;
            for ev in progress.events(process, tid) {
                let (_, last) = span.get_or_insert((ev.ns, ev.ns));
                *last = (*last).max(ev.ns);
            }
            spans.push(span);
        }
    }
    let total = spans
        .iter()
        .flatten()
        .fold(0u64, |t, (first, last)| t.saturating_add(last - first));
    let mut spans = spans.into_iter();

    let mut tree = Tree::default();
    let mut chart = Chart {
        min_ns: total / RESOLUTION,
        frames: Vec::new(),
        pending: Vec::new(),
        lines: Vec::new(),
        now: None,
    };
    let mut out = ChartLines::default();
    for (process, tids) in threads {
        let mut names = FrameNames::new(process, demangle);
        for &tid in tids {
            let mut events = progress.events(process, tid);
            let mut note = None;
            if let Some(Some((first, last))) = spans.next() {
                let name = tree.name(&super::folded::thread_frame(tid));
                chart.begin(tree.child(ROOT, name), first);
                note = walk(
                    &mut events,
                    &mut names,
                    &mut tree,
                    &mut chart,
                    progress,
                    &mut out.events,
                );
                chart.end(last);
            }
            out.damage.extend(events.damage());
            out.damage.extend(note);
            out.losses.thread(events.source());
        }
        out.losses.process(process);
    }
    out.lines = chart.lines;
    out.tree = tree;
    out
}

impl ChartLines {
    /// Folded stack lines in time order (`stack ns`); fails when they
    /// would be larger than [`TEXT_LIMIT`](super::stacks::TEXT_LIMIT).
    pub fn text(&self) -> Result<Vec<String>, String> {
        self.tree.text(&self.lines)
    }
}

/// An open call.
struct Open {
    node: u32,
    start: u64,
    /// Where its lines start in `pending`.
    mark: usize,
}

/// The lines of one thread at a time.
struct Chart {
    /// Calls shorter than this fold into their caller.
    min_ns: u64,
    /// The open calls, the thread's frame first.
    frames: Vec<Open>,
    /// Lines that a call still open could fold.
    pending: Vec<(u32, u64)>,
    /// Settled lines.
    lines: Vec<(u32, u64)>,
    /// The time of the last event (never going back); `None` between
    /// threads.
    now: Option<u64>,
}

/// Appends `ns` of `node` to `lines`, extending the last line if it is the
/// same stack.
fn push(lines: &mut Vec<(u32, u64)>, node: u32, ns: u64) {
    match lines.last_mut() {
        Some((last, total)) if *last == node => *total = total.saturating_add(ns),
        _ => lines.push((node, ns)),
    }
}

impl Chart {
    /// Starts a thread whose frame is `root` and first event at `first`.
    fn begin(&mut self, root: u32, first: u64) {
        self.frames = vec![Open {
            node: root,
            start: first,
            mark: 0,
        }];
        self.now = Some(first);
    }

    /// Ends the thread at its last event `last`: all its lines are
    /// settled.
    fn end(&mut self, last: u64) {
        self.advance(last);
        for (node, ns) in self.pending.drain(..) {
            push(&mut self.lines, node, ns);
        }
        self.frames.clear();
    }

    /// The time up to `ns` goes to the current stack.
    fn advance(&mut self, ns: u64) -> u64 {
        let now = self.now.unwrap_or(ns);
        let t = ns.max(now);
        // A zero-length stretch separates two calls of a function made one
        // right after the other (two frames, not one), except on the
        // thread's own frame, where it is only noise.
        if let Some(top) = self.frames.last().filter(|_| t > now || self.frames.len() > 1) {
            push(&mut self.pending, top.node, t - now);
        }
        self.now = Some(t);
        t
    }

    /// Settles the lines that no open call can fold any more: those before
    /// the first open call that is still shorter than `min_ns`.
    fn flush(&mut self) {
        let now = self.now.unwrap_or(0);
        let limit = self
            .frames
            .iter()
            .skip(1)
            .find(|f| now - f.start < self.min_ns)
            .map_or(self.pending.len(), |f| f.mark);
        for (node, ns) in self.pending.drain(..limit) {
            push(&mut self.lines, node, ns);
        }
        for f in &mut self.frames {
            f.mark = f.mark.saturating_sub(limit);
        }
    }
}

impl Frames for Chart {
    fn open(&mut self, tree: &mut Tree, name: u32, ns: u64) {
        let start = self.advance(ns);
        let parent = self.frames.last().map_or(ROOT, |f| f.node);
        self.frames.push(Open {
            node: tree.child(parent, name),
            start,
            mark: self.pending.len(),
        });
    }

    fn close(&mut self, _tree: &mut Tree, ns: u64, _self_ns: u64) {
        let now = self.advance(ns);
        if self.frames.len() <= 1 {
            return;
        }
        let Some(call) = self.frames.pop() else { return };
        if now - call.start < self.min_ns {
            let mark = call.mark.min(self.pending.len());
            let folded = self
                .pending
                .drain(mark..)
                .fold(0u64, |a, (_, ns)| a.saturating_add(ns));
            if let Some(parent) = self.frames.last() {
                push(&mut self.pending, parent.node, folded);
            }
        }
        if self.pending.len() >= FLUSH {
            self.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(min_ns: u64) -> (Tree, Chart, u32) {
        let mut tree = Tree::default();
        let t = tree.name("T1");
        let root = tree.child(ROOT, t);
        let mut c = Chart {
            min_ns,
            frames: Vec::new(),
            pending: Vec::new(),
            lines: Vec::new(),
            now: None,
        };
        c.begin(root, 0);
        (tree, c, root)
    }

    fn text(tree: &Tree, c: &Chart) -> Vec<String> {
        tree.text(&c.lines).unwrap()
    }

    /// main(0..100) { a(10..20) { leaf(12..13) } leaf(30..31) leaf(31..90) }
    fn feed(tree: &mut Tree, c: &mut Chart) {
        let (main, a, leaf) = (tree.name("main"), tree.name("a"), tree.name("leaf"));
        c.open(tree, main, 0);
        c.open(tree, a, 10);
        c.open(tree, leaf, 12);
        c.close(tree, 13, 0);
        c.close(tree, 20, 0);
        c.open(tree, leaf, 30);
        c.close(tree, 31, 0);
        c.open(tree, leaf, 31);
        c.close(tree, 90, 0);
        c.close(tree, 100, 0);
        c.end(100);
    }

    #[test]
    fn every_call_in_time_order() {
        let (mut tree, mut c, _) = chart(0);
        feed(&mut tree, &mut c);
        assert_eq!(
            text(&tree, &c),
            [
                "T1;main 10",
                "T1;main;a 2",
                "T1;main;a;leaf 1",
                "T1;main;a 7",
                "T1;main 10",
                "T1;main;leaf 1",
                "T1;main 0",
                "T1;main;leaf 59",
                "T1;main 10"
            ]
        );
    }

    #[test]
    fn short_calls_fold_into_their_caller() {
        let (mut tree, mut c, _) = chart(5);
        feed(&mut tree, &mut c);
        // leaf(12..13) and leaf(30..31) are shorter than 5 ns.
        assert_eq!(
            text(&tree, &c),
            [
                "T1;main 10",
                "T1;main;a 10",
                "T1;main 11",
                "T1;main;leaf 59",
                "T1;main 10"
            ]
        );
        let (mut tree, mut c, _) = chart(1000);
        feed(&mut tree, &mut c);
        // So is main: everything is the thread's.
        assert_eq!(text(&tree, &c), ["T1 100"]);
    }

    #[test]
    fn flushing_keeps_what_may_fold() {
        let (mut tree, mut c, _) = chart(5);
        let (main, leaf) = (tree.name("main"), tree.name("leaf"));
        c.open(&mut tree, main, 0);
        for i in 0..3 * FLUSH as u64 {
            c.open(&mut tree, leaf, 10 * i);
            c.close(&mut tree, 10 * i + if i % 2 == 0 { 1 } else { 6 }, 0);
        }
        c.close(&mut tree, 40 * FLUSH as u64, 0);
        c.end(40 * FLUSH as u64);
        let total: u64 = c.lines.iter().map(|l| l.1).sum();
        assert_eq!(total, 40 * FLUSH as u64);
        let leaves = c
            .lines
            .iter()
            .filter(|l| tree.path(l.0).ends_with("leaf"))
            .count();
        assert_eq!(leaves, 3 * FLUSH / 2);
        assert!(c
            .lines
            .iter()
            .all(|l| !tree.path(l.0).ends_with("leaf") || l.1 == 6));
    }
}
