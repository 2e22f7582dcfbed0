//! The errors that stop a whole data directory from being read.
//!
//! Everything smaller (one process, one thread file, one table line) is a
//! *damage note*: a one-line string, and reading goes on.

use std::path::PathBuf;

/// Why a data directory cannot be read at all. Every message is one line
/// and names the path.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The directory holds neither `info.json` nor any `p*/` directory.
    #[error("{}: not a fntrace data directory (no info.json and no p*/ directory)", .0.display())]
    NotDataDir(PathBuf),
    /// A file or directory that could not be read. The system's reason is
    /// in the message, and not also a `source` (a report of the error's
    /// chain, as `anyhow`'s, would say it twice).
    #[error("{}: cannot read: {error}", path.display())]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The system's reason.
        error: std::io::Error,
    },
    /// A file written in a format version this reader does not read.
    #[error("{}: format version {version} is not supported (this reader reads {})", path.display(), crate::meta::VERSION)]
    Version {
        /// The file with the version.
        path: PathBuf,
        /// The version it declares.
        version: u32,
    },
}

impl FormatError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> FormatError {
        FormatError::Io {
            path: path.into(),
            error: source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_and_name_the_path() {
        let e = FormatError::NotDataDir("/x/d".into());
        assert_eq!(
            e.to_string(),
            "/x/d: not a fntrace data directory (no info.json and no p*/ directory)"
        );
        let e = FormatError::io("/x/d", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(e.to_string().starts_with("/x/d: cannot read: "));
        let e = FormatError::Version {
            path: "/x/d/info.json".into(),
            version: 2,
        };
        assert_eq!(
            e.to_string(),
            "/x/d/info.json: format version 2 is not supported (this reader reads 1)"
        );
    }
}
