//! Every reader of a data directory (`replay`, `report`, `graph`, `info`,
//! `dump`, `flamegraph`) as one library call: its arguments as on the
//! command line, its output to a writer. The fuzz target `readers`
//! (`fuzz/`) runs each of them in-process, with [`READERS`], on every data
//! directory it unpacks from its input ([`packed`]).

pub mod packed;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::cmd;

/// Each reader with each of its output formats, and some options: the
/// arguments before the data directory.
pub const READERS: &[&[&str]] = &[
    &["replay"],
    &["replay", "-F", "m*", "-N", "f*", "--no-demangle"],
    &["report"],
    &["report", "--json", "--sort", "self"],
    &["graph"],
    &["info"],
    &["dump", "--chrome"],
    &["dump", "--perfetto"],
    &["dump", "--folded", "--per-thread"],
    &["dump", "--firefox"],
    &["flamegraph"],
    &["flamegraph", "--flamechart"],
];

/// The readers' subcommands, as the binary parses them.
#[derive(clap::Subcommand)]
pub enum Reader {
    Replay(cmd::replay::Args),
    Report(cmd::report::Args),
    Graph(cmd::graph::Args),
    Info(cmd::info::Args),
    Dump(cmd::dump::Args),
    Flamegraph(cmd::flamegraph::Args),
}

impl Reader {
    /// Runs the reader, with `out` for standard output.
    pub fn run(self, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
        match self {
            Reader::Replay(args) => cmd::replay::run(args, out),
            Reader::Report(args) => cmd::report::run(args, out),
            Reader::Graph(args) => cmd::graph::run(args, out),
            Reader::Info(args) => cmd::info::run(args, out),
            Reader::Dump(args) => cmd::dump::run(args, out),
            Reader::Flamegraph(args) => cmd::flamegraph::run(args, out),
        }
    }
}

/// The reader alone on a command line.
#[derive(clap::Parser)]
#[command(name = "fntrace")]
struct Line {
    #[command(subcommand)]
    reader: Reader,
}

/// Runs the reader `args` (`["dump", "--chrome", "DIR"]`) as `fntrace
/// ARGS` does, with `out` for standard output; the error is what `fntrace`
/// would print after `fntrace: error: `.
pub fn run(args: &[&str], out: &mut dyn Write) -> anyhow::Result<()> {
    let line = Line::try_parse_from(std::iter::once("fntrace").chain(args.iter().copied()))?;
    line.reader.run(out)?;
    Ok(())
}
