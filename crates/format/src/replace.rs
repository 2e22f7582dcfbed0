//! How the descriptive files (`info.json`, `process.json`) are rewritten,
//! by the CLI and by the runtime: through a temporary file `.NAME.tmp` and
//! `rename`, so that a reader never sees half of one; and when there is no
//! room for a new file (a full disk), in place, so that what the file says
//! last (the exit status, the end, the clock calibration, the events lost)
//! is still said. The old file's blocks are reused: a shorter text is
//! padded with spaces to the old length (trailing whitespace is valid
//! JSON), so that only a longer one needs room, and on most file systems
//! only when it grows into a new block. A temporary file that could not be
//! written whole is removed.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Replaces the file at `path` with `contents`, atomically when there is
/// room for a second copy, else in place. The error is the first one met.
pub fn replace(path: &Path, contents: &[u8]) -> io::Result<()> {
    let tmp = temporary(path);
    let renamed = std::fs::write(&tmp, contents).and_then(|()| std::fs::rename(&tmp, path));
    let Err(error) = renamed else {
        return Ok(());
    };
    let _ = std::fs::remove_file(&tmp);
    overwrite(path, contents).map_err(|_| error)
}

/// The temporary file beside `path`: `.NAME.tmp`.
fn temporary(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    path.with_file_name(format!(".{name}.tmp"))
}

/// Writes `contents` over the existing file at `path`, padded with spaces
/// to its length.
fn overwrite(path: &Path, contents: &[u8]) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    let old = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
    let mut text = contents.to_vec();
    if text.len() < old {
        text.resize(old, b' ');
    }
    file.write_all_at(&text, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_atomically_or_in_place() {
        let dir = std::env::temp_dir().join(format!("fntrace-replace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("info.json");
        replace(&path, b"{\"a\": 1234}\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\": 1234}\n");
        assert!(!dir.join(".info.json.tmp").exists());
        // In place, shorter: padded to the old length, still the same JSON.
        overwrite(&path, b"{\"a\": 1}\n").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.len(), 12);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap()["a"], 1);
        // No directory to write in: the first error, nothing left behind.
        let gone = dir.join("none").join("info.json");
        assert_eq!(replace(&gone, b"{}").unwrap_err().kind(), io::ErrorKind::NotFound);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
