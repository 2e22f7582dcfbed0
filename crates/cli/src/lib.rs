//! fntrace as a library: the subcommands ([`cmd`]) the `fntrace` binary
//! runs, and [`readers`], every reader of a data directory as one call
//! whose output goes to a writer (for the fuzz target in `fuzz/`, which
//! runs them in-process).
#![forbid(unsafe_code)]

mod calltree;
pub mod cmd;
mod columns;
mod control;
mod cxxfilt;
mod diff;
mod export;
mod forward;
mod funcgraph;
mod launch;
mod losses;
mod merge;
mod narrow;
mod nothing;
mod options;
mod output;
mod range;
pub mod readers;
mod srcline;
mod stats;
mod trace;
mod tui;
mod units;
mod unmatched;

pub use output::{exit_status, is_broken_pipe};
