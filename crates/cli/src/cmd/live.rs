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
The command runs first, with its own output; the trace follows when it
ended: on standard output if that is a terminal, else on standard error
(a note says so: the program's output stays the program's), or in the file
given with -o. The options are those of 'fntrace record' (what to record)
and of 'fntrace replay' (how to show it). fntrace exits with the command's
exit status, also when the trace has nothing to show (a warning says why).

Example:
  fntrace live -D 3 ./prog arg
  fntrace live -o trace.txt -- ./prog | gzip > out.gz";

/// Run a command and show the trace of its functions when it ends.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    #[command(flatten)]
    record: RecordFlags,
    #[command(flatten)]
    display: DisplayFlags,
    /// Write the trace to FILE (default: standard output if it is a terminal, else standard error).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The command to trace, and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// Where the trace goes: never into the program's output stream unless
/// that is a terminal (the user's screen).
enum Destination {
    Stdout,
    Stderr,
    File(PathBuf),
}

impl Destination {
    fn of(output: Option<PathBuf>) -> Destination {
        use std::io::IsTerminal;
        match output {
            Some(file) => Destination::File(file),
            None if std::io::stdout().is_terminal() => Destination::Stdout,
            None => Destination::Stderr,
        }
    }

    /// Whether `auto` colours it.
    fn terminal(&self) -> bool {
        use std::io::IsTerminal;
        match self {
            Destination::Stdout => true,
            Destination::Stderr => std::io::stderr().is_terminal(),
            Destination::File(_) => false,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let destination = Destination::of(args.output);
    // The file is made before the program runs: a path that cannot be
    // written is said before anything is traced.
    let mut file = match &destination {
        Destination::File(path) => Some(
            fs::File::create(path)
                .map_err(|e| anyhow::anyhow!("cannot write the trace to {}: {e}", path.display()))?,
        ),
        _ => None,
    };
    let dir = scratch_dir()?;
    let srcline = args.record.srcline();
    let request = args.record.into_request(args.command, dir.clone());
    let mut shown = false;
    let result = (|| {
        let ending = match record::record(&request)? {
            Ok(ending) => ending,
            Err(code) => return Ok(code),
        };
        shown = true;
        let mut settings = Settings::new(&args.display, Default::default());
        settings.srcline = srcline;
        settings.color = args.display.color.enabled_for(destination.terminal());
        let (mut stdout, mut stderr) = (std::io::stdout().lock(), std::io::stderr().lock());
        let out: &mut dyn std::io::Write = match (&destination, file.as_mut()) {
            (Destination::File(_), Some(f)) => f,
            (Destination::Stderr, _) => {
                use std::io::Write;
                writeln!(
                    stderr,
                    "fntrace: the trace follows on standard error: standard output is not a terminal, and it is the program's (-o FILE writes the trace to a file)"
                )?;
                &mut stderr
            }
            _ => &mut stdout,
        };
        if let Err(e) = replay::replay(&dir, &settings, out) {
            let Some(nothing) = e.downcast_ref::<NothingToShow>() else {
                return Err(e);
            };
            eprintln!("fntrace: warning: {nothing}");
        }
        record::say_losses(&dir);
        Ok(ExitCode::from(ending.exit_code()))
    })();
    let _ = fs::remove_dir_all(&dir);
    if let (Destination::File(path), false) = (&destination, shown && result.is_ok()) {
        // Nothing was traced: no file is left that looks like a trace.
        drop(file);
        let _ = fs::remove_file(path);
    }
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
