//! Executable memory for trampoline slots, placed within reach of a
//! module's call sites (`call rel32` reaches ±2 GiB; a PIE at 0x55… and its
//! libraries at 0x7f… are terabytes apart), with many small slots per page
//! (seed `003_*`: no page per trampoline).
//!
//! A slot's code never changes once written; a slot is reused only for the
//! same routine, by rewriting its aligned data word — so a thread that was
//! preempted inside a freed slot still reaches the right routine, with an
//! ops that is never freed.

use std::collections::HashMap;
use std::io;

use fntrace_arch::SlotLayout;

use crate::sys;

/// Bytes per pool.
const POOL_SIZE: usize = 64 * 1024;
/// Keep this far from the edges of the reachable window.
const MARGIN: usize = 1 << 20;
/// What a rel32 reaches.
const REACH: usize = 1 << 31;

/// A pool of slots near one code range.
#[derive(Debug)]
pub struct Pool {
    /// First byte.
    pub base: usize,
    used: usize,
    free: HashMap<usize, Vec<usize>>,
    /// Writable now: made so at the first write of a batch, read-only
    /// again by [`Pool::close`].
    open: bool,
}

impl Pool {
    /// Maps a pool from which a call anywhere in `[lo, hi)` reaches every slot.
    pub fn near(lo: usize, hi: usize) -> io::Result<Pool> {
        let page = sys::page_size();
        let window_lo = hi.saturating_sub(REACH - MARGIN);
        let window_hi = lo.saturating_add(REACH - MARGIN - POOL_SIZE);
        let maps = sys::mappings()?;
        // Gaps between mappings, each clipped to the window; the closest
        // place to the module first.
        let mut candidates = Vec::new();
        let mut prev_end = page * 16;
        for &(start, end) in maps
            .iter()
            .chain(std::iter::once(&(usize::MAX & !(page - 1), usize::MAX)))
        {
            let (gap_lo, gap_hi) = (prev_end.max(window_lo), start.min(window_hi + POOL_SIZE));
            if gap_hi > gap_lo && gap_hi - gap_lo >= POOL_SIZE {
                let gap_lo = (gap_lo + page - 1) & !(page - 1);
                let gap_hi = gap_hi & !(page - 1);
                if gap_hi >= gap_lo + POOL_SIZE {
                    // Above the module: lowest address; below: highest.
                    let at = if gap_lo >= hi { gap_lo } else { gap_hi - POOL_SIZE };
                    candidates.push((at.abs_diff(lo).min(at.abs_diff(hi)), at));
                }
            }
            prev_end = prev_end.max(end);
        }
        candidates.sort_unstable();
        for (_, at) in candidates {
            if sys::map_fixed_noreplace(at, POOL_SIZE).is_ok() {
                sys::protect(at, at + POOL_SIZE, libc::PROT_READ | libc::PROT_EXEC)?;
                return Ok(Pool {
                    base: at,
                    used: 0,
                    free: HashMap::new(),
                    open: false,
                });
            }
        }
        Err(io::Error::other(format!(
            "no free address space within reach of {lo:#x}..{hi:#x} for trampolines"
        )))
    }

    /// One past the last byte.
    pub fn end(&self) -> usize {
        self.base + POOL_SIZE
    }

    /// A slot that loads `data` and jumps to `target`: a freed
    /// one of the same routine, or a new one. `None` if the pool is full.
    pub fn alloc(&mut self, layout: &SlotLayout, data: usize, target: usize) -> Option<usize> {
        if let Some(slot) = self.free.get_mut(&target).and_then(Vec::pop) {
            self.write(slot + layout.data, &data.to_le_bytes()).ok()?;
            return Some(slot);
        }
        if self.used + layout.size > POOL_SIZE {
            return None;
        }
        let slot = self.base + self.used;
        self.write(slot, &layout.slot(data as u64, target as u64)).ok()?;
        self.used += layout.size;
        Some(slot)
    }

    /// Gives a slot back; it keeps jumping to `target`.
    pub fn release(&mut self, slot: usize, target: usize) {
        self.free.entry(target).or_default().push(slot);
    }

    /// Ends a batch of slot writes (every write is part of one: the slots
    /// are made while a module's changes are applied): the pool is
    /// read-only again. One `mprotect` pair per batch instead of one per
    /// slot: 100,000 per-site slots took 6.5 s in a process whose threads
    /// ran, each `mprotect` a TLB shootdown.
    pub fn close(&mut self) {
        if self.open {
            let _ = sys::protect(self.base, self.end(), libc::PROT_READ | libc::PROT_EXEC);
            self.open = false;
        }
    }

    /// Writes into the pool: the pages stay executable (other slots run),
    /// and are writable until [`Pool::close`].
    fn write(&mut self, at: usize, bytes: &[u8]) -> io::Result<()> {
        if !self.open {
            let rwx = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
            sys::protect(self.base, self.end(), rwx)?;
            self.open = true;
        }
        // SAFETY: `at..at + len` lies inside this pool's mapping, now
        // writable. A slot's code is written before any site calls it; a
        // reused slot only gets its data word rewritten, 8 aligned bytes at
        // once.
        unsafe {
            if bytes.len() == 8 && at.is_multiple_of(8) {
                let word = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
                std::ptr::write_volatile(at as *mut u64, word);
            } else {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len());
            }
        }
        sys::flush_icache(at, bytes.len());
        Ok(())
    }
}
