//! Errors of site discovery and of `recordmcount`.

/// Why a file could not be read or rewritten.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not an ELF file at all.
    #[error("not an ELF file")]
    NotElf,
    /// An ELF file of an architecture fntrace does not handle.
    #[error("unsupported architecture {0} (fntrace handles x86-64, AArch64 and MIPS ELF files)")]
    UnsupportedArch(String),
    /// An ELF file whose structure is broken (truncated, offsets out of
    /// range, bad tables).
    #[error("malformed ELF file: {0}")]
    Malformed(String),
    /// A file that `recordmcount` cannot rewrite.
    #[error("{0}")]
    Unsupported(String),
}

impl From<object::Error> for Error {
    fn from(e: object::Error) -> Self {
        Error::Malformed(e.to_string())
    }
}

/// Result of site discovery.
pub type Result<T, E = Error> = std::result::Result<T, E>;
