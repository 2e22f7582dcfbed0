//! Writing code (the kernel's `text_poke_bp_batch`): a batch of site
//! patches, each verified against the bytes expected there, written so that
//! a thread running any of the sites at any moment executes either the old
//! or the new instruction, never a mix.
//!
//! Live protocol: publish the batch's trap table; write `int3` on the first
//! byte of every site; sync; write every tail; sync; write every first byte;
//! sync. Three syncs and one `mprotect` pair per code range, whatever the
//! number of sites.

use fntrace_arch::{hex, Code, Resume};

use crate::sys::{self, SyncMethod};
use crate::trap;

/// One site to rewrite.
#[derive(Debug, Clone, Copy)]
pub struct Poke {
    /// First byte of the site.
    pub addr: usize,
    /// The bytes that must be there now.
    pub old: Code,
    /// The bytes to write.
    pub new: Code,
    /// What a thread that traps on the site mid-patch does.
    pub resume: Resume,
}

/// A code range (an executable segment) and its protection outside batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// `PROT_*` to restore.
    pub prot: i32,
}

/// The executable segments of a module, as ranges to write in.
pub fn ranges(module: &crate::modules::Loaded) -> Vec<Range> {
    module
        .exec
        .iter()
        .map(|&(start, end, prot)| Range { start, end, prot })
        .collect()
}

impl Range {
    fn contains(&self, addr: usize, len: usize) -> bool {
        addr >= self.start && addr + len <= self.end
    }
}

/// How to write.
#[derive(Debug, Clone, Copy)]
pub struct Writer {
    /// Other threads may run the code: use the breakpoint protocol.
    pub live: bool,
    /// How to sync instruction streams.
    pub sync: SyncMethod,
    /// Page for the mprotect sync.
    pub scratch: usize,
    /// The breakpoint byte.
    pub breakpoint: u8,
}

/// Counts of what a batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Sites written.
    pub written: usize,
    /// Syncs made.
    pub syncs: usize,
    /// `mprotect` calls.
    pub protects: usize,
}

/// Reads `len` bytes of code at `addr`.
///
/// # Safety
/// `addr..addr + len` must be mapped and readable.
pub unsafe fn read(addr: usize, len: usize) -> Code {
    let mut bytes = [0u8; 15];
    let len = len.min(bytes.len());
    // SAFETY: the caller guarantees the range is readable.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, bytes.as_mut_ptr(), len) };
    Code::new(&bytes[..len]).expect("at most 15 bytes")
}

fn write(addr: usize, bytes: &[u8]) {
    for (i, b) in bytes.iter().enumerate() {
        // SAFETY: `apply` only writes inside ranges it made writable, at
        // sites it verified; single-byte volatile stores are atomic.
        unsafe { std::ptr::write_volatile((addr + i) as *mut u8, *b) };
    }
}

/// Applies `pokes` (each inside one of `ranges`). Returns, per poke, `Ok`
/// or the reason it was refused; the others are written.
pub fn apply(
    pokes: &[Poke],
    ranges: &[Range],
    writer: Writer,
    stats: &mut BatchStats,
) -> Vec<Result<(), String>> {
    let mut results: Vec<Result<(), String>> = Vec::with_capacity(pokes.len());
    let mut touched = vec![false; ranges.len()];
    for poke in pokes {
        let len = poke.new.len();
        let Some(r) = ranges.iter().position(|r| r.contains(poke.addr, len)) else {
            results.push(Err(format!("site {:#x} is outside the module's code", poke.addr)));
            continue;
        };
        // SAFETY: the range is a mapped executable segment of a loaded module.
        let now = unsafe { read(poke.addr, poke.old.len()) };
        if now != poke.old {
            results.push(Err(format!(
                "site {:#x}: expected {}, found {}",
                poke.addr,
                hex(poke.old.as_slice()),
                hex(now.as_slice())
            )));
            continue;
        }
        touched[r] = true;
        results.push(Ok(()));
    }
    let writable = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
    for (range, touched) in ranges.iter().zip(&mut touched) {
        if *touched {
            stats.protects += 1;
            if let Err(e) = sys::protect(range.start, range.end, writable) {
                *touched = false;
                for (poke, result) in pokes.iter().zip(&mut results) {
                    if result.is_ok() && range.contains(poke.addr, poke.new.len()) {
                        *result = Err(format!(
                            "site {:#x}: cannot make its code writable: {e}",
                            poke.addr
                        ));
                    }
                }
            }
        }
    }
    let todo: Vec<&Poke> = pokes
        .iter()
        .zip(&results)
        .filter(|(p, r)| r.is_ok() && p.old != p.new)
        .map(|(p, _)| p)
        .collect();
    if writer.live && !todo.is_empty() {
        let mut entries: Vec<(usize, Resume)> = todo.iter().map(|p| (p.addr, p.resume)).collect();
        entries.sort_unstable_by_key(|e| e.0);
        trap::publish(trap::Table { entries });
        let sync = |stats: &mut BatchStats| {
            writer.sync.sync(writer.scratch);
            stats.syncs += 1;
        };
        for p in &todo {
            write(p.addr, &[writer.breakpoint]);
        }
        sync(stats);
        for p in &todo {
            write(p.addr + 1, &p.new.as_slice()[1..]);
        }
        sync(stats);
        for p in &todo {
            write(p.addr, &p.new.as_slice()[..1]);
        }
        sync(stats);
    } else {
        for p in &todo {
            write(p.addr, p.new.as_slice());
        }
    }
    stats.written += todo.len();
    for (range, touched) in ranges.iter().zip(&touched) {
        if *touched {
            stats.protects += 1;
            // Failing to take the write right back leaves the code writable
            // but correct; nothing better can be done than to say so.
            if let Err(e) = sys::protect(range.start, range.end, range.prot) {
                eprintln!(
                    "fntrace: cannot restore the protection of {:#x}: {e}",
                    range.start
                );
            }
        }
    }
    results
}
