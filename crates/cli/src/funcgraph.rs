//! The kernel's function_graph layout for one process's merged threads:
//!
//! ```text
//! # TID    DURATION       FUNCTION
//!  4321)               |  main() {
//!  4321)   0.190 us    |    leaf();
//!  4321) + 11.356 us   |  } /* main */
//! ```
//!
//! An entry immediately followed by its own exit (in its thread) is one
//! line. A call open when events were lost closes, wherever the reader
//! closes it, as `} /* f (exit lost) */` without a duration: its exit may
//! be among the events lost. Entries with a caller (tracer `function`) print as the kernel's
//! `function` tracer does: `TID)  SECONDS: func <-caller+0xoff`.
//!
//! Indentation stops growing at [`MAX_INDENT`] levels; a deeper line
//! starts with its level instead (`[depth 70] f() {`). At most
//! `MAX_DEPTH` (`fntrace_format::stack`) calls of a thread are open: deeper entries are left out
//! with a damage note ([`ProcessView::notes`]).
//!
//! It prints what it is given: the filters (`-F`, `-D`, `-C`...) narrow
//! the threads' events before they reach it (`crate::narrow`). A call whose
//! callees were all left out is one line, as a leaf is.

use std::collections::HashMap;
use std::io::{self, Write};

use fntrace_format::read::{Event, EventKind, Process};
use fntrace_format::stack::CallStack;
use fntrace_format::values::{self, Value};

use crate::columns::{Cell, Columns, Field};
use crate::merge::Merge;
use crate::trace::Demangle;
use crate::trace::Names;
use crate::units::{push_decimal, push_spaces};

/// How lines look, the same for every process.
pub struct Style {
    /// Colour durations by their mark.
    pub color: bool,
    /// Columns of the TID field.
    pub width: usize,
    /// `-f`: the columns before the function.
    pub fields: Vec<Field>,
    /// `--srcline`: each call's opening line ends with its function's
    /// place in the source, `/* FILE:LINE */`.
    pub srcline: bool,
    /// `--column-view`: each thread's calls start this many levels to the
    /// right of the previous thread's (uftrace's `--column-offset`).
    pub column: Option<usize>,
}

impl Style {
    /// The first line: column titles over the graph, or over the
    /// `function` tracer's lines.
    pub fn header(&self, function_tracer: bool) -> String {
        self.columns().header(function_tracer)
    }

    fn columns(&self) -> Columns {
        Columns {
            fields: self.fields.clone(),
            tid_width: self.width,
        }
    }
}

/// Levels of indentation shown; deeper lines are indented as much and
/// start with their level.
pub const MAX_INDENT: usize = 64;

/// An open call of a thread.
struct Frame {
    start_ns: u64,
    /// Open calls on the stack, this one included: the indentation of
    /// what it calls.
    level: usize,
    /// Opened with its arguments: named without its parameter list, as
    /// its closing line names it too.
    short: bool,
}

/// The printing state of one process's threads.
pub struct ProcessView<'s, 'p> {
    style: &'s Style,
    names: Names<'p>,
    /// The process start (ns), the origin of `function` tracer timestamps.
    start_ns: u64,
    stacks: Vec<CallStack<Frame>>,
    columns: Columns,
    /// The time of each thread's last line (`-f delta`).
    last_ns: HashMap<u32, u64>,
    /// `--column-view`: each thread's column, in the order they first
    /// print.
    columns_of: HashMap<u32, usize>,
    /// The line being made (one buffer for every line: no allocation).
    buf: String,
    /// The text of the line being made, after its indentation.
    text: String,
}

impl<'s, 'p> ProcessView<'s, 'p> {
    pub fn new(style: &'s Style, process: &'p Process, threads: usize, demangle: Demangle) -> Self {
        ProcessView {
            style,
            names: Names::of(process, demangle),
            start_ns: process.info.clock.mono0_ns,
            stacks: (0..threads).map(|_| CallStack::new()).collect(),
            columns: style.columns(),
            last_ns: HashMap::new(),
            columns_of: HashMap::new(),
            buf: String::new(),
            text: String::new(),
        }
    }

    /// Prints every event of `merge` (narrowed as the reading asks).
    pub fn run(&mut self, out: &mut impl Write, merge: &mut Merge) -> io::Result<()> {
        while let Some((i, ev)) = merge.next_event() {
            self.event(out, merge, i, ev)?;
        }
        Ok(())
    }

    /// The damage notes of threads with entries nested too deep, left out.
    pub fn notes(&self, merge: &Merge) -> Vec<String> {
        (0..self.stacks.len())
            .filter_map(|i| self.stacks[i].note(merge.label(i)))
            .collect()
    }

    /// The indentation of a call opened now in thread `i`.
    fn level(&self, i: usize) -> usize {
        self.stacks[i].last().map_or(0, |(_, f)| f.level)
    }

    fn event(&mut self, out: &mut impl Write, merge: &mut Merge, i: usize, ev: Event) -> io::Result<()> {
        let tid = merge.tid(i);
        let level = self.level(i);
        match ev.kind {
            EventKind::Entry => {
                let leaf = merge
                    .peek(i)
                    .is_some_and(|next| next.kind == EventKind::Exit && next.fid == ev.fid);
                if leaf {
                    let exit = merge.take(i);
                    let end = exit.as_ref().map_or(ev.ns, |e| e.ns);
                    let mut text = self.text_buffer();
                    push_called(&mut text, self.names.shown(ev.fid), ev.values.as_deref());
                    push_returned(&mut text, exit.as_ref().and_then(|e| e.values.as_deref()));
                    text.push(';');
                    self.push_place(&mut text, ev.fid);
                    let dur = Some(end.saturating_sub(ev.ns));
                    return self.line(out, tid, ev.ns, Some(ev.fid), dur, level, text);
                }
                let frame = Frame {
                    start_ns: ev.ns,
                    level: level + 1,
                    short: ev.values.is_some(),
                };
                // A call nested too deep is left out (and counted).
                if self.stacks[i].push(ev.fid, frame) {
                    let mut text = self.text_buffer();
                    push_called(&mut text, self.names.shown(ev.fid), ev.values.as_deref());
                    text.push_str(" {");
                    self.push_place(&mut text, ev.fid);
                    self.line(out, tid, ev.ns, Some(ev.fid), None, level, text)?;
                }
                Ok(())
            }
            EventKind::Exit => self.close(out, i, tid, ev, false),
            EventKind::Unwind => self.close(out, i, tid, ev, true),
            EventKind::EntryCaller(caller) => {
                let rel = ev.ns.saturating_sub(self.start_ns);
                let stamp = format!("{}.{:06}", rel / 1_000_000_000, rel % 1_000_000_000 / 1000);
                let name = match ev.values.as_deref() {
                    Some(values) => {
                        let mut name = String::new();
                        push_called(&mut name, self.names.shown(ev.fid), Some(values));
                        name
                    }
                    None => self.names.shown(ev.fid).to_string(),
                };
                let from = self.names.address(caller);
                let w = self.style.width;
                writeln!(out, " {tid:>w$})  {stamp:>13}: {name} <-{from}")
            }
            EventKind::Call { dur_ns } => {
                let start = ev.ns.saturating_sub(dur_ns);
                let text = self.closing(ev.fid, false, ev.values.as_deref(), ev.values.is_some());
                self.line(out, tid, start, Some(ev.fid), Some(dur_ns), level, text)
            }
            EventKind::Lost(n) => {
                self.stacks[i].lose();
                let what = match n {
                    0 => "--- events lost (chunks missing) ---".to_string(),
                    1 => "--- 1 event lost ---".to_string(),
                    n => format!("--- {n} events lost ---"),
                };
                let w = self.style.width;
                let (on, off) = paint(self.style.color, '*');
                writeln!(out, " {tid:>w$}) {on}{what}{off}")
            }
            EventKind::Mark(on) => {
                let mut text = self.text_buffer();
                text.push_str(if on { "/* trace_on */" } else { "/* trace_off */" });
                self.line(out, tid, ev.ns, None, None, level, text)
            }
        }
    }

    /// An exit or unwind of `ev.fid`: closes its call. Calls opened after
    /// it that never returned are closed as unwound; an exit without its
    /// entry (tracing began inside the call) prints without a duration.
    fn close(
        &mut self,
        out: &mut impl Write,
        i: usize,
        tid: u32,
        ev: Event,
        unwound: bool,
    ) -> io::Result<()> {
        let Some(pos) = self.stacks[i].position(ev.fid) else {
            let short = ev.values.is_some();
            let text = self.closing(ev.fid, unwound, ev.values.as_deref(), short);
            let level = self.level(i);
            return self.line(out, tid, ev.ns, Some(ev.fid), None, level, text);
        };
        while self.stacks[i].len() > pos {
            let exit_lost = self.stacks[i].top_spans_loss();
            let Some((fid, frame)) = self.stacks[i].pop() else {
                break;
            };
            if exit_lost {
                let mut text = self.text_buffer();
                text.push_str("} /* ");
                text.push_str(self.named(fid, frame.short));
                text.push_str(" (exit lost) */");
                self.line(out, tid, ev.ns, Some(fid), None, frame.level - 1, text)?;
                continue;
            }
            let this = self.stacks[i].len() == pos;
            let ret = if this { ev.values.as_deref() } else { None };
            let text = self.closing(fid, unwound || !this, ret, frame.short || ret.is_some());
            let dur = ev.ns.saturating_sub(frame.start_ns);
            self.line(out, tid, ev.ns, Some(fid), Some(dur), frame.level - 1, text)?;
        }
        Ok(())
    }

    /// The buffer a line's text is made in ([`ProcessView::line`] gives it
    /// back: one allocation for all lines).
    fn text_buffer(&mut self) -> String {
        let mut text = std::mem::take(&mut self.text);
        text.clear();
        text
    }

    /// ` /* FILE:LINE */` of function `fid` under `--srcline`, when known.
    fn push_place(&self, text: &mut String, fid: u32) {
        if let Some(at) = self.style.srcline.then(|| self.names.srcline(fid)).flatten() {
            text.push_str(" /* ");
            text.push_str(at);
            text.push_str(" */");
        }
    }

    /// How a closing line names function `fid`: without its parameter
    /// list when its call was shown with values (`short`).
    fn named(&mut self, fid: u32, short: bool) -> &str {
        let name = self.names.shown(fid);
        if short {
            without_params(name)
        } else {
            name
        }
    }

    /// A closing line's text, in the text buffer.
    fn closing(&mut self, fid: u32, unwound: bool, ret: Option<&[Value]>, short: bool) -> String {
        let mut text = self.text_buffer();
        text.push('}');
        if !unwound {
            push_returned(&mut text, ret);
        }
        text.push_str(" /* ");
        text.push_str(self.named(fid, short));
        text.push_str(if unwound { " (unwound) */" } else { " */" });
        text
    }

    /// Prints one line of thread `tid`: the columns (`-f`) of an event at
    /// `ns` (a call's start for its opening line and a leaf, its end for
    /// a closing line) of function `fid`, with duration `dur`, then `text`
    /// (made in [`ProcessView::text_buffer`], given back to it) indented
    /// to `level`.
    #[allow(clippy::too_many_arguments)]
    fn line(
        &mut self,
        out: &mut impl Write,
        tid: u32,
        ns: u64,
        fid: Option<u32>,
        dur: Option<u64>,
        level: usize,
        text: String,
    ) -> io::Result<()> {
        let column = match self.style.column {
            Some(offset) => {
                let next = self.columns_of.len();
                *self.columns_of.entry(tid).or_insert(next) * offset * 2
            }
            None => 0,
        };
        let indent = level.min(MAX_INDENT) * 2 + column;
        // Only what the columns show is looked up.
        let delta_ns = match self.columns.has(Field::Delta) {
            true => self.last_ns.insert(tid, ns).map(|last| ns.saturating_sub(last)),
            false => None,
        };
        let addr = match self.columns.has(Field::Addr) {
            true => fid.and_then(|f| self.names.address_of(f)),
            false => None,
        };
        let cell = Cell {
            tid,
            ns,
            elapsed_ns: ns.saturating_sub(self.start_ns),
            delta_ns,
            dur,
            addr,
        };
        let color = self.style.color;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        self.columns.write_prefix(&mut buf, &cell, |m| paint(color, m));
        buf.push_str("|  ");
        push_spaces(&mut buf, indent);
        if level >= MAX_INDENT {
            buf.push_str("[depth ");
            push_decimal(&mut buf, level as u64);
            buf.push_str("] ");
        }
        buf.push_str(&text);
        buf.push('\n');
        let written = out.write_all(buf.as_bytes());
        self.buf = buf;
        self.text = text;
        written
    }
}

/// A function as called, appended to `out`: `name()`, or the demangled
/// name as it is when it has its parameters (`ns::f(int)`); with recorded
/// arguments, the name without its parameters and the values: `add(3,
/// 4)`, `ns::f(7)`.
fn push_called(out: &mut String, name: &str, args: Option<&[Value]>) {
    match args {
        Some(values) => {
            out.push_str(without_params(name));
            out.push('(');
            out.push_str(&values::list(values));
            out.push(')');
        }
        None if name.contains('(') => out.push_str(name),
        None => {
            out.push_str(name);
            out.push_str("()");
        }
    }
}

/// ` = VALUE` for a recorded return value, appended to `out`; else
/// nothing.
fn push_returned(out: &mut String, ret: Option<&[Value]>) {
    if let Some(values) = ret.filter(|v| !v.is_empty()) {
        out.push_str(" = ");
        out.push_str(&values::list(values));
    }
}

/// A demangled name without its parameter list (the last balanced
/// parentheses at its end, and any `const` after them).
pub fn without_params(name: &str) -> &str {
    let trimmed = name.trim_end_matches(" const");
    if !trimmed.ends_with(')') {
        return name;
    }
    let mut depth = 0usize;
    for (i, c) in trimmed.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return &trimmed[..i];
                }
            }
            _ => {}
        }
    }
    name
}

/// The colour escapes around a duration with mark `m` (none without
/// `color`).
fn paint(color: bool, m: char) -> (&'static str, &'static str) {
    if !color {
        return ("", "");
    }
    match m {
        '+' | '!' => ("\x1b[33m", "\x1b[0m"),
        '#' | '*' => ("\x1b[31m", "\x1b[0m"),
        '@' | '$' => ("\x1b[1;31m", "\x1b[0m"),
        _ => ("", ""),
    }
}
