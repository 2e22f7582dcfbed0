//! Where an export goes: standard output (or the writer given instead), or
//! a file written whole or not
//! at all. `-o FILE` writes `FILE.tmp` and renames it to `FILE` once
//! everything is written ([`Sink::commit`]); a sink dropped before that
//! (an error, an empty trace) removes `FILE.tmp`, so a failure never
//! leaves a file behind, nor a cut-short one in place of a good one.
//!
//! Only regular files are replaced that way: `-o /dev/null`, a FIFO or any
//! other existing file that is not a regular file is written directly (a
//! rename would put a regular file in its place), and `-o LINK` to a
//! regular file replaces the file the link points to, keeping the link.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Bytes buffered before a write reaches the file or pipe.
const BUFFER: usize = 256 * 1024;

/// An output being written.
pub struct Sink<'a> {
    out: BufWriter<Box<dyn Write + 'a>>,
    /// `(temporary file, final path)` for `-o FILE`.
    file: Option<(PathBuf, PathBuf)>,
}

impl<'a> Sink<'a> {
    /// `stdout` when `path` is `None`, else `PATH.tmp` (created now,
    /// renamed by [`Sink::commit`]).
    pub fn create(path: Option<&Path>, stdout: &'a mut dyn Write) -> anyhow::Result<Sink<'a>> {
        let Some(path) = path else {
            return Ok(Sink {
                out: BufWriter::with_capacity(BUFFER, Box::new(stdout)),
                file: None,
            });
        };
        if path.is_dir() {
            anyhow::bail!("{}: is a directory", path.display());
        }
        match fs::metadata(path) {
            Ok(meta) if !meta.is_file() => {
                let file = fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                return Ok(Sink {
                    out: BufWriter::with_capacity(BUFFER, Box::new(file)),
                    file: None,
                });
            }
            _ => {}
        }
        let target = match fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                fs::canonicalize(path).with_context(|| format!("cannot resolve {}", path.display()))?
            }
            _ => path.to_path_buf(),
        };
        let path = target.as_path();
        let tmp = temporary(path);
        let file = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        Ok(Sink {
            out: BufWriter::with_capacity(BUFFER, Box::new(file)),
            file: Some((tmp, path.to_path_buf())),
        })
    }

    /// The writer.
    pub fn out(&mut self) -> &mut BufWriter<Box<dyn Write + 'a>> {
        &mut self.out
    }

    /// Flushes, and moves the temporary file into place.
    pub fn commit(mut self) -> anyhow::Result<()> {
        let label = self
            .file
            .as_ref()
            .map_or_else(|| "the output".to_string(), |(tmp, _)| tmp.display().to_string());
        self.out
            .flush()
            .with_context(|| format!("cannot write {label}"))?;
        if let Some((tmp, path)) = self.file.take() {
            if let Err(e) = fs::rename(&tmp, &path) {
                let _ = fs::remove_file(&tmp);
                return Err(e)
                    .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()));
            }
        }
        Ok(())
    }
}

impl Drop for Sink<'_> {
    fn drop(&mut self) {
        if let Some((tmp, _)) = self.file.take() {
            let _ = fs::remove_file(tmp);
        }
    }
}

/// `PATH.tmp`, beside `PATH`.
fn temporary(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".tmp");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::os::unix::fs::FileTypeExt;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fntrace-sink-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn commit_renames_and_drop_removes() {
        let mut stdout = io::sink();
        let dir = scratch("commit");
        let path = dir.join("out.json");
        let mut sink = Sink::create(Some(&path), &mut stdout).unwrap();
        sink.out().write_all(b"{}").unwrap();
        assert!(dir.join("out.json.tmp").exists() && !path.exists());
        sink.commit().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        assert!(!dir.join("out.json.tmp").exists());

        let other = dir.join("other.json");
        let mut sink = Sink::create(Some(&other), &mut stdout).unwrap();
        sink.out().write_all(b"partial").unwrap();
        drop(sink);
        assert!(!other.exists() && !dir.join("other.json.tmp").exists());
        // A failed export leaves the previous file as it was.
        drop(Sink::create(Some(&path), &mut stdout).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn special_files_are_written_in_place() {
        let mut stdout = io::sink();
        let dir = scratch("special");
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        let mut sink = Sink::create(Some(&fifo), &mut stdout).unwrap();
        sink.out().write_all(b"through").unwrap();
        sink.commit().unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        let meta = fs::symlink_metadata(&fifo).unwrap();
        assert!(meta.file_type().is_fifo(), "the FIFO is still one");
        assert!(!dir.join("fifo.tmp").exists());

        // A link to a regular file: the file is replaced, the link kept.
        let real = dir.join("real.json");
        fs::write(&real, b"old").unwrap();
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut sink = Sink::create(Some(&link), &mut stdout).unwrap();
        sink.out().write_all(b"new").unwrap();
        sink.commit().unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"new");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn refuses_directories_and_missing_parents() {
        let mut stdout = io::sink();
        let dir = scratch("errors");
        let e = Sink::create(Some(&dir), &mut stdout).err().unwrap().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let e = Sink::create(Some(&dir.join("no/such/file")), &mut stdout)
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("cannot create"), "{e:#}");
        let _ = fs::remove_dir_all(&dir);
    }
}
