//! `fntrace ctl PID COMMAND [ARG]`: changes what an attached process
//! records, as writing to tracefs files does for the kernel's ftrace —
//! `filter`, `notrace`, `depth`, `tracing on|off` — or ends the session
//! (`detach`); `status` tells what is traced.

use std::process::ExitCode;
use std::time::Duration;

use fntrace_format::control::{self as protocol, Request};
use fntrace_format::settings::patterns;

use crate::control::{self, Failure};

const AFTER_HELP: &str = "\
Commands:
  filter PATTERNS   trace only these functions (empty: all), as -F
  notrace PATTERNS  never trace these, as -N
  depth N           record calls nested at most N deep (0: no limit)
  tracing on|off    stop or resume tracing (sites go back to NOPs while off)
  status            sites, sites traced, tracing on or off
  detach            end the session (as Ctrl-C to fntrace attach)
PATTERNS are separated by spaces or commas, in ftrace's syntax. A filter
with a pattern that matches no function the process has sites in is
refused, and the filter in force stays; --force sets it anyway (for
functions of libraries the process has yet to load).

Examples:
  fntrace ctl 1234 filter 'parse_* lex_*'
  fntrace ctl 1234 tracing off";

/// Change what an attached process records (filters, depth, tracing on/off), or detach.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The attached process.
    #[arg(value_name = "PID")]
    pid: i32,
    /// What to do.
    #[arg(value_enum, value_name = "COMMAND")]
    command: Verb,
    /// Its argument (patterns, a number, on or off).
    #[arg(value_name = "ARG", num_args = 0.., allow_hyphen_values = true)]
    arg: Vec<String>,
    /// filter, notrace: set the filter even if a pattern matches no function.
    #[arg(long)]
    force: bool,
}

/// The commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Verb {
    Filter,
    Notrace,
    Depth,
    Tracing,
    Status,
    Detach,
}

/// The request `verb` with `arg` makes (`fntrace_format::control`).
fn request(verb: Verb, arg: &[String], force: bool) -> Result<Request, String> {
    let arg = arg.join(" ");
    let patterns = || patterns(&arg).map(str::to_string).collect();
    Ok(match verb {
        Verb::Filter => Request::Filter {
            patterns: patterns(),
            force,
        },
        Verb::Notrace => Request::Notrace {
            patterns: patterns(),
            force,
        },
        _ if force => return Err("--force goes with filter or notrace".into()),
        Verb::Depth => match arg.trim().parse::<u32>() {
            Ok(n) => Request::Depth(n),
            Err(_) => return Err(format!("depth takes a number (0: no limit), not '{arg}'")),
        },
        Verb::Tracing => match arg.trim() {
            "on" => Request::Tracing(true),
            "off" => Request::Tracing(false),
            _ => return Err(format!("tracing takes on or off, not '{arg}'")),
        },
        Verb::Status if arg.is_empty() => Request::Status,
        Verb::Detach if arg.is_empty() => Request::Detach,
        Verb::Status | Verb::Detach => return Err(format!("{verb:?} takes no argument").to_lowercase()),
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let request = request(args.command, &args.arg, args.force).map_err(anyhow::Error::msg)?;
    let pid = args.pid;
    if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        anyhow::bail!("no process with PID {pid}");
    }
    let dir = control::dir()?;
    control::clean(&dir);
    let socket = control::socket(&dir, pid);
    match control::request(&socket, &request, Duration::from_secs(60)) {
        Ok(answer) => {
            println!("{}", if answer.is_empty() { protocol::OK } else { &answer });
            Ok(ExitCode::SUCCESS)
        }
        Err(Failure::NoSession) => {
            anyhow::bail!("process {pid} is not attached (fntrace attach {pid} first)")
        }
        Err(Failure::Refused(reason)) => match protocol::parse_unmatched(&reason) {
            Some(pattern) => anyhow::bail!(
                "{} '{pattern}' matches no function of process {pid}; the filter in force stays \
                 (--force to set it anyway, for functions of libraries it has yet to load)",
                match args.command {
                    Verb::Notrace => protocol::NOTRACE,
                    _ => protocol::FILTER,
                }
            ),
            None => anyhow::bail!("process {pid}: {reason}"),
        },
        Err(e) => anyhow::bail!("process {pid}: {e}"),
    }
}
