//! The call graph in the browser: `graph`'s lines (`crate::calltree`),
//! each node folded and unfolded under the cursor. The whole graph (`G`)
//! and the graph of one function with its backtraces (`g`) are both this
//! view.

use rustc_hash::FxHashSet;

use crate::calltree::{CallTree, Line, GRAPH_BANNER, GRAPH_TITLE};

use super::pane::{circular, Pane, Row};

/// A call graph, some of its nodes folded.
pub struct TreeView {
    pub tree: CallTree,
    /// Lines before the graph (the backtraces of a function).
    preamble: Vec<String>,
    /// Nodes whose callees are hidden.
    folded: FxHashSet<u32>,
    /// Each node's caller (none for a root).
    parents: Vec<Option<u32>>,
    pub pane: Pane,
}

impl TreeView {
    pub fn new(tree: CallTree) -> TreeView {
        let mut parents = Vec::new();
        let mut todo: Vec<u32> = tree.roots().to_vec();
        while let Some(id) = todo.pop() {
            for &child in tree.children(id) {
                if parents.len() <= child as usize {
                    parents.resize(child as usize + 1, None);
                }
                parents[child as usize] = Some(id);
                todo.push(child);
            }
        }
        // A function's graph: its backtraces scroll with it.
        let mut preamble = tree.backtrace_lines();
        let header = match preamble.is_empty() {
            true => vec![GRAPH_TITLE.to_string()],
            false => {
                preamble.push(GRAPH_BANNER.to_string());
                preamble.push(GRAPH_TITLE.to_string());
                Vec::new()
            }
        };
        let mut view = TreeView {
            tree,
            preamble,
            folded: FxHashSet::default(),
            parents,
            pane: Pane::new(header, Vec::new()),
        };
        view.refresh();
        // The cursor on the (first) function, under the lines before it.
        if let Some(&root) = view.tree.roots().first() {
            view.pane.go_to_key(root);
        }
        view
    }

    /// The name of the function under the cursor.
    pub fn name(&self) -> Option<&str> {
        self.pane.key().map(|id| self.tree.name(id))
    }

    /// Rebuilds the rows after a fold or unfold.
    fn refresh(&mut self) {
        let mut rows: Vec<Row> = self.preamble.iter().map(Row::text).collect();
        let tree = &self.tree;
        let folded = &self.folded;
        for &root in tree.roots() {
            let _ = tree.walk::<()>(root, &|id| folded.contains(&id), &mut |line| {
                if let Line::Node { id, text } = line {
                    let mark = match (tree.children(id).is_empty(), folded.contains(&id)) {
                        (true, _) => ' ',
                        (false, true) => '+',
                        (false, false) => '-',
                    };
                    rows.push(Row {
                        text: format!("{mark}{text}"),
                        key: Some(id),
                    });
                }
                Ok(())
            });
        }
        if rows.is_empty() {
            rows.push(Row::text(
                "(no call paths: a profile table, --tracer profile, keeps totals only; R shows them)",
            ));
        }
        self.pane.set_rows(rows);
    }

    /// Enter: folds an unfolded node, unfolds a folded one.
    pub fn toggle(&mut self) {
        if let Some(id) = self.pane.key() {
            if !self.folded.remove(&id) && !self.tree.children(id).is_empty() {
                self.folded.insert(id);
            }
            self.refresh();
        }
    }

    /// Left: folds the node, or (folded already, or a leaf) goes to its
    /// caller.
    pub fn left(&mut self) {
        let Some(id) = self.pane.key() else { return };
        if !self.tree.children(id).is_empty() && self.folded.insert(id) {
            self.refresh();
        } else {
            self.parent();
        }
    }

    /// Right: unfolds the node.
    pub fn right(&mut self) {
        if let Some(id) = self.pane.key() {
            if self.folded.remove(&id) {
                self.refresh();
            }
        }
    }

    /// `u`: to the caller of the node under the cursor.
    pub fn parent(&mut self) {
        let parent = self
            .pane
            .key()
            .and_then(|id| self.parents.get(id as usize).copied().flatten());
        if let Some(parent) = parent {
            self.pane.go_to_key(parent);
        }
    }

    /// `c`: folds each callee of the node (its callees shown, theirs not).
    pub fn fold_children(&mut self) {
        if let Some(id) = self.pane.key() {
            self.folded.remove(&id);
            for &child in self.tree.children(id) {
                if !self.tree.children(child).is_empty() {
                    self.folded.insert(child);
                }
            }
            self.refresh();
        }
    }

    /// `e`: unfolds the node and everything under it.
    pub fn unfold_all_under(&mut self) {
        let Some(id) = self.pane.key() else { return };
        let mut todo = vec![id];
        while let Some(id) = todo.pop() {
            self.folded.remove(&id);
            todo.extend_from_slice(self.tree.children(id));
        }
        self.refresh();
    }

    /// `C` / `E`: folds every function the outermost calls call (a
    /// process's root and its `main` stay open), or unfolds everything.
    pub fn fold_everything(&mut self, fold: bool) {
        self.folded.clear();
        if fold {
            let tree = &self.tree;
            let outermost = tree.roots().iter().flat_map(|&r| tree.children(r));
            for &called in outermost.flat_map(|&o| tree.children(o)) {
                if !tree.children(called).is_empty() {
                    self.folded.insert(called);
                }
            }
        }
        self.refresh();
    }

    /// The next node after the cursor (`forward`) or before it whose name
    /// `matches`, folded or not, in the graph's order; unfolds the way to
    /// it and puts the cursor on it.
    pub fn find(&mut self, matches: &dyn Fn(&str) -> bool, forward: bool) -> bool {
        // Every node in the graph's order (depth first, callees earliest
        // first), folded or not.
        let tree = &self.tree;
        let mut order = Vec::new();
        let mut todo: Vec<u32> = tree.roots().iter().rev().copied().collect();
        while let Some(id) = todo.pop() {
            order.push(id);
            todo.extend(tree.children(id).iter().rev());
        }
        let at = self.pane.key().and_then(|k| order.iter().position(|&id| id == k));
        let start = at.unwrap_or(if forward { order.len().saturating_sub(1) } else { 0 });
        let hit = circular(start, order.len(), forward)
            .map(|i| order[i])
            .find(|&id| matches(tree.name(id)));
        let Some(hit) = hit else { return false };
        let mut up = self.parents.get(hit as usize).copied().flatten();
        while let Some(id) = up {
            self.folded.remove(&id);
            up = self.parents.get(id as usize).copied().flatten();
        }
        self.refresh();
        self.pane.go_to_key(hit)
    }
}
