//! Per-function numbers over a whole trace, for `report` and `graph`: calls,
//! total, self, min, max, and the caller → callee edges. Functions are
//! keyed by the name shown (function ids belong to one process image).
//!
//! A recursive function's total counts only its outermost calls: the time
//! of a call nested in a call of the same function is already in the outer
//! call's. Calls arrive in post-order with their depth, so each depth keeps
//! the outermost totals, per function, of the finished subtrees below its
//! open call; a finished call replaces its own function's entry in what
//! its children left, then adds it all to its own depth.
//!
//! A call whose exit was lost (open when events were lost) has no known
//! duration: it is counted apart ([`Function::exit_lost`]), and neither
//! its time nor its self time counts anywhere; its callees' do.

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHashMap;
use std::mem;

use fntrace_filter::Filter;
use fntrace_format::calls::{Call, CallBuilder, End};
use fntrace_format::read::{EventKind, Losses, Process, Trace};

use crate::trace::Demangle;
use crate::trace::{self, Names};

/// The numbers of one function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Function {
    pub calls: u64,
    /// Time in its outermost calls.
    pub total_ns: u64,
    pub self_ns: u64,
    /// Shortest and longest call (of the calls with a duration).
    pub min_ns: u64,
    pub max_ns: u64,
    /// The durations of every call, nested ones included (for the average).
    pub sum_ns: u64,
    /// Shortest and longest self time of a call (`None`: not known, as in
    /// a profile table).
    pub self_range: Option<(u64, u64)>,
    /// Calls whose exit was lost: not in `calls`, nor in any time.
    pub exit_lost: u64,
}

impl Function {
    fn add_call(&mut self, total: u64, self_ns: u64) {
        self.min_ns = if self.calls == 0 {
            total
        } else {
            self.min_ns.min(total)
        };
        self.max_ns = self.max_ns.max(total);
        self.self_range = Some(match self.self_range {
            Some((lo, hi)) => (lo.min(self_ns), hi.max(self_ns)),
            None => (self_ns, self_ns),
        });
        self.calls += 1;
        self.self_ns = self.self_ns.saturating_add(self_ns);
        self.sum_ns = self.sum_ns.saturating_add(total);
    }

    /// The average duration of a call.
    pub fn avg_ns(&self) -> u64 {
        self.sum_ns.checked_div(self.calls).unwrap_or(0)
    }

    /// The average self time of a call.
    pub fn avg_self_ns(&self) -> u64 {
        self.self_ns.checked_div(self.calls).unwrap_or(0)
    }
}

/// Calls from one function to another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edge {
    pub calls: u64,
    pub total_ns: u64,
}

/// The numbers of a trace.
#[derive(Debug, Default)]
pub struct Stats {
    pub functions: BTreeMap<String, Function>,
    /// `(caller, callee)`; the caller is `None` for outermost calls.
    pub edges: BTreeMap<(Option<String>, String), Edge>,
    /// The names `select` matched.
    pub selected: Vec<String>,
    /// Events read.
    pub events: u64,
    /// Damage notes of the thread files.
    pub damage: Vec<String>,
    /// What the trace lost.
    pub losses: Losses,
    /// Calls whose exit was lost, in all.
    pub exit_lost: u64,
}

/// What to count.
pub struct Request<'a> {
    pub tids: &'a [u32],
    pub demangle: Demangle,
    /// Remember the names this filter selects.
    pub select: Option<&'a Filter>,
    /// A function recorded with its arguments (`-A`, `-a`) is counted per
    /// distinct argument list, as `name(args)` (`report --by-args`); the
    /// total of such a row is the sum of its calls' durations.
    pub by_args: bool,
    /// What of the events to count (`-F`, `-D`...).
    pub narrowing: &'a crate::narrow::Narrowing,
}

/// The numbers of one process, by function id.
#[derive(Default)]
struct Tally {
    functions: FxHashMap<u32, Function>,
    edges: FxHashMap<(Option<u32>, u32), Edge>,
    /// Calls with recorded arguments, by function and argument list.
    by_args: HashMap<(u32, std::sync::Arc<str>), Function>,
}

/// Counts the calls of `trace`. A process with a profile table counts from
/// it (it has no edges).
pub fn collect(trace: &Trace, request: &Request<'_>) -> Stats {
    let mut stats = Stats::default();
    for process in &trace.processes {
        let tally = match &process.profile {
            Some(rows) => {
                let mut tally = Tally::default();
                for row in rows {
                    tally.functions.insert(
                        row.fid,
                        Function {
                            calls: row.calls,
                            total_ns: row.total_ns,
                            self_ns: row.self_ns,
                            min_ns: row.min_ns,
                            max_ns: row.max_ns,
                            sum_ns: row.total_ns,
                            exit_lost: 0,
                            self_range: None,
                        },
                    );
                }
                tally
            }
            None => tally_events(process, request, &mut stats),
        };
        stats.losses.process(process);
        merge(&mut stats, process, tally, request);
    }
    stats
}

fn tally_events(process: &Process, request: &Request<'_>, stats: &mut Stats) -> Tally {
    let tids = request.tids;
    let mut tally = Tally::default();
    for &tid in process
        .tids
        .iter()
        .filter(|t| tids.is_empty() || tids.contains(t))
    {
        let mut events = request.narrowing.events(process, || process.events(tid));
        let mut builder = CallBuilder::new();
        let mut calls = Vec::new();
        let mut levels = Levels::default();
        let mut last_ns = 0;
        for ev in &mut events {
            stats.events += 1;
            last_ns = last_ns.max(ev.ns);
            if let EventKind::EntryCaller(addr) = ev.kind {
                // The function tracer: counts, and callers from addresses.
                let caller = trace::caller(&process.functions, addr);
                tally.functions.entry(ev.fid).or_default().calls += 1;
                tally.edges.entry((caller, ev.fid)).or_default().calls += 1;
                continue;
            }
            builder.push(&ev, &mut calls);
            for call in calls.drain(..) {
                tally.add(&call, &mut levels);
            }
        }
        stats.damage.extend(builder.note(events.label()));
        builder.finish(last_ns, &mut calls);
        for call in calls.drain(..) {
            tally.add(&call, &mut levels);
        }
        for (fid, total) in levels.drain() {
            let f = tally.functions.entry(fid).or_default();
            f.total_ns = f.total_ns.saturating_add(total);
        }
        stats.damage.extend(events.damage());
        stats.losses.thread(events.source());
    }
    tally
}

impl Tally {
    fn add(&mut self, call: &Call, levels: &mut Levels) {
        if call.end == End::ExitLost {
            self.functions.entry(call.fid).or_default().exit_lost += 1;
            levels.finish(call.depth as usize, None);
            return;
        }
        let total = call.total_ns();
        self.functions
            .entry(call.fid)
            .or_default()
            .add_call(total, call.self_ns);
        if let Some(args) = &call.args {
            let f = self.by_args.entry((call.fid, args.clone())).or_default();
            f.add_call(total, call.self_ns);
            f.total_ns = f.total_ns.saturating_add(total);
        }
        let edge = self.edges.entry((call.parent, call.fid)).or_default();
        edge.calls += 1;
        edge.total_ns = edge.total_ns.saturating_add(total);
        levels.finish(call.depth as usize, Some((call.fid, total)));
    }
}

/// Outermost totals per function of the finished subtrees at each depth.
#[derive(Default)]
struct Levels(Vec<FxHashMap<u32, u64>>);

impl Levels {
    /// A call at `depth` finished: of `fid`, `total` long (`None`: its
    /// time is unknown, only its callees' count).
    fn finish(&mut self, depth: usize, call: Option<(u32, u64)>) {
        if self.0.len() <= depth {
            self.0.resize_with(depth + 1, FxHashMap::default);
        }
        // Everything deeper belongs to this call's subtree.
        let mut below = FxHashMap::default();
        while self.0.len() > depth + 1 {
            let mut level = self.0.pop().unwrap_or_default();
            add_all(&mut below, &mut level);
        }
        if let Some((fid, total)) = call {
            below.insert(fid, total);
        }
        add_all(&mut self.0[depth], &mut below);
    }

    /// Everything left, summed over the depths.
    fn drain(&mut self) -> FxHashMap<u32, u64> {
        let mut all = FxHashMap::default();
        for mut level in self.0.drain(..) {
            add_all(&mut all, &mut level);
        }
        all
    }
}

/// Adds `from` into `into` (leaving `from` empty), iterating the smaller.
fn add_all(into: &mut FxHashMap<u32, u64>, from: &mut FxHashMap<u32, u64>) {
    if from.len() > into.len() {
        mem::swap(into, from);
    }
    for (fid, ns) in from.drain() {
        let v = into.entry(fid).or_default();
        *v = v.saturating_add(ns);
    }
}

/// Adds a process's numbers to `stats` under the functions' names.
fn merge(stats: &mut Stats, process: &Process, tally: Tally, request: &Request<'_>) {
    let mut names = Names::of(process, request.demangle);
    let mut functions: Vec<(u32, Option<std::sync::Arc<str>>, Function)> = Vec::new();
    for (fid, f) in tally.functions {
        if !(request.by_args && tally.by_args.keys().any(|(g, _)| *g == fid)) {
            functions.push((fid, None, f));
        }
    }
    if request.by_args {
        functions.extend(
            tally
                .by_args
                .into_iter()
                .map(|((fid, args), f)| (fid, Some(args), f)),
        );
    }
    for (fid, args, f) in functions {
        let name = names.get(fid);
        if request.select.is_some_and(|filter| name.matches(filter)) && !stats.selected.contains(&name.shown)
        {
            stats.selected.push(name.shown.clone());
        }
        let shown = match args {
            Some(args) => format!("{}({args})", crate::funcgraph::without_params(&name.shown)),
            None => name.shown.clone(),
        };
        let into = stats.functions.entry(shown).or_default();
        if f.calls > 0 {
            into.min_ns = if into.calls == 0 {
                f.min_ns
            } else {
                into.min_ns.min(f.min_ns)
            };
        }
        into.calls += f.calls;
        into.exit_lost += f.exit_lost;
        stats.exit_lost += f.exit_lost;
        into.total_ns = into.total_ns.saturating_add(f.total_ns);
        into.self_ns = into.self_ns.saturating_add(f.self_ns);
        into.max_ns = into.max_ns.max(f.max_ns);
        into.sum_ns = into.sum_ns.saturating_add(f.sum_ns);
        into.self_range = match (into.self_range, f.self_range) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (a, b) => a.or(b),
        };
    }
    for ((caller, callee), e) in tally.edges {
        let caller = caller.map(|c| names.shown(c).to_string());
        let callee = names.shown(callee).to_string();
        let into = stats.edges.entry((caller, callee)).or_default();
        into.calls += e.calls;
        into.total_ns = into.total_ns.saturating_add(e.total_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recursion_counts_outermost_calls() {
        // f(0..100) { f(10..60) { f(20..30) } g(70..80) }, then f(200..210)
        let mut levels = Levels::default();
        levels.finish(2, Some((1, 10)));
        levels.finish(1, Some((1, 50)));
        levels.finish(1, Some((2, 10)));
        levels.finish(0, Some((1, 100)));
        levels.finish(0, Some((1, 10)));
        let totals = levels.drain();
        assert_eq!(totals[&1], 110);
        assert_eq!(totals[&2], 10);
    }

    #[test]
    fn mutual_recursion() {
        // a(0..100) { b(0..90) { a(0..80) { b(0..10) } } }
        let mut levels = Levels::default();
        levels.finish(3, Some((2, 10)));
        levels.finish(2, Some((1, 80)));
        levels.finish(1, Some((2, 90)));
        levels.finish(0, Some((1, 100)));
        let totals = levels.drain();
        assert_eq!((totals[&1], totals[&2]), (100, 90));
    }
}
