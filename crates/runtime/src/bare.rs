//! Bare sites: the entries of functions no compiler prepared
//! (`docs/RUNTIME.md`, "Functions no compiler prepared").
//!
//! At load a bare site is a record and nothing else: no code is read or
//! written. The first time a filter selects its function, the function is
//! decoded ([`fntrace_arch::x86_64::bare::analyze`]) from memory — its own
//! bytes, since a bare site that was never on was never written — and gets
//! a detour: `call *W`, a copy of its first instructions, a jump back. The
//! detour is placed where the site's jump can reach it with `int3` at every
//! byte where one of the function's own instructions starts (`detour.rs`),
//! so a thread resuming at any of them — preempted there, interrupted by a
//! signal, returning from a displaced call — traps, and the standing trap
//! table (`trap.rs`) moves it to the same instruction in the copy. Where no
//! such place exists, the site is a trap site instead: an `int3` on its
//! first byte, which the standing table sends into the detour.
//!
//! Switching the site afterwards is the int3 protocol on five bytes
//! ([`fntrace_arch::BreakpointPatcher::phase_masked`]); changing its ops is
//! one store to `W`. Detours, words and table entries are never freed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use fntrace_arch::x86_64::bare::{self, BareEntry, Refusal};
use fntrace_arch::{Code, Shape};

use crate::detour::{self, Space};
use crate::modules::Loaded;

/// Bare sites selected but refused, since start (for the clients' reports).
pub static REFUSED: AtomicU64 = AtomicU64::new(0);
/// Bare sites made trap sites, since start.
pub static TRAPS: AtomicU64 = AtomicU64::new(0);

/// (refused, trap sites) since start.
pub fn counts() -> (u64, u64) {
    (REFUSED.load(Ordering::Relaxed), TRAPS.load(Ordering::Relaxed))
}

/// What a bare site became when its function was first selected.
#[derive(Debug, Clone)]
pub enum Rec {
    /// It is never patched, for this reason.
    Refused(String),
    /// It has a detour.
    Ready(Ready),
}

/// A bare site's detour.
#[derive(Debug, Clone)]
pub struct Ready {
    /// The site: where the jump (or trap) is.
    pub entry: usize,
    /// Where the site's jump (or, for a trap site, the trap) goes.
    pub landing: usize,
    /// After the detour's `call *W`: the `ip` callbacks see, and where the
    /// copy of the function's first instructions starts.
    pub call_return: usize,
    /// The word the detour calls through.
    pub word: usize,
    /// The function's own bytes at the site.
    pub original: Code,
    /// The site's shape, decoded.
    pub shape: Shape,
    /// (b, copy(b)) for every interior boundary: where a thread that traps
    /// at `b` continues.
    pub interior: Vec<(usize, usize)>,
}

/// The bare sites of one module that were ever selected, by site index.
#[derive(Debug, Default)]
pub struct BareSites {
    recs: HashMap<u32, Rec>,
    space: Space,
    /// Detours made since the last [`BareSites::take_new`].
    new: usize,
}

/// Where a function's code is.
#[derive(Debug, Clone, Copy)]
pub struct Extent {
    /// Its first byte.
    pub address: usize,
    /// Its size.
    pub size: usize,
    /// How far its bytes may be read: the next function, or the end of its
    /// code segment.
    pub limit: usize,
}

/// What a detour search may use: the band 816–832 MiB below the site, which
/// every pun allows (an instruction ending at the jump's last byte fixes its
/// top byte to `0xcc`), then, for the others, 64 MiB to 1 GiB above it.
const BAND: (i64, i64) = (-0x3400_0000, -0x3300_0000);
const ABOVE: (i64, i64) = (0x400_0000, 0x4000_0000);

impl BareSites {
    /// The record of site `i`, if its function was ever selected.
    pub fn get(&self, i: usize) -> Option<&Rec> {
        self.recs.get(&(i as u32))
    }

    /// How many detours were made since the last call.
    pub fn take_new(&mut self) -> usize {
        std::mem::take(&mut self.new)
    }

    /// Every ready site: (index, detour).
    pub fn ready(&self) -> impl Iterator<Item = (u32, &Ready)> {
        self.recs.iter().filter_map(|(&i, r)| match r {
            Rec::Ready(ready) => Some((i, ready)),
            Rec::Refused(_) => None,
        })
    }

    /// Decodes site `i` at `addr` (the function `extent`, now holding
    /// `original`) and makes its detour, unless done before; `guard`: the
    /// detour starts with the library-call guard (`libcall.rs`).
    pub fn prepare(
        &mut self,
        loaded: &Loaded,
        i: usize,
        addr: usize,
        original: Code,
        extent: Extent,
        guard: bool,
    ) -> &Rec {
        let key = i as u32;
        if !self.recs.contains_key(&key) {
            let rec = match self.make(loaded, addr, original, extent, guard) {
                Ok(ready) => {
                    self.new += 1;
                    Rec::Ready(ready)
                }
                Err(why) => Rec::Refused(why),
            };
            self.recs.insert(key, rec);
        }
        &self.recs[&key]
    }

    fn make(
        &mut self,
        loaded: &Loaded,
        addr: usize,
        original: Code,
        extent: Extent,
        guard: bool,
    ) -> Result<Ready, String> {
        let inside = loaded
            .exec
            .iter()
            .any(|&(s, e, _)| extent.address >= s && extent.limit <= e && extent.limit > extent.address);
        if !inside {
            return Err("outside the module's code".into());
        }
        // SAFETY: the range lies in an executable segment of a loaded
        // module (checked above); code is written only under the state's
        // lock, which the caller holds.
        let code = unsafe { crate::text::read_bytes(extent.address, extent.limit - extent.address) };
        let entry = bare::analyze(
            &code,
            extent.address as u64,
            extent.size as u64,
            extent.limit as u64,
        )
        .map_err(|r| r.to_string())?;
        if entry.entry as usize != addr || !code_starts_with(&entry, &original) {
            return Err(format!(
                "site {addr:#x}: the function's entry is not where discovery put it"
            ));
        }
        let jump = (!entry.trap_only)
            .then(|| self.place(&entry, false, guard))
            .transpose();
        match jump {
            Ok(Some(ready)) => Ok(ready),
            _ => self.place(&entry, true, guard).map_err(|r| r.to_string()),
        }
        .map(|mut ready| {
            ready.original = original;
            ready
        })
    }

    /// Places `entry`'s detour for a jump (or `trap`) site, `guard`ed or
    /// not, and writes it.
    fn place(&mut self, entry: &BareEntry, trap: bool, guard: bool) -> Result<Ready, Refusal> {
        let make = |at: usize, word: usize| {
            if guard {
                bare::guarded_detour(entry, at as u64, word as u64)
            } else {
                bare::detour(entry, at as u64, word as u64)
            }
        };
        let e = entry.entry as usize;
        let boundaries = if trap { 0 } else { entry.boundaries };
        let landing = |from: usize, until: usize| {
            if trap {
                Some(from)
            } else {
                bare::next_landing(entry.entry, boundaries, from as u64, until as u64).map(|a| a as usize)
            }
        };
        let windows = [BAND, ABOVE];
        for (lo, hi) in windows {
            let Some(base) = (e + 5).checked_add_signed(lo as isize) else {
                continue;
            };
            let Some(top) = (e + 5).checked_add_signed(hi as isize) else {
                continue;
            };
            if base < 1 << 16 {
                continue;
            }
            let middle = base + (top - base) / 2;
            let word = self
                .space
                .word(middle, fntrace_ret())
                .map_err(|_| Refusal::NoRoom)?;
            // Its size, from an encoding anywhere in the window (it does not
            // depend on the place: branches out of the copy are all near).
            let mut size = make(middle, word)?.bytes.len();
            for _ in 0..3 {
                let Some(at) = self.space.find(base, top, size, |from| landing(from, top)) else {
                    break;
                };
                let made = make(at, word)?;
                if made.bytes.len() != size {
                    size = made.bytes.len();
                    continue;
                }
                self.space.write(at, &made.bytes).map_err(|_| Refusal::NoRoom)?;
                let interior = made
                    .resume
                    .iter()
                    .filter(|&&(b, _)| b != entry.entry)
                    .map(|&(b, c)| (b as usize, c as usize))
                    .collect();
                return Ok(Ready {
                    entry: e,
                    landing: at,
                    call_return: made.call_return as usize,
                    word,
                    original: Code::EMPTY,
                    shape: Shape::Bare { boundaries, trap },
                    interior: if trap { Vec::new() } else { interior },
                });
            }
        }
        Err(Refusal::NoRoom)
    }

    /// Ends a batch of detour writes.
    pub fn close(&mut self) {
        self.space.close();
    }
}

impl Ready {
    /// Makes the detour call `[routine, ops, data]`'s routine, which finds
    /// the ops and its data in the words after its own. Those first: a
    /// thread that reads the new routine finds its words.
    pub fn set_target(&self, [routine, ops, data]: [usize; 3]) {
        detour::set_word(self.word + 16, data);
        detour::set_word(self.word + 8, ops);
        detour::set_word(self.word, routine);
    }

    /// Sets the ranges of callers its guard skips, if it has one:
    /// `(start, length)` each.
    pub fn set_guard(&self, ranges: [(usize, usize); 3]) {
        let at = self.word + bare::GUARD_WORDS as usize;
        for (k, (start, length)) in ranges.into_iter().enumerate() {
            // Every caller skipped while the range changes: never one the
            // new or old ranges skip, such as the runtime, traced.
            detour::set_word(at + 16 * k + 8, usize::MAX);
            detour::set_word(at + 16 * k, start);
            detour::set_word(at + 16 * k + 8, length);
        }
    }
}

/// Whether the function's displaced bytes begin with `original` (what
/// discovery read from the file and the loader checked in memory).
fn code_starts_with(entry: &BareEntry, original: &Code) -> bool {
    entry.displaced.len() >= original.len().min(entry.len)
        && original.iter().zip(&entry.displaced).all(|(a, b)| a == b)
}

/// Where a word points before its site is first on: a `ret`, back to the
/// detour as if nothing had been called.
fn fntrace_ret() -> usize {
    crate::mirror::ret_stub()
}
