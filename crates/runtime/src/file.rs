//! A module's file, mapped read-only for discovery. Reading it would copy
//! the whole file (16 MB for a program of 100,000 functions) into fresh
//! heap pages, most of which discovery never looks at; a mapping shares the
//! page cache and touches only what is read.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// The bytes of a file: a private read-only mapping, or a copy where the
/// file cannot be mapped (empty, or a file system without `mmap`).
pub enum ModuleFile {
    /// A mapping of `len` bytes at `ptr`.
    Mapped { ptr: *const u8, len: usize },
    /// The file's contents.
    Read(Vec<u8>),
}

impl ModuleFile {
    /// The file at `path`.
    pub fn open(path: &str) -> io::Result<ModuleFile> {
        let file = File::open(path)?;
        let len = usize::try_from(file.metadata()?.len()).map_err(|_| io::ErrorKind::InvalidData)?;
        if len > 0 {
            // SAFETY: a new private read-only mapping of a file we opened
            // aliases no memory of ours. The file is a module the dynamic
            // linker mapped already: were it truncated or rewritten in place
            // meanwhile, the program's own code (mapped from it) would break
            // just as this reading would.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    file.as_raw_fd(),
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                return Ok(ModuleFile::Mapped {
                    ptr: p as *const u8,
                    len,
                });
            }
        }
        std::fs::read(path).map(ModuleFile::Read)
    }

    /// The contents.
    pub fn bytes(&self) -> &[u8] {
        match self {
            // SAFETY: the mapping is `len` readable bytes, unmapped only
            // when `self` is dropped, which the borrow prevents meanwhile.
            ModuleFile::Mapped { ptr, len } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
            ModuleFile::Read(data) => data,
        }
    }
}

impl Drop for ModuleFile {
    fn drop(&mut self) {
        if let ModuleFile::Mapped { ptr, len } = *self {
            // SAFETY: our own mapping, no longer borrowed (see `bytes`).
            unsafe { libc::munmap(ptr as *mut libc::c_void, len) };
        }
    }
}
