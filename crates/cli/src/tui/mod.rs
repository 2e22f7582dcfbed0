//! `fntrace tui`: a terminal browser over a recording, in the manner of
//! uftrace's `tui` and `perf report`'s browser. Its views are the readers'
//! own output made interactive: the call graph (`graph`'s lines, folded
//! and unfolded), the report (`report`'s table, sorted by a key), the
//! graph of one function with every backtrace that reached it (`graph
//! FUNC`), `info`. The narrowing options of every reader apply, given on
//! the command line or changed inside (`f`). What the trace lost is said
//! above every view.
//!
//! The views hold aggregates, not events: their size is the number of
//! call paths and functions, whatever the length of the trace.

mod keys;
mod pane;
mod report;
mod tree;

use std::path::PathBuf;

use fntrace_filter::Glob;
use fntrace_format::read::Trace;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::calltree::{CallTree, Selector};
use crate::losses;
use crate::narrow::NarrowFlags;
use crate::nothing;
use crate::stats::{self, Request};
use crate::trace::Demangle;

use pane::{Pane, Row};
use report::ReportView;
use tree::TreeView;

pub use keys::run;

/// The recording browsed and how its names are shown.
pub struct Source {
    pub trace: Trace,
    pub dir: PathBuf,
    pub tids: Vec<u32>,
    pub demangle: Demangle,
}

/// What the browser shows of the recording under one set of filters.
struct Model {
    graph: TreeView,
    report: ReportView,
    /// What was lost and what is damaged: said above every view.
    notes: Vec<String>,
    /// How the filters narrowed the recording.
    flags: NarrowFlags,
}

impl Model {
    /// Reads the recording as `flags` narrow it; an error if nothing is
    /// left of it.
    fn load(source: &Source, flags: NarrowFlags) -> anyhow::Result<(Model, Vec<String>)> {
        let narrowing = flags.narrowing()?;
        flags.check_patterns(source.trace.processes.iter(), &source.dir)?;
        let (tree, mut damage) = CallTree::read(
            &source.trace,
            &source.tids,
            None,
            &narrowing,
            source.demangle,
            false,
        );
        let stats = stats::collect(
            &source.trace,
            &Request {
                tids: &source.tids,
                demangle: source.demangle,
                select: None,
                by_args: false,
                narrowing: &narrowing,
            },
        );
        if stats.functions.is_empty() {
            return nothing::fail(nothing::no_calls(&source.trace, &source.dir, stats.events));
        }
        damage.extend(stats.damage.iter().cloned());
        damage.extend(source.trace.damage.iter().cloned());
        damage.sort();
        damage.dedup();
        let mut notes = Vec::new();
        if let Some(line) = losses::summary(&stats.losses, &source.trace, Some(stats.exit_lost)) {
            notes.push(format!("# {line}"));
        }
        match damage.as_slice() {
            [] => {}
            [one] => notes.push(format!("# damaged: {one}")),
            [first, ..] => notes.push(format!(
                "# damaged: {first} (and {} more: fntrace info)",
                damage.len() - 1
            )),
        }
        let model = Model {
            graph: TreeView::new(tree),
            report: ReportView::new(stats),
            notes,
            flags,
        };
        Ok((model, damage))
    }
}

/// The view on screen.
#[derive(Clone, Copy, PartialEq, Eq)]
enum View {
    Graph,
    Report,
    /// The graph of one function.
    Callers,
    /// A text (help, info) over the other views.
    Text,
}

/// A line being typed at the bottom.
struct Prompt {
    kind: PromptKind,
    input: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PromptKind {
    Search,
    Filter,
}

/// The browser.
pub struct App {
    source: Source,
    model: Model,
    view: View,
    /// The view under the text.
    under: View,
    /// The view a function's graph was opened from.
    callers_from: View,
    callers: Option<TreeView>,
    text: Option<(String, Pane)>,
    prompt: Option<Prompt>,
    /// The last search.
    search: Option<String>,
    /// The last filters line typed, if refused (offered again at `f`).
    refused: Option<String>,
    /// Said on the status line until the next key.
    message: String,
    quit: bool,
}

impl App {
    /// The browser over `source` as `flags` narrow it, with the damage
    /// found (for the caller to say before the screen is taken).
    pub fn new(source: Source, flags: NarrowFlags) -> anyhow::Result<(App, Vec<String>)> {
        let (model, damage) = Model::load(&source, flags)?;
        // Profile tables (--tracer profile) hold no call paths: their
        // totals are the report.
        let view = match model.graph.tree.is_empty() {
            true => View::Report,
            false => View::Graph,
        };
        let app = App {
            source,
            model,
            view,
            under: View::Graph,
            callers_from: View::Graph,
            callers: None,
            text: None,
            prompt: None,
            search: None,
            refused: None,
            message: String::new(),
            quit: false,
        };
        Ok((app, damage))
    }

    /// The pane on screen.
    fn pane(&mut self) -> &mut Pane {
        match self.view {
            View::Graph => &mut self.model.graph.pane,
            View::Report => &mut self.model.report.pane,
            View::Callers => match &mut self.callers {
                Some(c) => &mut c.pane,
                None => &mut self.model.graph.pane,
            },
            View::Text => match &mut self.text {
                Some((_, pane)) => pane,
                None => &mut self.model.graph.pane,
            },
        }
    }

    /// The tree on screen, if the view is one.
    fn tree(&mut self) -> Option<&mut TreeView> {
        match self.view {
            View::Graph => Some(&mut self.model.graph),
            View::Callers => self.callers.as_mut(),
            _ => None,
        }
    }

    /// The function under the cursor.
    fn name(&self) -> Option<&str> {
        match self.view {
            View::Graph => self.model.graph.name(),
            View::Report => self.model.report.name(),
            View::Callers => self.callers.as_ref().and_then(TreeView::name),
            View::Text => None,
        }
    }

    /// `g`: the graph of the function under the cursor, with every
    /// backtrace that reached it.
    fn show_callers(&mut self) {
        let Some(name) = self.name().map(str::to_string) else {
            self.message = "no function under the cursor".to_string();
            return;
        };
        let narrowing = match self.model.flags.narrowing() {
            Ok(n) => n,
            Err(e) => {
                self.message = e.to_string();
                return;
            }
        };
        let (tree, _) = CallTree::read(
            &self.source.trace,
            &self.source.tids,
            Some((&name, Selector::Shown(&name))),
            &narrowing,
            self.source.demangle,
            false,
        );
        if tree.is_empty() {
            self.message = format!("{name}: no call paths (a profile table keeps none)");
            return;
        }
        self.callers = Some(TreeView::new(tree));
        if self.view != View::Callers {
            self.callers_from = self.view;
        }
        self.view = View::Callers;
    }

    /// A text over the views.
    fn show_text(&mut self, title: &str, text: &str) {
        if self.view != View::Text {
            self.under = self.view;
        }
        let rows = text.lines().map(Row::text).collect();
        self.text = Some((title.to_string(), Pane::new(Vec::new(), rows)));
        self.view = View::Text;
    }

    /// `/`, `n`, `N`: the next function whose name holds the search text
    /// (or matches it, given as a pattern with `*`, `?` or `[`).
    fn find(&mut self, forward: bool) {
        let Some(text) = self.search.clone() else {
            self.message = "no search yet: / searches".to_string();
            return;
        };
        let glob = text.contains(['*', '?', '[']);
        let pattern = match glob {
            true => match Glob::new(&text) {
                Ok(g) => Some(g),
                Err(e) => {
                    self.message = e.to_string();
                    return;
                }
            },
            false => None,
        };
        let matches = |name: &str| match &pattern {
            Some(g) => g.matches(name),
            None => name.contains(text.as_str()),
        };
        let found = match self.view {
            View::Graph => self.model.graph.find(&matches, forward),
            View::Report => self.model.report.find(&matches, forward),
            View::Callers => self.callers.as_mut().is_some_and(|c| c.find(&matches, forward)),
            View::Text => false,
        };
        if !found {
            self.message = format!("'{text}' not found");
        }
    }

    /// The filters typed at `f` (a reader's narrowing options), applied to
    /// every view; the ones before kept if these are wrong or leave
    /// nothing.
    fn refilter(&mut self, line: &str) {
        let flags = match keys::parse_filters(line) {
            Ok(flags) => flags,
            Err(e) => {
                self.message = e;
                self.refused = Some(line.to_string());
                return;
            }
        };
        match Model::load(&self.source, flags) {
            Ok((model, _)) => {
                self.model = model;
                self.refused = None;
                self.callers = None;
                if self.view == View::Callers {
                    self.view = View::Graph;
                }
                self.message = "filters applied".to_string();
            }
            Err(e) => {
                self.message = format!("{e:#} (filters unchanged)");
                self.refused = Some(line.to_string());
            }
        }
    }

    /// Draws the screen: a title, what was lost, the view, a status line.
    fn draw(&mut self, frame: &mut Frame<'_>) {
        let notes = self.model.notes.len() as u16;
        let [title, notes_area, body, status] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(notes),
            Constraint::Min(1),
            Constraint::Length(1),
        ])
        .areas(frame.area());
        let reverse = Style::default().add_modifier(Modifier::REVERSED);
        frame.render_widget(Paragraph::new(Line::raw(self.title())).style(reverse), title);
        let lines: Vec<Line<'_>> = self.model.notes.iter().map(|n| Line::raw(n.as_str())).collect();
        frame.render_widget(Paragraph::new(lines), notes_area);
        self.pane().draw(frame, body);
        let status_line = self.status();
        frame.render_widget(Paragraph::new(Line::raw(status_line)).style(reverse), status);
    }

    fn title(&self) -> String {
        let view = match self.view {
            View::Graph => "Graph".to_string(),
            View::Report => format!("Report, by {}", self.model.report.sorted_by()),
            View::Callers => {
                let name = self
                    .callers
                    .as_ref()
                    .map_or("", |c| c.tree.name(c.tree.roots()[0]));
                format!("Graph of {name}")
            }
            View::Text => self.text.as_ref().map_or(String::new(), |(t, _)| t.clone()),
        };
        let filters = self.model.flags.to_args().join(" ");
        let filters = match filters.is_empty() {
            true => String::new(),
            false => format!(" · filters: {filters}"),
        };
        format!(" fntrace tui · {} · {view}{filters}", self.source.dir.display())
    }

    fn status(&mut self) -> String {
        if let Some(prompt) = &self.prompt {
            return match prompt.kind {
                PromptKind::Search => format!("/{}", prompt.input),
                PromptKind::Filter => format!("filters: {}", prompt.input),
            };
        }
        let name = self.name().unwrap_or("").to_string();
        let message = std::mem::take(&mut self.message);
        let pane = self.pane();
        let at = format!("{}/{}", (pane.cursor + 1).min(pane.rows.len()), pane.rows.len());
        match message.is_empty() {
            true => format!(" {at} {name}  (? help, q quit)"),
            false => format!(" {at} {name}  {message}"),
        }
    }
}
