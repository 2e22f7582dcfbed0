//! `fntrace`: the command line. One module per subcommand under the
//! library's `cmd/`; clap turns the arguments into plain structs here, at
//! the edge.
#![forbid(unsafe_code)]

use std::io;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fntrace::readers::Reader;
use fntrace::{cmd, exit_status, is_broken_pipe};

/// A dynamic function tracer for Linux user-space programs.
#[derive(Parser)]
#[command(name = "fntrace", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Record(cmd::record::Args),
    Live(cmd::live::Args),
    Attach(cmd::attach::Args),
    Ctl(cmd::ctl::Args),
    #[command(flatten)]
    Reader(Reader),
    Tui(cmd::tui::Args),
    List(cmd::list::Args),
    Recordmcount(cmd::recordmcount::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let result = match cli.command {
        Command::Record(args) => cmd::record::run(args),
        Command::Live(args) => cmd::live::run(args),
        Command::Attach(args) => cmd::attach::run(args),
        Command::Ctl(args) => cmd::ctl::run(args),
        Command::Reader(reader) => reader.run(&mut io::stdout().lock()),
        Command::Tui(args) => cmd::tui::run(args),
        Command::List(args) => cmd::list::run(&args),
        Command::Recordmcount(args) => cmd::recordmcount::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fntrace: error: {e:#}");
            ExitCode::from(exit_status(&e))
        }
    }
}

/// Help and version go out as clap writes them; a usage error is one line.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            // clap's message is the lines before its usage block.
            let text = e.render().to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            eprintln!("fntrace: error: {message} (see 'fntrace --help')");
            ExitCode::from(2)
        }
    }
}
