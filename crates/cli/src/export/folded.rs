//! Folded stacks, the input of `flamegraph.pl` and inferno: one line per
//! distinct call stack, its frames outermost first joined by `;`, then the
//! self time of its innermost frame summed over the trace, in nanoseconds:
//!
//! ```text
//! main 138000
//! main;a 1510
//! main;a;leaf 490
//! ```
//!
//! Lines are sorted by stack. The threads (and processes) of a trace
//! merge into one tree, as `flamegraph.pl` merges samples; with
//! `per_thread` each stack starts with its thread, `T<tid>`. Stacks whose
//! self time is 0 are left out. The values add up to the self times
//! `fntrace report` shows (calls that were never left count up to the last
//! event, `--time-filter` calls nest by time, calls whose exit was lost
//! count nothing themselves); the `function` tracer's entries have no
//! duration and give no line. The format has no room for a header: what
//! the trace lost is said on stderr.

use crate::trace::Demangle;
use std::io::{self, Write};

use fntrace_format::read::{Losses, Process};

use super::progress::Progress;
use super::stacks::{walk, FrameNames, SelfTimes, Tree, ROOT};

/// The folded stacks of a trace.
#[derive(Default)]
pub struct Folded {
    tree: Tree,
    /// Events read.
    pub events: u64,
    /// Damage notes of the thread files.
    pub damage: Vec<String>,
    /// What the trace lost.
    pub losses: Losses,
}

/// Reads `threads` into folded stacks.
pub fn collect(
    threads: &[(&Process, Vec<u32>)],
    per_thread: bool,
    demangle: Demangle,
    progress: &Progress,
) -> Folded {
    let mut tree = Tree::default();
    let mut folded = Folded::default();
    for (process, tids) in threads {
        let mut names = FrameNames::new(process, demangle);
        for &tid in tids {
            let base = if per_thread {
                let name = tree.name(&thread_frame(tid));
                tree.child(ROOT, name)
            } else {
                ROOT
            };
            let mut events = progress.events(process, tid);
            let mut frames = SelfTimes::new(base);
            let note = walk(
                &mut events,
                &mut names,
                &mut tree,
                &mut frames,
                progress,
                &mut folded.events,
            );
            folded.damage.extend(events.damage());
            folded.damage.extend(note);
            folded.losses.thread(events.source());
        }
        folded.losses.process(process);
    }
    folded.tree = tree;
    folded
}

impl Folded {
    /// `(stack, self ns)`, sorted by stack; fails when their text would be
    /// larger than [`TEXT_LIMIT`](super::stacks::TEXT_LIMIT).
    pub fn lines(&self) -> Result<Vec<(String, u64)>, String> {
        self.tree.folded()
    }
}

/// The frame that stands for thread `tid` at the bottom of its stacks.
pub fn thread_frame(tid: u32) -> String {
    format!("T{tid}")
}

/// Writes `lines` as folded stacks.
pub fn write(out: &mut impl Write, lines: &[(String, u64)]) -> io::Result<()> {
    for (stack, ns) in lines {
        writeln!(out, "{stack} {ns}")?;
    }
    Ok(())
}
