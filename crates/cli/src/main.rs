//! `fntrace`: the command line. One module per subcommand under `cmd/`;
//! clap turns the arguments into plain structs here, at the edge.
#![forbid(unsafe_code)]

mod cmd;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A dynamic function tracer for Linux user-space programs.
#[derive(Parser)]
#[command(name = "fntrace", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    List(cmd::list::Args),
    Recordmcount(cmd::recordmcount::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List(args) => cmd::list::run(&args),
        Command::Recordmcount(args) => cmd::recordmcount::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fntrace: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
