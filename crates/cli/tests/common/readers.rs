//! Every reader of a data directory, run the way a user runs it, and the
//! outcome each one must have on any input: exit 0, or exit 1 with one
//! `fntrace: error:` line; never a panic, a hang or unbounded memory.

use std::process::Output;

use super::fntrace_bounded;

/// Each reader, with each of its output formats and some options: the
/// list the fuzz target runs.
pub use fntrace::readers::READERS;

/// One reader's run.
pub struct Run {
    pub args: Vec<String>,
    pub out: Output,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    /// Where its damage notes are: stderr, and for `info` also stdout (its
    /// "damage" item).
    pub fn notes(&self) -> String {
        match self.args[0].as_str() {
            "info" => self.stdout() + &self.stderr(),
            _ => self.stderr(),
        }
    }
}

/// Runs every reader on `dir` (bounded in time and memory) and checks that
/// each ends cleanly: exit 0, or exit 1 with its last stderr line the only
/// `fntrace: error:` line; every other stderr line a warning.
pub fn every_reader(dir: &str) -> Vec<Run> {
    READERS
        .iter()
        .map(|reader| {
            let mut args: Vec<&str> = reader.to_vec();
            args.push(dir);
            let run = Run {
                args: args.iter().map(|s| s.to_string()).collect(),
                out: fntrace_bounded(&args),
            };
            assert_clean(&run);
            run
        })
        .collect()
}

/// See [`every_reader`].
pub fn assert_clean(run: &Run) {
    let (args, stderr) = (&run.args, run.stderr());
    let lines: Vec<&str> = stderr.lines().collect();
    match run.code() {
        Some(0) => {}
        Some(1) => {
            let last = lines.last().copied().unwrap_or("");
            assert!(last.starts_with("fntrace: error: "), "{args:?}: {stderr}");
        }
        code => panic!("{args:?}: exit status {code:?}: {stderr}"),
    }
    for (i, line) in lines.iter().enumerate() {
        let error = run.code() == Some(1) && i + 1 == lines.len();
        assert!(
            error || line.starts_with("fntrace: warning: "),
            "{args:?}: not a warning: {line}\n{stderr}"
        );
    }
}
