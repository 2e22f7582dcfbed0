//! What every view of the browser is on screen: fixed header lines, then
//! rows under a cursor, scrolled to keep the cursor in sight. A view (the
//! graph, the report, a text) fills a pane's rows; the pane moves, scrolls
//! and draws them.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// One row: its text and what it stands for in its view (a node of a
/// graph, a function of the report; none for a text line).
pub struct Row {
    pub text: String,
    pub key: Option<u32>,
}

impl Row {
    pub fn text(text: impl Into<String>) -> Row {
        Row {
            text: text.into(),
            key: None,
        }
    }
}

/// The positions of `0..n` after `start` (`forward`) or before it, each
/// once, going round: where a search looks, `start` itself last.
pub fn circular(start: usize, n: usize, forward: bool) -> impl Iterator<Item = usize> {
    (1..=n).map(move |i| match forward {
        true => (start + i) % n,
        false => (start + n - i % n) % n,
    })
}

/// Rows under a cursor.
#[derive(Default)]
pub struct Pane {
    /// Lines above the rows, not scrolled (column titles).
    pub header: Vec<String>,
    pub rows: Vec<Row>,
    /// The row under the cursor.
    pub cursor: usize,
    /// The first row shown.
    offset: usize,
    /// Columns scrolled off to the left.
    pub shift: u16,
    /// Rows shown at the last draw (a page).
    height: usize,
}

impl Pane {
    pub fn new(header: Vec<String>, rows: Vec<Row>) -> Pane {
        Pane {
            header,
            rows,
            ..Pane::default()
        }
    }

    /// The key of the row under the cursor.
    pub fn key(&self) -> Option<u32> {
        self.rows.get(self.cursor).and_then(|r| r.key)
    }

    /// Moves the cursor by `by` rows, within the rows.
    pub fn step(&mut self, by: isize) {
        let last = self.rows.len().saturating_sub(1);
        self.cursor = self.cursor.saturating_add_signed(by).min(last);
    }

    /// Moves the cursor a page (`pages` of them, negative: up).
    pub fn page(&mut self, pages: isize) {
        self.step(pages * self.height.max(1) as isize);
    }

    /// Puts the cursor on the first row whose key is `key` (if any).
    pub fn go_to_key(&mut self, key: u32) -> bool {
        match self.rows.iter().position(|r| r.key == Some(key)) {
            Some(at) => {
                self.cursor = at;
                true
            }
            None => false,
        }
    }

    /// Replaces the rows, the cursor kept on the row of the same key (or
    /// at the same place).
    pub fn set_rows(&mut self, rows: Vec<Row>) {
        let key = self.key();
        self.rows = rows;
        if !key.is_some_and(|k| self.go_to_key(k)) {
            self.step(0);
        }
    }

    /// Draws the pane in `area`.
    pub fn draw(&mut self, frame: &mut Frame<'_>, area: Rect) {
        let header = (self.header.len() as u16).min(area.height);
        let height = usize::from(area.height - header);
        self.height = height;
        if self.cursor < self.offset {
            self.offset = self.cursor;
        } else if height > 0 && self.cursor >= self.offset + height {
            self.offset = self.cursor + 1 - height;
        }
        let mut lines: Vec<Line<'_>> = self.header.iter().map(|h| Line::raw(h.as_str())).collect();
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let lines_header = lines.len();
        for line in &mut lines[..lines_header] {
            *line = line.clone().style(bold);
        }
        let shown = self.rows.iter().enumerate().skip(self.offset).take(height);
        for (i, row) in shown {
            let line = Line::raw(row.text.as_str());
            lines.push(match i == self.cursor {
                true => line.style(Style::default().add_modifier(Modifier::REVERSED)),
                false => line,
            });
        }
        frame.render_widget(Paragraph::new(lines).scroll((0, self.shift)), area);
    }
}

#[cfg(test)]
mod tests {
    use super::circular;

    #[test]
    fn searches_go_round_once() {
        assert_eq!(circular(1, 4, true).collect::<Vec<_>>(), [2, 3, 0, 1]);
        assert_eq!(circular(1, 4, false).collect::<Vec<_>>(), [0, 3, 2, 1]);
        assert_eq!(circular(0, 0, true).count(), 0);
    }
}
