//! `fntrace tui [DIR]`: the terminal browser over a recording
//! (`crate::tui`), in the manner of uftrace's `tui`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use fntrace_format::layout;

use crate::narrow::NarrowFlags;
use crate::trace;
use crate::tui::{self, App, Source};

const AFTER_HELP: &str = "\
Views: G the call graph (as graph shows it; Enter folds and unfolds), R the
report (s changes the sort key), g the graph of the function under the
cursor with every backtrace that reached it, I info. / searches, n and N
go to the next and previous match, f changes the filters (the narrowing
options below, typed as on the command line), ? lists the keys, q quits.
What the trace lost is said at the top of every view.

It needs a terminal: replay, report and graph print the same to a pipe.";

/// Browse a recording in the terminal: call graph, report, callers.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The data directory.
    #[arg(default_value = layout::DEFAULT_DIR)]
    dir: PathBuf,
    /// Only these threads; repeatable.
    #[arg(long = "tid", value_name = "TID")]
    tid: Vec<u32>,
    #[command(flatten)]
    demangle: crate::trace::DemangleFlags,
    #[command(flatten)]
    narrow: NarrowFlags,
}

/// `fntrace tui`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!("fntrace tui needs a terminal (replay, report and graph write to pipes and files)");
    }
    // The options' own mistakes first, as every reader says them.
    args.narrow.narrowing()?;
    let trace = trace::open(&args.dir)?;
    trace::check_tids(&trace, &args.tid)?;
    let source = Source {
        trace,
        dir: args.dir,
        tids: args.tid,
        demangle: args.demangle.mode(),
    };
    let (app, damage) = App::new(source, args.narrow)?;
    // Said before the screen is taken, and there again after it is given
    // back (at the top of every view too).
    trace::warn_damage(&damage);
    tui::run(app)?;
    Ok(ExitCode::SUCCESS)
}
