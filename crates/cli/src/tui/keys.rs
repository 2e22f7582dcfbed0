//! The browser's keys (uftrace `tui`'s where it has them) and its loop:
//! take the terminal, draw, read a key, act, until `q`.

use clap::Parser;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::{App, Prompt, PromptKind, View};
use crate::narrow::NarrowFlags;

/// What `?` shows.
pub const HELP: &str = "\
fntrace tui: keys

  Up Down j k          move         PgUp PgDn Home End   by pages, to the ends
  < >                  scroll left and right

  G                    the call graph (every call path, with counts and times)
  R                    the report (per function)
  g                    the graph of the function under the cursor, after
                       every backtrace that reached it (graph FUNC)
  I                    info about the recording
  ? h                  these keys
  Esc                  back (from a text, from the graph of a function)
  q                    quit (from a text: back)

In a graph:
  Enter                fold or unfold the function's callees
  Left Right           fold (or, folded, go to the caller), unfold
  u                    to the caller
  c / e                fold each callee / unfold everything below
  C / E                fold everything main calls / unfold everything

In the report:
  s                    sort by the next key (total, self, calls, avg, min,
                       max, name)

  /                    search: the next function whose name holds the text
                       (a pattern with * ? [ matches whole names); folded
                       functions are searched too, and unfolded
  n N                  the next, the previous match
  f                    filters: a reader's narrowing options, as on the
                       command line (-F main -N 'std::*' -D 3 -t 10us
                       -r 20ms~30ms --match regex); empty: none

What the trace lost is said at the top of every view.";

/// The filters line typed at `f`, parsed as the command line's.
#[derive(clap::Parser)]
#[command(name = "filters", no_binary_name = true, disable_help_flag = true)]
struct FiltersLine {
    #[command(flatten)]
    narrow: NarrowFlags,
}

/// Parses a filters line (words split at spaces, so a pattern cannot hold
/// one; quotes around a word, as a shell would take, are dropped); the
/// error as one line.
pub fn parse_filters(line: &str) -> Result<NarrowFlags, String> {
    let unquote = |word: &str| {
        for q in ['\'', '"'] {
            if let Some(inner) = word.strip_prefix(q).and_then(|w| w.strip_suffix(q)) {
                return inner.to_string();
            }
        }
        word.to_string()
    };
    match FiltersLine::try_parse_from(line.split_whitespace().map(unquote)) {
        Ok(parsed) => Ok(parsed.narrow),
        Err(e) => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("bad filters").trim();
            Err(first.strip_prefix("error: ").unwrap_or(first).to_string())
        }
    }
}

/// Runs the browser in the terminal until `q`.
pub fn run(mut app: App) -> anyhow::Result<()> {
    // Raw mode and the alternate screen, both given back on return and on
    // a panic (ratatui's hook).
    let mut terminal = ratatui::init();
    let result = (|| -> anyhow::Result<()> {
        while !app.quit {
            terminal.draw(|frame| app.draw(frame))?;
            if let Event::Key(key) = event::read()? {
                if key.kind != KeyEventKind::Release {
                    app.key(key);
                }
            }
        }
        Ok(())
    })();
    ratatui::restore();
    result
}

impl App {
    fn key(&mut self, key: KeyEvent) {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.prompt.is_some() {
            self.prompt_key(key.code);
            return;
        }
        self.message.clear();
        let pane_key = match key.code {
            KeyCode::Up | KeyCode::Char('k') => Some(-1),
            KeyCode::Down | KeyCode::Char('j') => Some(1),
            _ => None,
        };
        if let Some(by) = pane_key {
            self.pane().step(by);
            return;
        }
        match key.code {
            KeyCode::PageUp => self.pane().page(-1),
            KeyCode::PageDown | KeyCode::Char(' ') => self.pane().page(1),
            KeyCode::Home => self.pane().cursor = 0,
            KeyCode::End => self.pane().step(isize::MAX),
            KeyCode::Char('<') => {
                let pane = self.pane();
                pane.shift = pane.shift.saturating_sub(8);
            }
            KeyCode::Char('>') => self.pane().shift += 8,
            KeyCode::Char('q') | KeyCode::Esc => self.back(key.code == KeyCode::Char('q')),
            KeyCode::Char('?') | KeyCode::Char('h') => self.show_text("Keys", HELP),
            KeyCode::Char('I') | KeyCode::Char('i') => self.info(),
            KeyCode::Char('G') => self.view = View::Graph,
            KeyCode::Char('R') => self.view = View::Report,
            KeyCode::Char('g') if self.view != View::Text => self.show_callers(),
            KeyCode::Char('s') if self.view == View::Report => self.model.report.next_key(),
            KeyCode::Char('/') => self.open_prompt(PromptKind::Search, String::new()),
            KeyCode::Char('n') => self.find(true),
            KeyCode::Char('N') | KeyCode::Char('p') => self.find(false),
            KeyCode::Char('f') => {
                let line = match self.refused.take() {
                    Some(line) => line,
                    None => self.model.flags.to_args().join(" "),
                };
                self.open_prompt(PromptKind::Filter, line);
            }
            code => self.tree_key(code),
        }
    }

    /// The keys of a graph.
    fn tree_key(&mut self, code: KeyCode) {
        let Some(tree) = self.tree() else { return };
        match code {
            KeyCode::Enter => tree.toggle(),
            KeyCode::Left => tree.left(),
            KeyCode::Right => tree.right(),
            KeyCode::Char('u') => tree.parent(),
            KeyCode::Char('c') => tree.fold_children(),
            KeyCode::Char('e') => tree.unfold_all_under(),
            KeyCode::Char('C') => tree.fold_everything(true),
            KeyCode::Char('E') => tree.fold_everything(false),
            _ => {}
        }
    }

    /// Esc and `q`: out of a text or of a function's graph (to the view
    /// it was opened from); `q` elsewhere quits.
    fn back(&mut self, quit: bool) {
        match self.view {
            View::Text => self.view = self.under,
            View::Callers => self.view = self.callers_from,
            _ if quit => self.quit = true,
            _ => {}
        }
    }

    fn info(&mut self) {
        let dir = self.source.dir.display().to_string();
        let mut text = Vec::new();
        let text = match crate::readers::run(&["info", &dir], &mut text) {
            Ok(()) => String::from_utf8_lossy(&text).into_owned(),
            Err(e) => format!("fntrace info: {e:#}"),
        };
        self.show_text("Info", &text);
    }

    fn open_prompt(&mut self, kind: PromptKind, input: String) {
        self.prompt = Some(Prompt { kind, input });
    }

    fn prompt_key(&mut self, code: KeyCode) {
        let Some(prompt) = &mut self.prompt else { return };
        match code {
            KeyCode::Esc => self.prompt = None,
            KeyCode::Backspace => {
                prompt.input.pop();
            }
            KeyCode::Char(c) => prompt.input.push(c),
            KeyCode::Enter => {
                let Some(Prompt { kind, input }) = self.prompt.take() else {
                    return;
                };
                match kind {
                    PromptKind::Search if input.is_empty() => {}
                    PromptKind::Search => {
                        self.search = Some(input);
                        self.find(true);
                    }
                    PromptKind::Filter => self.refilter(&input),
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_filters;

    /// The line `f` offers is the filters in effect: what `to_args` writes
    /// reads back as the same options.
    #[test]
    fn filters_line_round_trips() {
        let line = "-F a -F 'b*' -N c -H d -C e -D 3 -t 10us -r 20ms~5.000000001 --match regex";
        let flags = parse_filters(line).unwrap();
        let again = parse_filters(&flags.to_args().join(" ")).unwrap();
        assert_eq!(format!("{flags:?}"), format!("{again:?}"));
        assert_eq!(flags.filter, ["a", "b*"], "quotes dropped");
        assert_eq!(parse_filters("").unwrap().to_args(), Vec::<String>::new());
        for bad in ["-D 0", "-Q", "-t 3parsecs", "stray"] {
            let e = parse_filters(bad).unwrap_err();
            assert!(!e.contains('\n') && !e.is_empty(), "{bad}: {e}");
        }
    }
}
