//! The call graph as uftrace's `graph` shows it: every path of calls
//! merged into a tree (a calling-context tree), each node a function
//! reached by one path with its calls and times; under a function `FUNC`,
//! the tree of what its calls called, and every backtrace that reached it.
//!
//! ```text
//! ========== FUNCTION CALL GRAPH ==========
//! # TOTAL TIME   FUNCTION
//!   10.293 ms : (1) demo
//!   10.293 ms : (1) main
//!   46.626 us :  +-(2) foo
//!   44.360 us :  | (6) loop
//!             :  |
//!   10.138 ms :  +-(1) bar
//!   10.100 ms :    (1) usleep
//! ```
//!
//! A node with one callee shows it at its own level (one path, no
//! branch); with several, each callee hangs from a `+-` branch, the
//! earliest first. A call still open at the end of the thread counts up to
//! the last event read, as `report` counts it; one open when events were
//! lost has no known end: it is counted apart ([`CallTree::exit_lost`],
//! said on the first line) and in no time, as `report` does.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::io::{self, Write};

use fntrace_filter::Filter;
use fntrace_format::read::{EventKind, Losses, Process, Trace};
use fntrace_format::stack::CallStack;

use crate::funcgraph::MAX_INDENT;
use crate::narrow::{Narrowed, Narrowing};
use crate::trace::{self, Demangle, Name, Names};
use crate::units::human;

/// The line above a graph.
pub const GRAPH_BANNER: &str = "========== FUNCTION CALL GRAPH ==========";
/// The column titles of a graph.
pub const GRAPH_TITLE: &str = "# TOTAL TIME   FUNCTION";

/// How the function to graph is chosen.
#[derive(Clone, Copy)]
pub enum Selector<'a> {
    /// The functions a filter pattern selects (`graph FUNC`).
    Pattern(&'a Filter),
    /// The function of this name as shown (the terminal browser's cursor).
    Shown(&'a str),
}

impl Selector<'_> {
    fn selects(&self, name: &Name) -> bool {
        match self {
            Selector::Pattern(filter) => name.matches(filter),
            Selector::Shown(shown) => name.shown == *shown,
        }
    }
}

/// One node: a function reached by one path.
#[derive(Default)]
struct Node {
    name: u32,
    calls: u64,
    total_ns: u64,
    self_ns: u64,
    children: Vec<u32>,
}

/// A path that reached the function asked for: its hits and their time.
#[derive(Default)]
struct Backtrace {
    hits: u64,
    total_ns: u64,
    /// The order it was first seen in.
    first: usize,
}

/// `(N) ` calls before a name.
fn calls(n: u64) -> String {
    format!("({n}) ")
}

/// The merged call paths of the threads read.
pub struct CallTree {
    nodes: Vec<Node>,
    /// The child of a node by name.
    index: FxHashMap<(u32, u32), u32>,
    names: Vec<String>,
    name_ids: HashMap<String, u32>,
    /// The roots: a node per process (whole graph), or the function asked
    /// for (one node).
    roots: Vec<u32>,
    /// Under a function: its backtraces (names from the outermost call).
    backtraces: HashMap<Vec<u32>, Backtrace>,
    /// The function asked for, if any.
    func: Option<String>,
    /// `--srcline`: each name's place in its source, shown after it.
    places: Option<HashMap<u32, String>>,
    /// Events read.
    pub events: u64,
    /// What the threads read lost.
    pub losses: Losses,
    /// Calls open when events were lost: not counted (their ends are
    /// unknown).
    pub exit_lost: u64,
}

/// An open call of a thread.
struct Frame {
    /// Its node; none outside the function asked for.
    node: Option<u32>,
    name: u32,
    start_ns: u64,
    /// Time spent in its callees.
    child_ns: u64,
}

impl CallTree {
    /// A tree of whole processes (`func` none), or of the calls of the
    /// functions the pattern `func` selects.
    fn new(func: Option<&str>) -> CallTree {
        let mut tree = CallTree {
            nodes: Vec::new(),
            index: FxHashMap::default(),
            names: Vec::new(),
            name_ids: HashMap::new(),
            roots: Vec::new(),
            backtraces: HashMap::new(),
            func: func.map(str::to_string),
            places: None,
            events: 0,
            losses: Losses::new(),
            exit_lost: 0,
        };
        if let Some(func) = func {
            let name = tree.intern(func);
            tree.nodes.push(Node {
                name,
                ..Node::default()
            });
            tree.roots.push(0);
        }
        tree
    }

    /// The tree of the threads `tids` of `trace` (every thread: none
    /// given) as `narrowing` narrows them, of whole processes or (`func`,
    /// its pattern and filter) of the calls of the functions it selects;
    /// with `srclines`, each function's place in its source. Processes
    /// recorded as profile tables hold no call paths: left out. With the
    /// damage found.
    pub fn read(
        trace: &Trace,
        tids: &[u32],
        func: Option<(&str, Selector<'_>)>,
        narrowing: &Narrowing,
        demangle: Demangle,
        srclines: bool,
    ) -> (CallTree, Vec<String>) {
        let mut selected = trace::select(trace, tids);
        selected.retain(|(p, _)| p.profile.is_none());
        let mut tree = CallTree::new(func.map(|(f, _)| f));
        if srclines {
            tree.places = Some(HashMap::new());
        }
        let mut damage = Vec::new();
        for (process, tids) in &selected {
            let mut names = Names::of(process, demangle);
            let threads = tids
                .iter()
                .map(|&t| narrowing.events(process, || process.events(t)));
            damage.extend(tree.add_process(process, threads.collect(), func.map(|(_, f)| f), &mut names));
        }
        (tree, damage)
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.name_ids.insert(name.to_string(), id);
        id
    }

    fn child(&mut self, parent: u32, name: u32) -> u32 {
        if let Some(&id) = self.index.get(&(parent, name)) {
            return id;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            name,
            ..Node::default()
        });
        self.nodes[parent as usize].children.push(id);
        self.index.insert((parent, name), id);
        id
    }

    /// Adds the threads `events` of `process`. With a function asked for
    /// (`func`), only its calls and what they call make nodes.
    fn add_process(
        &mut self,
        process: &Process,
        threads: Vec<Narrowed>,
        func: Option<Selector<'_>>,
        names: &mut Names<'_>,
    ) -> Vec<String> {
        let root = match func {
            Some(_) => None,
            None => {
                let exe = process.info.argv.first().unwrap_or(&process.info.exe);
                let name = self.intern(exe.rsplit('/').next().unwrap_or(exe));
                self.nodes.push(Node {
                    name,
                    ..Node::default()
                });
                let id = self.nodes.len() as u32 - 1;
                self.roots.push(id);
                Some(id)
            }
        };
        let mut ids: FxHashMap<u32, (u32, bool)> = FxHashMap::default();
        let mut damage = Vec::new();
        for mut events in threads {
            let mut stack: CallStack<Frame> = CallStack::new();
            let mut last_ns = 0;
            for ev in &mut events {
                self.events += 1;
                last_ns = last_ns.max(ev.ns);
                let (name, selected) = *ids.entry(ev.fid).or_insert_with(|| {
                    let place = names.srcline(ev.fid);
                    let name = names.get(ev.fid);
                    let selected = func.is_some_and(|f| f.selects(name));
                    let shown = name.shown.clone();
                    let id = self.intern(&shown);
                    if let (Some(places), Some(place)) = (self.places.as_mut(), place) {
                        places.entry(id).or_insert_with(|| place.to_string());
                    }
                    (id, selected)
                });
                let parent = match stack.last() {
                    Some((_, f)) => f.node,
                    None => root,
                };
                match ev.kind {
                    EventKind::Entry => {
                        let node = match parent {
                            Some(parent) => Some(self.child(parent, name)),
                            // The outermost call of the function asked for.
                            None if selected => {
                                let path = stack.values_mut().map(|f| f.name).chain([name]).collect();
                                let n = self.backtraces.len();
                                self.backtraces.entry(path).or_insert(Backtrace {
                                    first: n,
                                    ..Backtrace::default()
                                });
                                Some(0)
                            }
                            None => None,
                        };
                        let frame = Frame {
                            node,
                            name,
                            start_ns: ev.ns,
                            child_ns: 0,
                        };
                        stack.push(ev.fid, frame);
                    }
                    EventKind::Exit | EventKind::Unwind => {
                        if let Some(pos) = stack.position(ev.fid) {
                            while stack.len() > pos {
                                self.close(&mut stack, ev.ns);
                            }
                        }
                    }
                    EventKind::Call { dur_ns } => self.whole(&mut stack, parent, name, selected, dur_ns),
                    EventKind::EntryCaller(_) => self.whole(&mut stack, parent, name, selected, 0),
                    EventKind::Lost(_) => stack.lose(),
                    _ => {}
                }
            }
            while !stack.is_empty() {
                self.close(&mut stack, last_ns);
            }
            damage.extend(events.damage());
            damage.extend(stack.note(events.label()));
            self.losses.thread(events.source());
        }
        self.losses.process(process);
        damage
    }

    /// A whole call (`--time-filter`), or an entry of the `function`
    /// tracer (no time), under `parent`.
    fn whole(
        &mut self,
        stack: &mut CallStack<Frame>,
        parent: Option<u32>,
        name: u32,
        selected: bool,
        dur: u64,
    ) {
        let node = match parent {
            Some(parent) => self.child(parent, name),
            None if selected => 0,
            None => return,
        };
        let n = &mut self.nodes[node as usize];
        n.calls += 1;
        n.total_ns += dur;
        n.self_ns += dur;
        if let Some(f) = stack.last_mut() {
            f.child_ns += dur;
        }
    }

    /// Closes the innermost open call at `ns`.
    fn close(&mut self, stack: &mut CallStack<Frame>, ns: u64) {
        // Open when events were lost: its exit may be among them, its end
        // is unknown. Counted apart, as `report` counts it, in no time.
        let lost = stack.top_spans_loss();
        let Some((_, frame)) = stack.pop() else {
            return;
        };
        if lost {
            self.exit_lost += u64::from(frame.node.is_some());
            return;
        }
        let dur = ns.saturating_sub(frame.start_ns);
        let outermost = stack.last().is_none_or(|(_, f)| f.node.is_none());
        if let Some(node) = frame.node {
            let n = &mut self.nodes[node as usize];
            n.calls += 1;
            n.total_ns += dur;
            n.self_ns += dur.saturating_sub(frame.child_ns);
            if node == 0 && self.func.is_some() && outermost {
                let path: Vec<u32> = stack.values_mut().map(|f| f.name).chain([frame.name]).collect();
                if let Some(b) = self.backtraces.get_mut(&path) {
                    b.hits += 1;
                    b.total_ns += dur;
                }
            }
        }
        if let Some(parent) = stack.last_mut() {
            parent.child_ns += dur;
        }
    }
}

impl CallTree {
    /// Whether no call was counted.
    pub fn is_empty(&self) -> bool {
        self.roots
            .iter()
            .all(|&r| self.nodes[r as usize].calls == 0 && self.nodes[r as usize].children.is_empty())
    }

    /// The calls and total time of a node; a process's node has one call
    /// lasting as long as its outermost calls.
    fn totals(&self, id: u32) -> (u64, u64) {
        let n = &self.nodes[id as usize];
        if self.func.is_none() && self.roots.contains(&id) {
            let total = n.children.iter().map(|&c| self.nodes[c as usize].total_ns).sum();
            return (1, total);
        }
        (n.calls, n.total_ns)
    }

    /// The roots: a node per process, or the function asked for.
    pub fn roots(&self) -> &[u32] {
        &self.roots
    }

    /// The name of node `id`.
    pub fn name(&self, id: u32) -> &str {
        &self.names[self.nodes[id as usize].name as usize]
    }

    /// The callees of node `id`, the earliest first.
    pub fn children(&self, id: u32) -> &[u32] {
        &self.nodes[id as usize].children
    }

    /// The backtraces' lines (under a function; none otherwise), the most
    /// hit first.
    pub fn backtrace_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(func) = &self.func {
            lines.push(format!("# Function Call Graph for '{func}'"));
            lines.push("=============== BACKTRACE ===============".to_string());
            let mut traces: Vec<(&Vec<u32>, &Backtrace)> = self.backtraces.iter().collect();
            traces.sort_by(|a, b| b.1.hits.cmp(&a.1.hits).then(a.1.first.cmp(&b.1.first)));
            for (i, (path, b)) in traces.iter().enumerate() {
                lines.push(format!(
                    " backtrace #{i}: hit {}, time {:>10}",
                    b.hits,
                    human(b.total_ns)
                ));
                for (depth, name) in path.iter().enumerate() {
                    lines.push(format!("   [{depth}] {}", self.names[*name as usize]));
                }
                lines.push(String::new());
            }
        }
        lines
    }

    /// Writes the backtraces (under a function) and the graph.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        for line in self.backtrace_lines() {
            writeln!(out, "{line}")?;
        }
        writeln!(out, "{GRAPH_BANNER}")?;
        writeln!(out, "{GRAPH_TITLE}")?;
        for (i, &root) in self.roots.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            self.walk(root, &|_| false, &mut |line| match line {
                Line::Node { text, .. } | Line::Blank(text) => writeln!(out, "{text}"),
            })?;
        }
        Ok(())
    }

    fn line(&self, id: u32, prefix: &str) -> String {
        let (n, total) = self.totals(id);
        let name_id = self.nodes[id as usize].name;
        let name = &self.names[name_id as usize];
        let place = match self.places.as_ref().and_then(|p| p.get(&name_id)) {
            Some(at) => format!(" [{at}]"),
            None => String::new(),
        };
        format!("{:>12} : {prefix}{}{name}{place}", human(total), calls(n))
    }

    /// The lines of `root` and its callees, depth first, without recursion
    /// (a file may nest calls 131,072 deep); the callees of a node
    /// `folded` says are left out.
    pub fn walk<E>(
        &self,
        root: u32,
        folded: &dyn Fn(u32) -> bool,
        visit: &mut dyn FnMut(Line) -> Result<(), E>,
    ) -> Result<(), E> {
        visit(Line::Node {
            id: root,
            text: self.line(root, ""),
        })?;
        let mut todo = Vec::new();
        if !folded(root) {
            self.push_children(&mut todo, root, String::new());
        }
        while let Some(step) = todo.pop() {
            match step {
                Step::Blank(prefix) => visit(Line::Blank(format!("{:>12} : {prefix} |", "")))?,
                Step::Node { id, line, below } => {
                    visit(Line::Node {
                        id,
                        text: self.line(id, &line),
                    })?;
                    if !folded(id) {
                        self.push_children(&mut todo, id, below);
                    }
                }
            }
        }
        Ok(())
    }

    /// Schedules the callees of node `id`, their lines after `prefix`: one
    /// at the same level, several on branches with a blank line between.
    fn push_children(&self, todo: &mut Vec<Step>, id: u32, prefix: String) {
        match self.nodes[id as usize].children.as_slice() {
            [] => {}
            [only] => todo.push(Step::Node {
                id: *only,
                line: prefix.clone(),
                below: prefix,
            }),
            several => {
                for (i, &child) in several.iter().enumerate().rev() {
                    let last = i + 1 == several.len();
                    if !last {
                        todo.push(Step::Blank(prefix.clone()));
                    }
                    // Indentation stops growing at MAX_INDENT branches.
                    let below = match prefix.len() >= 3 * MAX_INDENT {
                        true => prefix.clone(),
                        false => format!("{prefix}{}", if last { "   " } else { " | " }),
                    };
                    let line = format!("{prefix} +-");
                    todo.push(Step::Node {
                        id: child,
                        line,
                        below,
                    });
                }
            }
        }
    }
}

/// A line of the graph.
pub enum Line {
    /// Node `id`'s line.
    Node { id: u32, text: String },
    /// The blank line between two branches.
    Blank(String),
}

/// What is left to write of a tree.
enum Step {
    /// A node's line after `line`, its callees after `below`.
    Node { id: u32, line: String, below: String },
    /// The blank line between two branches.
    Blank(String),
}
