//! An independent count of calls: valgrind's callgrind, run on the
//! program, and a reader of what it writes (valgrind 3.19's format,
//! `callgrind_format` in its manual).
//!
//! The options ([`command`]) keep the file simple to read:
//! `--compress-strings=no` names every object and function in full each
//! time, `--compress-pos=no` writes positions absolute, `--dump-instr=yes`
//! makes positions addresses (a call's target is the address it went to,
//! relative to its object's load address: the address `nm` gives), and
//! `--separate-recs=1` keeps a recursive function one function (not `f'2`,
//! `f'3`). `--demangle=no` leaves C++ names as the symbol table has them.
//! `--skip-plt=yes`, the default, leaves PLT stubs out: a call through
//! the PLT is counted as a call of the function it reaches.
//!
//! The body is a list of functions (`fn=NAME` after `ob=OBJECT`, which
//! holds until the next `ob=`), each with cost lines and its calls: `cob=`
//! (the callee's object, written only when it differs from the caller's
//! object, and for that one call), `cfi=`, `cfn=NAME`, then `calls=N
//! TARGET` and one cost line. A function's calls are the sum of the
//! `calls=` lines of every `cfn=` naming it, from any caller in any
//! object.
//!
//! How callgrind decides what is a call, which is not always what a
//! tracer of entries sees (valgrind's `callgrind/bbcc.c`, checked on real
//! programs in the tests): a `call` instruction is one; so is a jump (or
//! a fall-through) to the first instruction of a function — a tail call,
//! but also a loop whose back edge goes to the function's first
//! instruction, each turn of which callgrind counts as a call; a jump into
//! the middle of another function is no call (callgrind only switches
//! function). A part split off a function (`f.cold`) has a symbol of its
//! own, so a jump to it counts as a call of `f.cold`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::require;

/// A function of the object, as the calls to it name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Called {
    /// The name callgrind gives it (`0x...` for a function without a
    /// symbol of non-zero size, which valgrind does not use).
    pub name: String,
    /// The calls that went to this address.
    pub calls: u64,
}

/// What callgrind counted for one object.
#[derive(Debug, Default)]
pub struct Profile {
    /// The object, as `ob=` names it.
    pub object: String,
    /// Calls by target address in the object (relative to where it was
    /// loaded: file addresses). A function's entry, unless a call went to
    /// the middle of one.
    pub by_address: BTreeMap<u64, Called>,
}

impl Profile {
    /// Calls per function name, summed over every address of that name
    /// (two static functions of one name are one entry here).
    pub fn by_name(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for c in self.by_address.values() {
            *out.entry(c.name.clone()).or_default() += c.calls;
        }
        out
    }

    /// The calls of the function at `address` (0 if callgrind saw none).
    pub fn calls_at(&self, address: u64) -> u64 {
        self.by_address.get(&address).map_or(0, |c| c.calls)
    }
}

/// The command that runs `program ARGS` under callgrind, writing its
/// profile to `out` and valgrind's own messages to `out.log` (so that the
/// program's stdout and stderr are its own).
pub fn command(program: &Path, args: &[&str], out: &Path) -> Command {
    require("valgrind");
    let mut cmd = Command::new("valgrind");
    cmd.arg("--tool=callgrind")
        .arg(format!("--log-file={}.log", out.display()))
        .args([
            "--compress-strings=no",
            "--compress-pos=no",
            "--separate-recs=1",
            "--dump-instr=yes",
            "--demangle=no",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(program)
        .args(args);
    cmd
}

/// Reads a callgrind output file written with [`command`]'s options: the
/// calls to the functions of `object` (a path: it is compared with the
/// `ob=` lines, which callgrind writes absolute).
pub fn read(file: &Path, object: &Path) -> Profile {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let object: PathBuf = object
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", object.display()));
    parse(&text, &object.display().to_string()).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Parses the text of a callgrind output file; the calls to the functions
/// of `object` (an `ob=` string).
pub fn parse(text: &str, object: &str) -> Result<Profile, String> {
    let mut profile = Profile {
        object: object.to_string(),
        ..Profile::default()
    };
    let mut positions = None;
    // The object of the current `ob=`, of the function being read, and of
    // the next call's callee if a `cob=` said so.
    let mut ob: Option<&str> = None;
    let mut fn_ob: Option<&str> = None;
    let mut cob: Option<&str> = None;
    // The callee of the next `calls=`: (name, in `object`).
    let mut callee: Option<(&str, bool)> = None;
    for (n, line) in text.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}: {line}", n + 1);
        if let Some(p) = line.strip_prefix("positions:") {
            positions = Some(p.trim());
        } else if let Some(o) = line.strip_prefix("ob=") {
            ob = Some(o);
        } else if line.starts_with("fn=") {
            fn_ob = Some(ob.ok_or_else(|| at("a function before any ob="))?);
            cob = None;
        } else if let Some(o) = line.strip_prefix("cob=") {
            cob = Some(o);
        } else if let Some(name) = line.strip_prefix("cfn=") {
            let target = cob
                .take()
                .or(fn_ob)
                .ok_or_else(|| at("a call outside a function"))?;
            callee = Some((name, target == object));
        } else if let Some(rest) = line.strip_prefix("calls=") {
            if positions != Some("instr line") {
                return Err(format!(
                    "positions are {positions:?}, not \"instr line\": run it with --dump-instr=yes"
                ));
            }
            let (name, ours) = callee.take().ok_or_else(|| at("calls= without cfn="))?;
            let mut fields = rest.split_whitespace();
            let count: u64 = fields
                .next()
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| at("a count"))?;
            let target = fields
                .next()
                .and_then(|t| t.strip_prefix("0x"))
                .and_then(|t| u64::from_str_radix(t, 16).ok())
                .ok_or_else(|| at("a target address (compressed positions?)"))?;
            if ours {
                let called = profile.by_address.entry(target).or_insert_with(|| Called {
                    name: name.to_string(),
                    calls: 0,
                });
                if called.name != name {
                    return Err(at(&format!("{target:#x} was called {}", called.name)));
                }
                called.calls += count;
            }
        }
        // Other lines: source files (`fl=`, `fi=`, `fe=`, `cfi=`), costs,
        // the header.
    }
    if positions.is_none() {
        return Err("no positions: line: not a callgrind output file".into());
    }
    Ok(profile)
}

#[cfg(test)]
#[path = "callgrind_tests.rs"]
mod tests;
