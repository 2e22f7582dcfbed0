//! Call stacks for folded stacks and flame graphs: a [`Tree`] of the
//! distinct stacks of a trace (a node per path of frame names, so memory
//! grows with the number of distinct stacks, not with the trace), and
//! [`walk`], which turns a thread's events into frames opened and closed
//! in time order.
//!
//! The calls are the format crate's [`CallBuilder`]'s — the ones `report`
//! counts, so folded self times add up to `report`'s: entries open calls,
//! exits close them (and the calls above them, unwound), unmatched exits
//! are ignored, calls still open at the end close at the last event; a
//! call whose exit was lost closes where the builder closes it, with no
//! self time (its time is unknown). The
//! builder hands out calls innermost first as they close, which is the top
//! of the stack [`walk`] keeps beside it. `--time-filter` calls (`CALL`
//! events) arrive after their children and are nested by the builder at
//! the end of the thread; [`walk`] replays them in start order. Entries of
//! the `function` tracer have no duration and are left out.
//!
//! A stack's text grows with its depth, so the text of all the stacks can
//! grow with the square of a nesting depth: [`Tree::text`] makes it only
//! up to [`TEXT_LIMIT`] bytes (`docs/FORMAT.md`, "Limits").

use crate::narrow::Narrowed;
use crate::trace::Demangle;
use std::collections::HashMap;

use fntrace_format::calls::{Call, CallBuilder, End};
use fntrace_format::read::{EventKind, Process};

use super::progress::Progress;
use crate::trace::Names;

/// The root of a [`Tree`]: the empty stack.
pub const ROOT: u32 = 0;

/// The most text folded stacks (and the lines of flame graphs and charts)
/// are made into.
pub const TEXT_LIMIT: u64 = 256 << 20;

/// One distinct stack: its innermost frame's name under its parent.
struct Node {
    parent: u32,
    name: u32,
    /// Self time of the innermost frame, summed (ns).
    self_ns: u64,
    /// The length of its text ([`Tree::path`]).
    len: u64,
}

/// The distinct stacks of a trace, with interned frame names.
pub struct Tree {
    names: Vec<String>,
    index: HashMap<String, u32>,
    nodes: Vec<Node>,
    children: HashMap<(u32, u32), u32>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            names: Vec::new(),
            index: HashMap::new(),
            nodes: vec![Node {
                parent: ROOT,
                name: u32::MAX,
                self_ns: 0,
                len: 0,
            }],
            children: HashMap::new(),
        }
    }
}

impl Tree {
    /// The id of frame name `name`. A `;` (which separates frames in
    /// folded stacks, and occurs in Rust names like `[u8; 4]`) becomes `,`.
    pub fn name(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let clean: String = name
            .chars()
            .map(|c| match c {
                ';' => ',',
                '\n' | '\r' => ' ',
                c => c,
            })
            .collect();
        let id = match self.index.get(&clean) {
            Some(&id) => id,
            None => {
                self.names.push(clean.clone());
                let id = (self.names.len() - 1) as u32;
                self.index.insert(clean, id);
                id
            }
        };
        self.index.insert(name.to_string(), id);
        id
    }

    /// The stack `parent` with frame `name` on top.
    pub fn child(&mut self, parent: u32, name: u32) -> u32 {
        let next = self.nodes.len() as u32;
        let id = *self.children.entry((parent, name)).or_insert(next);
        if id == next {
            let above = self.nodes.get(parent as usize).map_or(0, |p| p.len);
            let name_len = self.names.get(name as usize).map_or(0, String::len) as u64;
            self.nodes.push(Node {
                parent,
                name,
                self_ns: 0,
                len: above + u64::from(above > 0) + name_len,
            });
        }
        id
    }

    /// Adds `ns` to the self time of stack `node`.
    pub fn add(&mut self, node: u32, ns: u64) {
        if let Some(n) = self.nodes.get_mut(node as usize) {
            n.self_ns = n.self_ns.saturating_add(ns);
        }
    }

    /// The frames of stack `node`, outermost first, joined by `;`.
    pub fn path(&self, node: u32) -> String {
        let mut frames = Vec::new();
        let mut at = node;
        while at != ROOT {
            let n = &self.nodes[at as usize];
            frames.push(self.names[n.name as usize].as_str());
            at = n.parent;
        }
        frames.reverse();
        frames.join(";")
    }

    /// Fails, saying why, when the lines `path value` of `(stack, value)`
    /// pairs would take more than [`TEXT_LIMIT`] bytes.
    fn check(&self, lines: &[(u32, u64)]) -> Result<(), String> {
        let total = lines.iter().fold(0u64, |sum, &(node, value)| {
            let len = self.nodes.get(node as usize).map_or(0, |n| n.len);
            let digits = value.checked_ilog10().unwrap_or(0) + 1;
            sum.saturating_add(len + 2 + u64::from(digits))
        });
        if total > TEXT_LIMIT {
            return Err(format!(
                "the stacks would take {total} bytes of text, more than the {} MiB limit \
                 (calls nested thousands deep, or very many distinct stacks)",
                TEXT_LIMIT >> 20
            ));
        }
        Ok(())
    }

    /// The lines `path value` of `(stack, value)` pairs, if they take at
    /// most [`TEXT_LIMIT`] bytes.
    pub fn text(&self, lines: &[(u32, u64)]) -> Result<Vec<String>, String> {
        self.check(lines)?;
        Ok(lines
            .iter()
            .map(|&(node, value)| format!("{} {value}", self.path(node)))
            .collect())
    }

    /// The folded stacks: `(path, self ns)` for every stack with a self
    /// time, sorted by path, if they take at most [`TEXT_LIMIT`] bytes.
    pub fn folded(&self) -> Result<Vec<(String, u64)>, String> {
        let nodes: Vec<(u32, u64)> = (1..self.nodes.len() as u32)
            .map(|n| (n, self.nodes[n as usize].self_ns))
            .filter(|&(_, ns)| ns > 0)
            .collect();
        self.check(&nodes)?;
        let mut lines: Vec<(String, u64)> = nodes.iter().map(|&(n, ns)| (self.path(n), ns)).collect();
        lines.sort_unstable();
        lines.dedup_by(|b, a| {
            let same = a.0 == b.0;
            if same {
                a.1 = a.1.saturating_add(b.1);
            }
            same
        });
        Ok(lines)
    }
}

/// One process's function ids as frame names of a [`Tree`].
pub struct FrameNames<'p> {
    names: Names<'p>,
    /// By function id; `u32::MAX` until made.
    ids: Vec<u32>,
}

impl<'p> FrameNames<'p> {
    pub fn new(process: &'p Process, demangle: Demangle) -> Self {
        FrameNames {
            names: Names::of(process, demangle),
            ids: vec![u32::MAX; process.functions.len()],
        }
    }

    /// The frame name of function `fid`.
    pub fn get(&mut self, fid: u32, tree: &mut Tree) -> u32 {
        match self.ids.get(fid as usize) {
            Some(&id) if id != u32::MAX => id,
            Some(_) => {
                let id = tree.name(self.names.shown(fid));
                self.ids[fid as usize] = id;
                id
            }
            // Not in the function table (damaged data).
            None => tree.name(self.names.shown(fid)),
        }
    }
}

/// What is done with the frames of a thread, in time order.
pub trait Frames {
    /// A call of frame name `name` started at `ns`.
    fn open(&mut self, tree: &mut Tree, name: u32, ns: u64);
    /// The innermost open call ended at `ns`, `self_ns` of it in itself.
    fn close(&mut self, tree: &mut Tree, ns: u64, self_ns: u64);
}

/// Feeds the calls of `events` to `frames`; counts the events in `count`
/// (and shows them on `progress`). Returns the damage note of calls nested
/// too deep, left out.
pub fn walk(
    events: &mut Narrowed,
    names: &mut FrameNames<'_>,
    tree: &mut Tree,
    frames: &mut impl Frames,
    progress: &Progress,
    count: &mut u64,
) -> Option<String> {
    let mut builder = CallBuilder::new();
    let mut calls = Vec::new();
    let mut last_ns = 0;
    for ev in &mut *events {
        *count += 1;
        progress.tick(*count);
        last_ns = last_ns.max(ev.ns);
        if let EventKind::EntryCaller(_) = ev.kind {
            continue;
        }
        let depth = builder.depth();
        builder.push(&ev, &mut calls);
        for call in calls.drain(..) {
            frames.close(tree, call.end_ns, known_self(&call));
        }
        // An entry the builder took (not one left out, too deep).
        if ev.kind == EventKind::Entry && builder.depth() > depth {
            let name = names.get(ev.fid, tree);
            frames.open(tree, name, ev.ns);
        }
    }
    let note = builder.note(events.label());
    let open = builder.depth();
    builder.finish(last_ns, &mut calls);
    let open = open.min(calls.len());
    for call in calls.drain(..open) {
        frames.close(tree, call.end_ns, known_self(&call));
    }
    // What is left are the `CALL` events, nested, in post-order: by start
    // (then depth) they come parents first.
    calls.sort_by_key(|c| (c.start_ns, c.depth));
    let mut ends: Vec<(u64, u64)> = Vec::new();
    for call in &calls {
        while ends.len() > call.depth as usize {
            let Some((end, self_ns)) = ends.pop() else { break };
            frames.close(tree, end, self_ns);
        }
        let name = names.get(call.fid, tree);
        frames.open(tree, name, call.start_ns);
        ends.push((call.end_ns, call.self_ns));
    }
    while let Some((end, self_ns)) = ends.pop() {
        frames.close(tree, end, self_ns);
    }
    progress.update();
    note
}

/// A call's self time, 0 when its exit was lost (its time is unknown).
fn known_self(call: &Call) -> u64 {
    match call.end {
        End::ExitLost => 0,
        _ => call.self_ns,
    }
}

/// Self times summed per stack: the folded stacks.
pub struct SelfTimes {
    stack: Vec<u32>,
}

impl SelfTimes {
    /// Stacks under `base` ([`ROOT`], or a thread's own root frame).
    pub fn new(base: u32) -> Self {
        SelfTimes { stack: vec![base] }
    }
}

impl Frames for SelfTimes {
    fn open(&mut self, tree: &mut Tree, name: u32, _ns: u64) {
        let top = self.stack.last().copied().unwrap_or(ROOT);
        self.stack.push(tree.child(top, name));
    }

    fn close(&mut self, tree: &mut Tree, _ns: u64, self_ns: u64) {
        if self.stack.len() > 1 {
            if let Some(node) = self.stack.pop() {
                tree.add(node, self_ns);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_merge_and_sort() {
        let mut t = Tree::default();
        let (main, a, b) = (t.name("main"), t.name("a"), t.name("<[u8; 4]>::b"));
        let m = t.child(ROOT, main);
        let ma = t.child(m, a);
        let mab = t.child(ma, b);
        assert_eq!(t.child(m, a), ma);
        t.add(m, 5);
        t.add(mab, 7);
        t.add(ma, 0);
        let mb = t.child(m, b);
        t.add(mb, 1);
        assert_eq!(
            t.folded().unwrap(),
            [
                ("main".to_string(), 5),
                ("main;<[u8, 4]>::b".to_string(), 1),
                ("main;a;<[u8, 4]>::b".to_string(), 7)
            ]
        );
        // Two names that clean up alike are one frame.
        assert_eq!(t.name("<[u8, 4]>::b"), b);
    }

    #[test]
    fn text_grows_with_depth_squared_up_to_a_limit() {
        // A chain of `depth` frames `f`, each with a self time: the text
        // is depth * depth bytes, give or take.
        let chain = |depth: usize| {
            let mut t = Tree::default();
            let f = t.name("f");
            let mut at = ROOT;
            for _ in 0..depth {
                at = t.child(at, f);
                t.add(at, 1);
            }
            t
        };
        let lines = chain(100).folded().unwrap();
        assert_eq!(lines.len(), 100);
        assert_eq!(lines[99].0.len(), 199);
        let e = chain(17_000).folded().unwrap_err();
        assert!(
            e.starts_with("the stacks would take 289051000 bytes of text, more than the 256 MiB limit"),
            "{e}"
        );
    }
}
