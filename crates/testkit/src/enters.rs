//! The entries a `-finstrument-functions` build logged, a second reading
//! of a program's calls: its hooks (`tests/programs/real/enters.c`,
//! linked into the program) write, per thread, every entry as the
//! function's offset from `__executable_start`, in `DIR/enters.TID`.
//!
//! It counts calls as the source makes them, not as the machine does:
//! the compiler calls the hooks for inlined calls too, and keeps
//! recursion that a plain build turns into a loop. Its counts equal
//! callgrind's only for functions that every build calls out of line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cc, program, require, run};

/// The hook library's source.
pub fn hooks() -> String {
    program("real/enters.c")
}

/// Builds `sources` (C) into `out` with `-finstrument-functions` and
/// `flags`, linked with the hooks.
pub fn build(sources: &[&Path], out: &Path, flags: &[&str]) -> PathBuf {
    build_with("gcc", sources, out, flags)
}

/// [`build`] with the C compiler `compiler` (a cross gcc).
pub fn build_with(compiler: &str, sources: &[&Path], out: &Path, flags: &[&str]) -> PathBuf {
    let hooks_obj = out.with_extension("enters.o");
    let mut args = vec!["-O2", "-c", "-o", hooks_obj.to_str().unwrap()];
    let hooks = hooks();
    args.push(&hooks);
    cc(compiler, &args);
    let mut args: Vec<&str> = vec!["-finstrument-functions"];
    args.extend(flags);
    args.extend(sources.iter().map(|s| s.to_str().unwrap()));
    args.extend([
        hooks_obj.to_str().unwrap(),
        "-pthread",
        "-o",
        out.to_str().unwrap(),
    ]);
    cc(compiler, &args);
    out.to_path_buf()
}

/// The entries logged in `dir` by a run of `exe`: per thread (the log
/// files in the order of their thread ids), the function addresses
/// entered, in order, as `nm` gives them.
pub fn read(dir: &Path, exe: &Path) -> Vec<Vec<u64>> {
    let start = nm(exe)
        .into_iter()
        .find(|(_, _, name)| name == "__executable_start")
        .map(|(address, _, _)| address)
        .unwrap_or_else(|| panic!("{}: no __executable_start", exe.display()));
    let mut logs: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let tid = p.file_name()?.to_str()?.strip_prefix("enters.")?.parse().ok()?;
            Some((tid, p))
        })
        .collect();
    logs.sort();
    logs.iter()
        .map(|(_, path)| {
            let bytes = std::fs::read(path).unwrap();
            assert_eq!(bytes.len() % 8, 0, "{}: a torn entry", path.display());
            bytes
                .chunks_exact(8)
                .map(|c| start + u64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect()
}

/// Entries per function address, over all threads.
pub fn counts(threads: &[Vec<u64>]) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    for address in threads.iter().flatten() {
        *out.entry(*address).or_default() += 1;
    }
    out
}

/// The function symbols (`T`, `t`, `W`, `w`) of `path` by address: every
/// name at that address (aliases), in `nm`'s order.
pub fn functions(path: &Path) -> BTreeMap<u64, Vec<String>> {
    let mut map: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (address, kind, name) in nm(path) {
        // `$x` and `$d` are AArch64's mapping symbols, not functions.
        if matches!(kind.as_str(), "T" | "t" | "W" | "w") && !name.starts_with('$') {
            map.entry(address).or_default().push(name);
        }
    }
    map
}

/// `nm --defined-only`: (address, kind, name).
fn nm(path: &Path) -> Vec<(u64, String, String)> {
    require("nm");
    let out = run(Command::new("nm").arg("--defined-only").arg(path));
    out.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let address = u64::from_str_radix(fields.next()?, 16).ok()?;
            Some((address, fields.next()?.to_string(), fields.next()?.to_string()))
        })
        .collect()
}
