//! Golden outputs, in the manner of uftrace's `tests/`: a reader's output
//! normalised (durations, thread ids and pids replaced; the lines of
//! functions that are not the program's own dropped) and compared with
//! the expected file beside the program (`tests/programs/e2e/`), which
//! `FNTRACE_BLESS=1` rewrites. Shared by `e2e.rs` (x86-64) and
//! `foreign_record.rs` (AArch64: the same files).
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use super::programs;

/// The duration column of a normalised line that had a duration.
pub const DUR: &str = "x.xxx us";
/// The duration column of a normalised line without one.
pub const BLANK: &str = "        ";

/// Functions that are not the program's own: their lines are dropped.
pub const FOREIGN: &[&str] = &[
    "_init",
    "_fini",
    "_start",
    "frame_dummy",
    "register_tm_clones",
    "deregister_tm_clones",
    "__do_global_dtors_aux",
];

// ---------------------------------------------------------------------------
// Normalising
// ---------------------------------------------------------------------------

/// The name of the function a graph line's text is about (`None` for a
/// trace_on/trace_off mark).
pub fn function_of(text: &str) -> Option<&str> {
    let t = text.trim();
    if let Some(rest) = t.strip_prefix("} /* ") {
        let rest = rest.strip_suffix(" */").unwrap_or(rest);
        return Some(rest.strip_suffix(" (unwound)").unwrap_or(rest));
    }
    if t.starts_with("/*") {
        return None;
    }
    let t = t.strip_suffix(" {").or_else(|| t.strip_suffix(';')).unwrap_or(t);
    Some(t.strip_suffix("()").unwrap_or(t))
}

pub fn is_foreign(name: &str) -> bool {
    FOREIGN.contains(&name) || name.starts_with("__libc_csu_")
}

/// A replay output, normalised: lines that are not a thread's (the column
/// titles, `# process` lines) and each thread's lines in order, without
/// their TID.
#[derive(Debug, PartialEq)]
pub struct Replay {
    pub other: Vec<String>,
    pub threads: Vec<(u32, Vec<String>)>,
}

impl Replay {
    pub fn parse(output: &str) -> Replay {
        let mut r = Replay {
            other: Vec::new(),
            threads: Vec::new(),
        };
        for line in output.lines() {
            let Some((tid, rest)) = split_tid(line) else {
                r.other.push(normalise_other(line));
                continue;
            };
            let Some(body) = normalise_body(rest) else {
                continue;
            };
            match r.threads.iter_mut().find(|(t, _)| *t == tid) {
                Some((_, lines)) => lines.push(body),
                None => r.threads.push((tid, vec![body])),
            }
        }
        r
    }

    /// The threads in the order of the comparison: the first one to
    /// appear, then the others sorted by their lines.
    pub fn ordered(&self) -> Vec<&(u32, Vec<String>)> {
        let mut threads: Vec<_> = self.threads.iter().collect();
        if threads.len() > 1 {
            threads[1..].sort_by(|a, b| a.1.cmp(&b.1));
        }
        threads
    }

    /// The normalised text: other lines, then each thread as `Tn) ...`.
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        for line in &self.other {
            out.push_str(line);
            out.push('\n');
        }
        for (i, (_, lines)) in self.ordered().into_iter().enumerate() {
            for line in lines {
                out.push_str(&format!("T{}) {line}\n", i + 1));
            }
        }
        out
    }
}

/// ` 1234) rest` -> (1234, "rest").
pub fn split_tid(line: &str) -> Option<(u32, &str)> {
    let t = line.trim_start();
    let close = t.find(')')?;
    let tid = t[..close].parse().ok()?;
    Some((tid, t[close + 1..].strip_prefix(' ').unwrap_or(&t[close + 1..])))
}

/// A thread's line without its TID: the duration column replaced; `None`
/// for a line of a function that is not the program's own.
pub fn normalise_body(rest: &str) -> Option<String> {
    if rest.starts_with("---") {
        return Some(rest.to_string());
    }
    let Some((column, graph)) = rest.split_once('|') else {
        return Some(rest.to_string());
    };
    if function_of(graph).is_some_and(is_foreign) {
        return None;
    }
    let column = if column.trim().is_empty() { BLANK } else { DUR };
    Some(format!("{column} |{graph}"))
}

/// Column titles with single spaces; pids replaced by `N`.
pub fn normalise_other(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let line = words.join(" ");
    if !line.starts_with("# process") {
        return line;
    }
    let mut out = String::new();
    let mut digits = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !digits {
                out.push('N');
            }
            digits = true;
        } else {
            out.push(c);
            digits = false;
        }
    }
    out
}

/// `report --json`: `CALLS  NAME` per function, by name.
pub fn report_counts(json: &str) -> String {
    let rows: serde_json::Value = serde_json::from_str(json).expect("report --json prints JSON");
    let mut rows: Vec<(String, u64)> = rows
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().expect("name").to_string(),
                r["calls"].as_u64().expect("calls"),
            )
        })
        .filter(|(name, _)| !is_foreign(name))
        .collect();
    rows.sort();
    rows.iter()
        .map(|(name, calls)| format!("{calls:>4}  {name}\n"))
        .collect()
}

/// `graph`: each function's name and calls, and its callers and callees
/// by name with their counts; times left out.
pub fn graph_counts(output: &str) -> String {
    let mut out = Vec::new();
    let mut block: Vec<String> = Vec::new();
    let flush = |out: &mut Vec<String>, block: &mut Vec<String>| {
        block.sort();
        out.append(block);
    };
    for line in output.lines() {
        if line.is_empty() {
            flush(&mut out, &mut block);
            out.push(String::new());
        } else if !line.starts_with(' ') {
            flush(&mut out, &mut block);
            out.push(line.split(", total").next().unwrap_or(line).to_string());
        } else if line.trim_end().ends_with(':') {
            flush(&mut out, &mut block);
            out.push(format!("  {}", line.trim()));
        } else {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() < 4 {
                block.push(format!("    ?? {line}"));
                continue;
            }
            // CALLS TIME UNIT NAME...
            block.push(format!("    {}: {}", words[3..].join(" "), words[0]));
        }
    }
    flush(&mut out, &mut block);
    out.iter().map(|l| format!("{l}\n")).collect()
}

// ---------------------------------------------------------------------------
// Expected files
// ---------------------------------------------------------------------------

pub fn expected_path(name: &str) -> PathBuf {
    programs().join("e2e").join(name)
}

/// Compares `actual` with the expected file `name` (or writes it, with
/// `FNTRACE_BLESS=1`); a difference is added to `problems`.
pub fn check(problems: &mut Vec<String>, what: &str, name: &str, actual: &str) {
    let path = expected_path(name);
    if std::env::var_os("FNTRACE_BLESS").is_some_and(|v| v == "1") {
        // Several styles write the same file: they must agree.
        static BLESSED: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
        let mut blessed = BLESSED.get_or_init(Default::default).lock().unwrap();
        match blessed.get(name) {
            Some(first) if first != actual => problems.push(format!(
                "{what}: not blessed: another run (build style or command) wrote {name} otherwise ('-' it, '+' this one):\n{}",
                diff(first, actual)
            )),
            _ => {
                std::fs::write(&path, actual).unwrap();
                blessed.insert(name.to_string(), actual.to_string());
            }
        }
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (FNTRACE_BLESS=1 writes it)", path.display()));
    if expected != actual {
        problems.push(format!(
            "{what}: differs from {name} ('-' expected, '+' actual):\n{}",
            diff(&expected, actual)
        ));
    }
}

/// A line diff (longest common subsequence), every line shown.
pub fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    out
}
