//! The separate debug file of a stripped binary, looked up as gdb looks
//! it up (gdb's "Separate Debug Files"):
//! - by build ID (`NT_GNU_BUILD_ID`): `ROOT/.build-id/xx/yyyy….debug`,
//!   `xx` the first byte in hex, `yyyy…` the rest;
//! - by `.gnu_debuglink` (a file name and the CRC-32 of the debug file,
//!   checked): beside the binary, in `.debug/` beside it, and under
//!   `ROOT` + the binary's directory.
//!
//! `ROOT` is each directory of [`debug_roots`]: `/usr/lib/debug` (gdb's
//! default `debug-file-directory`), or the colon-separated list in
//! `FNTRACE_DEBUG_FILE_DIRECTORY`, read as gdb reads its
//! `debug-file-directory` setting.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

/// The environment variable that replaces the global debug directories.
pub const DEBUG_DIRS_VAR: &str = "FNTRACE_DEBUG_FILE_DIRECTORY";

/// The global debug directories, in the order they are searched.
pub fn debug_roots() -> Vec<PathBuf> {
    match std::env::var_os(DEBUG_DIRS_VAR) {
        Some(list) if !list.is_empty() => std::env::split_paths(&list).collect(),
        _ => vec![PathBuf::from("/usr/lib/debug")],
    }
}

/// The contents of the separate debug file of the binary at `path` (its
/// bytes `data`), if one is found and checks out.
pub fn find(path: &Path, data: &[u8]) -> Option<Vec<u8>> {
    let file = object::File::parse(data).ok()?;
    let roots = debug_roots();
    if let Some(id) = build_id(&file) {
        if id.len() >= 2 {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            for root in &roots {
                let candidate = root
                    .join(".build-id")
                    .join(&hex[..2])
                    .join(format!("{}.debug", &hex[2..]));
                if let Some(debug) = read(&candidate).filter(|d| same_build_id(d, &id)) {
                    return Some(debug);
                }
            }
        }
    }
    let (name, crc) = debuglink(&file)?;
    let dir = std::fs::canonicalize(path).ok()?.parent()?.to_path_buf();
    let mut candidates = vec![dir.join(&name), dir.join(".debug").join(&name)];
    for root in &roots {
        let under = dir.strip_prefix("/").unwrap_or(&dir);
        candidates.push(root.join(under).join(&name));
    }
    candidates
        .into_iter()
        .filter(|c| c.as_path() != path)
        .filter_map(|c| read(&c))
        .find(|d| crc32(d) == crc)
}

/// A regular file's contents (at most 4 GiB, as binaries are read).
fn read(path: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > 1 << 32 {
        return None;
    }
    std::fs::read(path).ok()
}

/// The `NT_GNU_BUILD_ID` note's descriptor.
fn build_id(file: &object::File<'_>) -> Option<Vec<u8>> {
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}

fn same_build_id(debug: &[u8], id: &[u8]) -> bool {
    object::File::parse(debug)
        .ok()
        .and_then(|f| build_id(&f))
        .is_some_and(|d| d == id)
}

/// `.gnu_debuglink`: a NUL-terminated file name, padded to 4 bytes, then
/// the CRC-32 of the debug file in the file's byte order.
fn debuglink(file: &object::File<'_>) -> Option<(String, u32)> {
    let data = file.section_by_name(".gnu_debuglink")?.data().ok()?;
    let end = data.iter().position(|&b| b == 0)?;
    let name = std::str::from_utf8(&data[..end]).ok()?;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let at = (end + 4) & !3;
    let bytes: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
    let crc = if file.is_little_endian() {
        u32::from_le_bytes(bytes)
    } else {
        u32::from_be_bytes(bytes)
    };
    Some((name.to_string(), crc))
}

/// The CRC-32 `.gnu_debuglink` uses (IEEE 802.3, reflected, as zlib's).
pub fn crc32(data: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, entry) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *entry = c;
    }
    !data.iter().fold(!0u32, |c, &b| {
        table[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_of_known_strings() {
        // The check value of CRC-32/ISO-HDLC, and zlib's crc32 of "".
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }
}
