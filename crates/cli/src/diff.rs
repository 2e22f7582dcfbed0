//! `report --diff OTHER`: per function, how two recordings differ — calls,
//! total and self time in each, and the change (uftrace's `report
//! --diff`). Functions are matched by the name shown, so two builds of a
//! program compare as well as two runs of one.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use serde::Serialize;

use crate::stats::Function;
use crate::units::human;

/// One function's numbers in both recordings (zero where it did not run).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub base: Side,
    pub new: Side,
}

/// A function's numbers in one recording.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Side {
    pub calls: u64,
    pub total_ns: u64,
    pub self_ns: u64,
}

impl From<&Function> for Side {
    fn from(f: &Function) -> Side {
        Side {
            calls: f.calls,
            total_ns: f.total_ns,
            self_ns: f.self_ns,
        }
    }
}

/// The rows of every function in either recording, the largest change of
/// the number `key` takes of a side first (none: by name), ties by name.
pub fn rows(
    base: &BTreeMap<String, Function>,
    new: &BTreeMap<String, Function>,
    key: Option<fn(&Side) -> u64>,
) -> Vec<Row> {
    let names: BTreeSet<&String> = base.keys().chain(new.keys()).collect();
    let mut rows: Vec<Row> = names
        .into_iter()
        .map(|name| Row {
            name: name.clone(),
            base: base.get(name).map(Side::from).unwrap_or_default(),
            new: new.get(name).map(Side::from).unwrap_or_default(),
        })
        .collect();
    let change = |r: &Row| key.map_or(0, |k| k(&r.base).abs_diff(k(&r.new)));
    rows.sort_by(|a, b| change(b).cmp(&change(a)).then_with(|| a.name.cmp(&b.name)));
    rows
}

/// The change from `a` to `b`, signed, its size shown by `show`
/// (`+1.234 ms`, `-20`).
fn change(a: u64, b: u64, show: impl Fn(u64) -> String) -> String {
    let sign = if b >= a { '+' } else { '-' };
    format!("{sign}{}", show(a.abs_diff(b)))
}

/// The table: each column as base, new and the change.
pub fn write_table(out: &mut impl Write, rows: &[Row]) -> io::Result<()> {
    writeln!(
        out,
        "{:>12}{:>12}{:>12}  {:>12}{:>12}{:>12}  {:>12}{:>12}{:>12}  Function",
        "Total base", "Total new", "Diff", "Self base", "Self new", "Diff", "Calls base", "Calls new", "Diff"
    )?;
    let bar = "  ==========";
    writeln!(out, "{}  {}", bar.repeat(9), "=".repeat(20))?;
    for r in rows {
        let (a, b) = (r.base, r.new);
        writeln!(
            out,
            "{:>12}{:>12}{:>12}  {:>12}{:>12}{:>12}  {:>12}{:>12}{:>12}  {}",
            human(a.total_ns),
            human(b.total_ns),
            change(a.total_ns, b.total_ns, |d| human(d).trim().to_string()),
            human(a.self_ns),
            human(b.self_ns),
            change(a.self_ns, b.self_ns, |d| human(d).trim().to_string()),
            a.calls,
            b.calls,
            change(a.calls, b.calls, |d| d.to_string()),
            r.name
        )?;
    }
    Ok(())
}
