//! Opening and reading input files with bounds (`docs/FORMAT.md`,
//! "Limits"): only regular files are read — a FIFO would block, a
//! character device such as `/dev/zero` never ends, a directory or a socket
//! has no contents — and never more than the file's size when it was
//! opened, nor more than a limit for its kind.
//!
//! The file's type is checked before it is opened and again on the open
//! file, which is opened with `O_NONBLOCK` so that a FIFO put in its place
//! in between cannot block the open either.

use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest `info.json` or `process.json` a reader reads.
pub const JSON_LIMIT: u64 = 64 << 20;
/// The largest `functions.tsv` or `profile.tsv` a reader reads.
pub const TABLE_LIMIT: u64 = 1 << 30;

/// Why an input file is not read. The message names no file: the caller
/// puts its name in front (`p12/process.json: is a FIFO, not a regular
/// file`).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A FIFO, a device, a directory, a socket.
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    /// Larger than the limit for its kind.
    #[error("{len} bytes, more than the {} limit for this file", size(*.limit))]
    TooLarge {
        /// The file's size.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// Text that is not UTF-8.
    #[error("is not UTF-8 text")]
    NotText,
    /// The system's error.
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
}

impl FileError {
    /// Whether the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }
}

/// Opens `path` (following symbolic links) if it is a regular file;
/// returns it with its size.
pub fn open_regular(path: &Path) -> Result<(File, u64), FileError> {
    regular(&fs::metadata(path)?)?;
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    regular(&meta)?;
    Ok((file, meta.len()))
}

/// The contents of the regular file `path`, if it holds at most `limit`
/// bytes.
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let (file, len) = open_regular(path)?;
    if len > limit {
        return Err(FileError::TooLarge { len, limit });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The contents of the regular file `path` as text, if it holds at most
/// `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, FileError> {
    String::from_utf8(read_limited(path, limit)?).map_err(|_| FileError::NotText)
}

/// Fails unless `meta` is a regular file's, naming what it is.
fn regular(meta: &Metadata) -> Result<(), FileError> {
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    };
    Err(FileError::NotRegular(what))
}

/// A limit for messages: `64 MiB`, `1 GiB`.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b => format!("{b}-byte"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fntrace-file-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn refuses_what_is_not_a_regular_file() {
        let dir = scratch("special");
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let socket = dir.join("socket");
        drop(UnixListener::bind(&socket).unwrap());
        let zero = dir.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        for (path, what) in [
            (fifo.as_path(), "is a FIFO"),
            (&socket, "is a socket"),
            (&zero, "is a character device"),
            (Path::new("/dev/zero"), "is a character device"),
            (&dir, "is a directory"),
        ] {
            let e = read_limited(path, 1 << 20).unwrap_err().to_string();
            assert_eq!(e, format!("{what}, not a regular file"));
        }
        let e = read_limited(&dir.join("missing"), 1).unwrap_err();
        assert!(
            e.is_not_found() && e.to_string().starts_with("cannot read: "),
            "{e}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn reads_up_to_the_limit() {
        let dir = scratch("limit");
        let path = dir.join("f");
        fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_limited(&path, 10).unwrap(), b"0123456789");
        assert_eq!(read_text(&path, 1 << 20).unwrap(), "0123456789");
        let e = read_limited(&path, 9).unwrap_err().to_string();
        assert_eq!(e, "10 bytes, more than the 9-byte limit for this file");
        // A sparse file over the limit is refused before anything is read.
        File::create(&path).unwrap().set_len((64 << 20) + 1).unwrap();
        let e = read_limited(&path, JSON_LIMIT).unwrap_err().to_string();
        assert_eq!(e, "67108865 bytes, more than the 64 MiB limit for this file");
        fs::write(&path, b"\xff\xfe").unwrap();
        assert_eq!(read_text(&path, 10).unwrap_err().to_string(), "is not UTF-8 text");
        assert_eq!(size(TABLE_LIMIT), "1 GiB");
        let _ = fs::remove_dir_all(&dir);
    }
}
