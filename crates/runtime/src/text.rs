//! Writing code (the kernel's `text_poke_bp_batch`): a batch of site
//! patches, each verified against the bytes expected there, written so that
//! a thread running any of the sites at any moment executes either the old
//! or the new instruction, never a mix.
//!
//! Live protocol: publish the batch's trap table; carry out the arch's plan
//! of every site phase by phase — the first write of every site, sync, the
//! second of every site, sync, ... (on x86-64 the plan is the `int3`
//! protocol, [`fntrace_arch::BreakpointPatcher::rewrite`]: `int3` on every
//! first byte; sync; every tail; sync; every first byte; sync) — and
//! withdraw the table. One sync per phase and one `mprotect` pair per code
//! range, whatever the number of sites. [`Batch`] does it; [`apply`] is the
//! whole of it for a slice of pokes.

use fntrace_arch::{Code, NativePatcher, Resume};

use crate::sys::{self, SyncMethod};

mod batch;

pub use batch::Batch;

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
    /// Where else than its first byte an instruction starts, old or new
    /// (bit `i` for byte `i`): a bare site's own instructions under its
    /// jump (`BreakpointPatcher::phase_masked`); 0 for every other site.
    pub starts: u8,
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
#[derive(Clone, Copy)]
pub struct Writer {
    /// Other threads may run the code: use the breakpoint protocol.
    pub live: bool,
    /// How to sync instruction streams.
    pub sync: SyncMethod,
    /// Page for the mprotect sync.
    pub scratch: usize,
    /// The arch's plans of live writes.
    pub patcher: &'static NativePatcher,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("live", &self.live)
            .field("sync", &self.sync)
            .field("scratch", &self.scratch)
            .finish_non_exhaustive()
    }
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

/// Reads `len` bytes of code at `addr` (a function, to decode it).
///
/// # Safety
/// `addr..addr + len` must be mapped and readable.
pub unsafe fn read_bytes(addr: usize, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    // SAFETY: the caller guarantees the range is readable.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, bytes.as_mut_ptr(), len) };
    bytes
}

/// Whether the bytes at `addr` are `code`, compared in place.
///
/// # Safety
/// `addr..addr + code.len()` must be mapped and readable, and written by
/// no one else meanwhile (code is written only with the state locked).
unsafe fn holds(addr: usize, code: &Code) -> bool {
    // Byte by byte: sites are a few bytes, a `memcmp` call costs more.
    code.as_slice().iter().enumerate().all(|(i, &b)| {
        // SAFETY: the caller guarantees the range is readable and not written.
        unsafe { *((addr + i) as *const u8) == b }
    })
}

fn write(addr: usize, bytes: &[u8]) {
    // AArch64: an instruction is one aligned word, stored whole (a thread
    // fetching it sees the old word or the new one), then made visible to
    // instruction fetch.
    if cfg!(target_arch = "aarch64") && bytes.len() == 4 && addr.is_multiple_of(4) {
        let word = u32::from_ne_bytes(bytes.try_into().expect("4 bytes"));
        // SAFETY: as below; an aligned 4-byte volatile store is one
        // single-copy-atomic store.
        unsafe { std::ptr::write_volatile(addr as *mut u32, word) };
    } else {
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: a `Batch` only writes inside ranges it made writable,
            // at sites it verified; single-byte volatile stores are atomic.
            unsafe { std::ptr::write_volatile((addr + i) as *mut u8, *b) };
        }
    }
    sys::flush_icache(addr, bytes.len());
}

/// Applies `pokes` (each inside one of `ranges`) in one batch. Returns, per
/// poke, `Ok` or the reason it was refused; the others are written.
pub fn apply(
    pokes: &[Poke],
    ranges: &[Range],
    writer: Writer,
    stats: &mut BatchStats,
) -> Vec<Result<(), String>> {
    let mut batch = Batch::new(ranges, writer, pokes.len());
    let mut results: Vec<Result<(), String>> = pokes
        .iter()
        .enumerate()
        .map(|(i, poke)| batch.add(i, poke))
        .collect();
    for refused in batch.write(stats) {
        results[refused.key] = Err(refused.reason);
    }
    results
}
