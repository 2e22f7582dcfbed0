//! The report in the browser: `report`'s table, one row per function,
//! sorted by a key `s` steps through.

use crate::cmd::report::{self, Sort};
use crate::stats::Stats;

use super::pane::{circular, Pane, Row};

/// The keys `s` steps through, in order.
const KEYS: [Sort; 7] = [
    Sort::Total,
    Sort::SelfTime,
    Sort::Calls,
    Sort::Avg,
    Sort::Min,
    Sort::Max,
    Sort::Name,
];

/// The report of a trace.
pub struct ReportView {
    pub stats: Stats,
    /// The function of each row.
    names: Vec<String>,
    /// Index in [`KEYS`] of the sort key.
    key: usize,
    pub pane: Pane,
}

impl ReportView {
    pub fn new(stats: Stats) -> ReportView {
        let mut view = ReportView {
            stats,
            names: Vec::new(),
            key: 0,
            pane: Pane::default(),
        };
        view.refresh();
        view
    }

    /// The name of the sort key.
    pub fn sorted_by(&self) -> &'static str {
        match KEYS[self.key] {
            Sort::Total => "total",
            Sort::SelfTime => "self",
            Sort::Calls => "calls",
            Sort::Avg => "avg",
            Sort::Min => "min",
            Sort::Max => "max",
            Sort::Name => "name",
        }
    }

    /// `s`: sorts by the next key.
    pub fn next_key(&mut self) {
        self.key = (self.key + 1) % KEYS.len();
        self.refresh();
    }

    /// The rows, as `report -s KEY` writes them.
    fn refresh(&mut self) {
        let mut rows: Vec<(&String, &crate::stats::Function)> = self.stats.functions.iter().collect();
        report::sort(&mut rows, &[KEYS[self.key]], false);
        let mut text = Vec::new();
        // Writing to memory cannot fail.
        let _ = report::write_table(&mut text, &rows, self.stats.exit_lost > 0, false);
        let text = String::from_utf8_lossy(&text);
        let mut lines = text.lines().map(str::to_string);
        let header = lines.by_ref().take(2).collect();
        // The cursor stays on the function it was on.
        let name = self.names.get(self.pane.cursor).cloned();
        self.names = rows.iter().map(|(name, _)| name.to_string()).collect();
        let rows = lines
            .enumerate()
            .map(|(i, text)| Row {
                text,
                key: Some(i as u32),
            })
            .collect();
        self.pane = Pane::new(header, rows);
        if let Some(at) = name.and_then(|n| self.names.iter().position(|m| *m == n)) {
            self.pane.cursor = at;
        }
    }

    /// The function under the cursor.
    pub fn name(&self) -> Option<&str> {
        self.pane.key().map(|i| self.names[i as usize].as_str())
    }

    /// The next row after the cursor (`forward`) or before it whose
    /// function `matches`.
    pub fn find(&mut self, matches: &dyn Fn(&str) -> bool, forward: bool) -> bool {
        let hit = circular(self.pane.cursor, self.names.len(), forward).find(|&i| matches(&self.names[i]));
        match hit {
            Some(i) => {
                self.pane.cursor = i;
                true
            }
            None => false,
        }
    }
}
