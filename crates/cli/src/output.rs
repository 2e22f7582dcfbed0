//! Shared helpers of the subcommands: reading input files, and output that
//! stops quietly when the reader goes away (`fntrace list prog | head`).

use std::io;
use std::path::Path;

use anyhow::Context;

/// True if the error is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<io::Error>())
        .any(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

/// Reads a whole input file, with its path in the error.
pub fn read_input(path: &Path) -> anyhow::Result<Vec<u8>> {
    if path.is_dir() {
        anyhow::bail!("{}: is a directory", path.display());
    }
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
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
