//! The columns `replay` shows before each function (`-f`, uftrace's
//! `--output-fields`): thread, duration (the default, as the kernel's
//! function_graph lays them out), the event's time, the time elapsed since
//! the process began, the time since the thread's previous line, and the
//! function's address.

use crate::units::{human, mark, push_decimal, push_graph_duration, push_spaces};

/// One column (uftrace's field names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Field {
    /// The thread id.
    Tid,
    /// How long the call took (on a leaf or closing line).
    Duration,
    /// The event's time, seconds of the monotonic clock (as `CLOCK_MONOTONIC`
    /// and uftrace give it), to the nanosecond.
    Time,
    /// Time since the process began.
    Elapsed,
    /// Time since the thread's previous line.
    Delta,
    /// The function's address.
    Addr,
}

/// The default columns: thread, then duration.
pub const DEFAULT: [Field; 2] = [Field::Tid, Field::Duration];

/// What one line shows in its columns.
pub struct Cell {
    pub tid: u32,
    /// The event's time (monotonic ns).
    pub ns: u64,
    pub elapsed_ns: u64,
    /// Since the thread's previous line (none on its first).
    pub delta_ns: Option<u64>,
    pub dur: Option<u64>,
    pub addr: Option<u64>,
}

/// The columns of a view.
#[derive(Debug, Clone)]
pub struct Columns {
    pub fields: Vec<Field>,
    /// Characters of the widest thread id.
    pub tid_width: usize,
}

impl Columns {
    /// The first line: the columns' titles over them, then `FUNCTION` over
    /// the functions; for the `function` tracer, its timestamps' layout.
    pub fn header(&self, function_tracer: bool) -> String {
        let w = self.tid_width;
        if function_tracer {
            return format!("#{:>w$}   {:>13}  FUNCTION", "TID", "TIMESTAMP");
        }
        if self.fields == DEFAULT {
            return format!("#{:>w$}    DURATION       FUNCTION", "TID");
        }
        let mut line: String = self
            .fields
            .iter()
            .map(|&f| {
                let (width, title) = self.title(f);
                format!("{title:>width$}")
            })
            .collect();
        line.replace_range(..1, "#");
        if !self.fields.ends_with(&[Field::Duration]) {
            line.push(' ');
        }
        line.push_str("   FUNCTION");
        line
    }

    fn title(&self, f: Field) -> (usize, &'static str) {
        match f {
            Field::Tid => (self.tid_width + 2, "TID "),
            Field::Duration => (15, "DURATION    "),
            Field::Time => (19, "TIMESTAMP"),
            Field::Elapsed => (13, "ELAPSED"),
            Field::Delta => (13, "DELTA"),
            Field::Addr => (19, "ADDRESS"),
        }
    }

    /// Whether field `f` is shown (what a line need not compute when not).
    pub fn has(&self, f: Field) -> bool {
        self.fields.contains(&f)
    }

    /// Appends everything before the `|` of a line to `out`; `paint`
    /// colours a duration by its mark (the escapes before and after).
    pub fn write_prefix(
        &self,
        out: &mut String,
        c: &Cell,
        paint: impl Fn(char) -> (&'static str, &'static str),
    ) {
        use std::fmt::Write;
        for &f in &self.fields {
            let (width, _) = self.title(f);
            // Writing to a String cannot fail.
            let _ = match f {
                Field::Tid => {
                    out.push(' ');
                    let digits = decimal_width(u64::from(c.tid));
                    push_spaces(out, self.tid_width.saturating_sub(digits));
                    push_decimal(out, u64::from(c.tid));
                    out.push(')');
                    Ok(())
                }
                Field::Duration => match c.dur {
                    None => {
                        push_spaces(out, width);
                        Ok(())
                    }
                    Some(ns) => {
                        let m = mark(ns);
                        let (on, off) = paint(m);
                        out.push(' ');
                        out.push_str(on);
                        out.push(m);
                        out.push(' ');
                        push_graph_duration(out, ns);
                        out.push_str(off);
                        Ok(())
                    }
                },
                Field::Time => {
                    let (s, ns) = (c.ns / 1_000_000_000, c.ns % 1_000_000_000);
                    write!(out, "{:>w$}.{ns:09}", s, w = width - 10)
                }
                Field::Elapsed => write!(out, "{:>width$}", human(c.elapsed_ns).trim()),
                Field::Delta => match c.delta_ns {
                    Some(d) => write!(out, "{:>width$}", human(d).trim()),
                    None => write!(out, "{:width$}", ""),
                },
                Field::Addr => match c.addr {
                    Some(a) => write!(out, "{a:>#width$x}"),
                    None => write!(out, "{:width$}", ""),
                },
            };
        }
        if !self.fields.ends_with(&[Field::Duration]) {
            out.push(' ');
        }
    }
}

/// The digits of `n` in decimal.
fn decimal_width(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |l| l as usize + 1)
}
