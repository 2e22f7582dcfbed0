//! A data directory packed into one byte string, the input of the fuzz
//! target `readers` (`fuzz/`) and of its regression tests: the string is
//! split at markers `%%F:` followed by a letter naming the file the bytes up
//! to the next marker go to:
//!
//! | letter | file | when absent |
//! |---|---|---|
//! | `i` | `info.json` | no file |
//! | `p`, `P` | `p1/process.json`, `p2/process.json` | a valid one |
//! | `f`, `F` | `p1/functions.tsv`, `p2/functions.tsv` | a valid one |
//! | `r` | `p1/profile.tsv` | no file |
//! | `t`, `T` | a thread file of `p1`, `p2`, named after the tid of its first chunk | no file |
//!
//! `p2/` is made only when there is a `P`, `F` or `T` section.
//! `fuzz/seed-readers.sh` packs real recordings this way.

use std::fs;
use std::path::Path;

use fntrace_format::layout;
use fntrace_format::meta::{Clock, FunctionEntry, ProcessInfo, VERSION};

/// What starts a section.
pub const MARK: &[u8] = b"%%F:";

/// The sections of `data`: `(letter, bytes)`.
fn sections(data: &[u8]) -> Vec<(u8, &[u8])> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + MARK.len() < data.len() {
        if &data[i..i + MARK.len()] == MARK {
            starts.push(i);
            i += MARK.len() + 1;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::new();
    for (k, &at) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(data.len());
        out.push((data[at + MARK.len()], &data[at + MARK.len() + 1..end]));
    }
    out
}

/// The `process.json` of a section left out: process `pid`, clock
/// `monotonic`.
fn default_process(pid: u32) -> String {
    let info = ProcessInfo {
        version: VERSION,
        pid,
        exe: "/work/prog".into(),
        argv: vec!["prog".into()],
        tracer: "function_graph".into(),
        clock: Clock::monotonic(1_000_000),
        ..ProcessInfo::default()
    };
    info.to_json()
}

/// The `functions.tsv` of a section left out: four functions.
fn default_functions() -> String {
    ["main", "f", "g", "_ZN2ns1hEv"]
        .iter()
        .enumerate()
        .map(|(fid, name)| {
            FunctionEntry {
                fid: fid as u32,
                module: "/work/prog".into(),
                address: 0x1000 + 0x100 * fid as u64,
                size: 0x100,
                name: name.to_string(),
            }
            .to_line()
        })
        .collect()
}

/// The thread file name of `bytes`: after the tid of its first chunk.
fn thread_file(bytes: &[u8]) -> String {
    let tid = bytes
        .get(8..12)
        .map_or(1, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    layout::thread_file(tid)
}

/// Makes `dir` (removed first if it exists) the data directory packed in
/// `data`.
pub fn unpack(data: &[u8], dir: &Path) -> std::io::Result<()> {
    let _ = fs::remove_dir_all(dir);
    let sections = sections(data);
    let second = sections.iter().any(|(k, _)| b"PFT".contains(k));
    for (pid, letters) in [(1, b"pft"), (2, b"PFT")] {
        if pid == 2 && !second {
            continue;
        }
        let sub = dir.join(layout::process_dir(pid, 0));
        fs::create_dir_all(&sub)?;
        let has = |k: u8| sections.iter().any(|(l, _)| *l == k);
        if !has(letters[0]) {
            fs::write(sub.join(layout::PROCESS), default_process(pid))?;
        }
        if !has(letters[1]) {
            fs::write(sub.join(layout::FUNCTIONS), default_functions())?;
        }
    }
    for (letter, bytes) in sections {
        let path = match letter {
            b'i' => dir.join(layout::INFO),
            b'p' => dir.join("p1").join(layout::PROCESS),
            b'P' if second => dir.join("p2").join(layout::PROCESS),
            b'f' => dir.join("p1").join(layout::FUNCTIONS),
            b'F' if second => dir.join("p2").join(layout::FUNCTIONS),
            b'r' => dir.join("p1").join(layout::PROFILE),
            b't' => dir.join("p1").join(thread_file(bytes)),
            b'T' if second => dir.join("p2").join(thread_file(bytes)),
            _ => continue,
        };
        fs::write(path, bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_make_files() {
        let dir = std::env::temp_dir().join(format!("fntrace-packed-{}", std::process::id()));
        let mut thread = vec![0u8; 32];
        thread[8..12].copy_from_slice(&77u32.to_le_bytes());
        let mut data = b"ignored%%F:i{}%%F:rFID\n%%F:t".to_vec();
        data.extend(&thread);
        data.extend(b"%%F:x?%%F:Tshort%%F:");
        unpack(&data, &dir).unwrap();
        let read = |path: &str| fs::read(dir.join(path)).unwrap();
        assert_eq!(read("info.json"), b"{}");
        assert_eq!(read("p1/profile.tsv"), b"FID\n");
        assert_eq!(read("p1/t77.events"), thread);
        assert_eq!(read("p2/t1.events"), b"short%%F:");
        let process = ProcessInfo::from_json(&String::from_utf8(read("p2/process.json")).unwrap());
        assert_eq!(process.unwrap().pid, 2);
        assert_eq!(read("p1/functions.tsv"), read("p2/functions.tsv"));
        assert_eq!(fs::read_dir(dir.join("p1")).unwrap().count(), 4);
        // Unpacking again starts from nothing.
        unpack(b"%%F:p{", &dir).unwrap();
        assert_eq!(read("p1/process.json"), b"{");
        assert!(!dir.join("p2").exists() && !dir.join("info.json").exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
