//! Shared helpers of the subcommands: reading input files, and output that
//! stops quietly when the reader goes away (`fntrace list prog | head`).

use std::io;
use std::path::Path;

use fntrace_format::read::file;

/// True if the error is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<io::Error>())
        .any(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

/// An option the arguments' parser could not check (it depends on another
/// option, as a pattern on `--match`): a usage error, exit status 2 as
/// clap's.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The exit status of an error: 2 for a [`UsageError`], else 1.
pub fn exit_status(e: &anyhow::Error) -> u8 {
    match e.downcast_ref::<UsageError>() {
        Some(_) => 2,
        None => 1,
    }
}

/// The largest binary `fntrace list`, `record` and `recordmcount` read.
pub const BINARY_LIMIT: u64 = 4 << 30;

/// Reads a whole input binary (a regular file of at most
/// [`BINARY_LIMIT`]), with its path in the error.
pub fn read_input(path: &Path) -> anyhow::Result<Vec<u8>> {
    file::read_limited(path, BINARY_LIMIT).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The file name of a path, for messages and module matching.
pub fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Writes `value` as pretty JSON and a newline. I/O errors stay I/O errors,
/// so that a closed pipe is recognised.
pub fn write_json(out: &mut impl io::Write, value: &impl serde::Serialize) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(|e| match e.io_error_kind() {
        Some(kind) => io::Error::from(kind),
        None => io::Error::other(e),
    })?;
    writeln!(out)
}

/// Prints a one-line error and gives the exit status to return.
pub fn fail(code: u8, message: &str) -> std::process::ExitCode {
    eprintln!("fntrace: error: {message}");
    std::process::ExitCode::from(code)
}
