//! `fntrace live [OPTIONS] -- COMMAND [ARGS...]`: `record` into a temporary
//! data directory, `replay` it, remove it (uftrace live).

use std::ffi::OsString;
use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::cmd::record;
use crate::cmd::replay::{self, Settings};
use crate::nothing::NothingToShow;
use crate::options::{DisplayFlags, RecordFlags};

const AFTER_HELP: &str = "\
The command runs first, with its own output; the trace follows on standard
output when it ended. The options are those of 'fntrace record' (what to
record) and of 'fntrace replay' (how to show it). fntrace exits with the
command's exit status, also when the trace has nothing to show (a warning
says why).

Example:
  fntrace live -D 3 ./prog arg";

/// Run a command and show the trace of its functions when it ends.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    #[command(flatten)]
    record: RecordFlags,
    #[command(flatten)]
    display: DisplayFlags,
    /// The command to trace, and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = scratch_dir()?;
    let request = args.record.into_request(args.command, dir.clone());
    let result = (|| {
        let ending = match record::record(&request)? {
            Ok(ending) => ending,
            Err(code) => return Ok(code),
        };
        let settings = Settings::new(&args.display, Vec::new(), Vec::new());
        if let Err(e) = replay::replay(&dir, &settings, &mut std::io::stdout().lock()) {
            let Some(nothing) = e.downcast_ref::<NothingToShow>() else {
                return Err(e);
            };
            eprintln!("fntrace: warning: {nothing}");
        }
        record::say_losses(&dir);
        Ok(ExitCode::from(ending.exit_code()))
    })();
    let _ = fs::remove_dir_all(&dir);
    result
}

/// A path for the data directory that nothing uses yet.
fn scratch_dir() -> anyhow::Result<PathBuf> {
    let base = std::env::temp_dir();
    for n in 0..1000 {
        let dir = base.join(format!("fntrace-live-{}-{n}", std::process::id()));
        if fs::symlink_metadata(&dir).is_err() {
            return Ok(dir);
        }
    }
    anyhow::bail!(
        "no free name for a temporary data directory in {}",
        base.display()
    )
}
