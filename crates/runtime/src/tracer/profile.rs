//! The function profiler (ftrace's `function_profile_enabled`): per thread,
//! one cell per function id with calls, total, self, min and max time; no
//! event is stored. The tables are summed into `profile.tsv` at exit.
//! Total time counts only the outermost call of a recursive function.
//!
//! The fast paths (`asm.rs`, `FNTRACE_PROF_*`) keep the same cells, at the
//! same offsets, as the generic path here; both follow the same rules:
//!
//! - **Recursion**: a call notes its function's total when it begins
//!   (`Frame::total0`), and when it ends sets the total to that plus its
//!   own duration. Every call of the function that ended in between began
//!   after it (calls nest), so its time is inside this call's and is
//!   replaced: the total is the sum of the outermost calls, with no count
//!   of open calls to keep right (nothing can drift when a frame ends
//!   without its exit being seen, a siglongjmp out of a signal handler).
//! - **The cell** of a call is found once, at its entry, and kept in its
//!   frame (`Frame::cell`): a frame that has none (a cell that cannot be
//!   made) gets [`SINK`], which nobody reads. A table that grows moves
//!   the cells: the open frames of the thread are moved with them.
//! - **Self time** is kept as the sum of the durations (`time`) and the
//!   sum of the traced callees' time (`children`: a call that ends adds
//!   its duration to its caller's cell, found in the caller's frame; the
//!   sentinel below the first frame has the sink), subtracted at the end.
//! - **Signals**: the fast paths write the total before the compare-exchange
//!   that pops the frame (a retry writes it again, later; a signal handler
//!   in between traces calls nested in this one, whose totals this one's
//!   replaces), and the other numbers after it, each with one instruction
//!   (`inc`, `add`, a compare-exchange without lock prefix for min and
//!   max), so that a handler tracing the same function between two of them
//!   keeps the cell consistent. The generic path is never interrupted by
//!   traced code (`thread.rs`, "Signals"). One race is left: a handler
//!   that grows the table (its first call of a function beyond it: a
//!   library loaded since) between a fast exit's pop and its last
//!   instruction sends that call's count, time, min and max to the old
//!   table, which is no longer read.
//! - **Min** is kept inverted (`!min`), so that a zeroed cell (fresh
//!   memory) holds "none" and one unsigned comparison keeps min as max.
//! - **A new session** (`fntrace attach` again) counts from `base`, the
//!   total when it began: calls still open then noted an older total.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use super::thread::{self, Frame, Owner};
use crate::sys;

/// One function's numbers in one thread (ticks): one cache line. Written
/// only by the thread (and its signal handlers), read by the exit report.
#[derive(Default)]
#[repr(C, align(64))]
pub struct Cell {
    calls: AtomicU64,
    /// The outermost calls' time.
    total: AtomicU64,
    /// Every call's time.
    time: AtomicU64,
    /// The time of every call's traced callees.
    children: AtomicU64,
    /// `!min` (0: no call yet).
    not_min: AtomicU64,
    max: AtomicU64,
    /// `total` when the session began.
    base: AtomicU64,
}

/// The cell's fields, for the assembly.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub mod off {
    use super::Cell;
    use std::mem::offset_of;
    /// `calls`.
    pub const CALLS: usize = offset_of!(Cell, calls);
    /// `total`.
    pub const TOTAL: usize = offset_of!(Cell, total);
    /// `time`.
    pub const TIME: usize = offset_of!(Cell, time);
    /// `children`.
    pub const CHILDREN: usize = offset_of!(Cell, children);
    /// `not_min`.
    pub const NOT_MIN: usize = offset_of!(Cell, not_min);
    /// `max`.
    pub const MAX: usize = offset_of!(Cell, max);
}
// The assembly finds a cell with a shift.
const _: () = assert!(std::mem::size_of::<Cell>() == 1 << CELL_SHIFT);
/// log2 of a cell's size.
pub const CELL_SHIFT: u32 = 6;

/// The cell of frames that have none: written, never read.
pub static SINK: Cell = Cell {
    calls: AtomicU64::new(0),
    total: AtomicU64::new(0),
    time: AtomicU64::new(0),
    children: AtomicU64::new(0),
    not_min: AtomicU64::new(0),
    max: AtomicU64::new(0),
    base: AtomicU64::new(0),
};

/// [`SINK`]'s address, as a frame holds it.
pub fn sink() -> usize {
    &SINK as *const Cell as usize
}

fn cell(t: &mut Owner, fid: u32) -> Option<&'static Cell> {
    if fid == super::fids::NO_FID {
        return None;
    }
    let fid = fid as usize;
    let mut len = t.shared().profile_len.load(Ordering::Relaxed) as usize;
    if fid >= len {
        let new_len = (super::function_count().max(fid + 1) * 2).max(1024);
        let p = sys::map_anon(new_len * std::mem::size_of::<Cell>())? as *mut Cell;
        let old = t.shared().profile.load(Ordering::Relaxed);
        if !old.is_null() {
            // SAFETY: both tables hold at least `len` cells; the old one is
            // kept (the exit report may read it), so the copy is of live data.
            unsafe { std::ptr::copy_nonoverlapping(old, p, len) };
            // The open frames' cells move with the table.
            let cells = old as usize..old as usize + len * std::mem::size_of::<Cell>();
            for i in 0..t.depth() {
                let f = t.frame(i);
                if cells.contains(&f.cell) {
                    f.cell = f.cell - cells.start + p as usize;
                }
            }
        }
        t.shared().profile.store(p, Ordering::Release);
        t.shared().profile_len.store(new_len as u64, Ordering::Release);
        len = new_len;
    }
    debug_assert!(fid < len);
    // SAFETY: `fid < len` cells of a table that is never unmapped.
    Some(unsafe { &*t.shared().profile.load(Ordering::Relaxed).add(fid) })
}

/// A call of `fid` begins; its frame is the thread's top one.
pub fn enter(t: &mut Owner, fid: u32) {
    let Some(i) = t.depth().checked_sub(1) else { return };
    let (cell, total0) = match cell(t, fid) {
        Some(c) => (c as *const Cell as usize, c.total.load(Ordering::Relaxed)),
        None => (sink(), 0),
    };
    let f = t.frame(i);
    f.cell = cell;
    f.total0 = total0;
}

/// The call of frame `f` (popped: the caller's is the top one) ended
/// after `dur` ticks.
pub fn exit(t: &mut Owner, f: &Frame, dur: u64) {
    let add = |a: &AtomicU64, v: u64| a.store(a.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
    if let Some(d) = t.depth().checked_sub(1) {
        let caller = t.frame(d).cell;
        if caller != 0 {
            // SAFETY: a frame's cell is in a table never unmapped, or the sink.
            add(unsafe { &(*(caller as *const Cell)).children }, dur);
        }
    }
    if f.cell == 0 {
        return;
    }
    // SAFETY: as above.
    let c = unsafe { &*(f.cell as *const Cell) };
    c.total.store(f.total0.wrapping_add(dur), Ordering::Relaxed);
    add(&c.calls, 1);
    add(&c.time, dur);
    if !dur > c.not_min.load(Ordering::Relaxed) {
        c.not_min.store(!dur, Ordering::Relaxed);
    }
    if dur > c.max.load(Ordering::Relaxed) {
        c.max.store(dur, Ordering::Relaxed);
    }
}

/// Forgets every count (a new session after `fntrace attach` detached):
/// the total counts from here.
pub fn reset_all() {
    for t in thread::all() {
        // The length first: a grown table is published before its length,
        // so a length read is never larger than the table read after it.
        let len = t.profile_len.load(Ordering::Acquire) as usize;
        let p = t.profile.load(Ordering::Acquire);
        for fid in 0..len {
            // SAFETY: `p` holds `len` cells, never unmapped (a grown table
            // leaves the old one mapped).
            let c = unsafe { &*p.add(fid) };
            for a in [&c.calls, &c.time, &c.children, &c.not_min, &c.max] {
                a.store(0, Ordering::Relaxed);
            }
            c.base.store(c.total.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }
}

/// The sum over every thread, by function id: (calls, total, self, min, max) in ticks.
pub fn totals() -> BTreeMap<u32, [u64; 5]> {
    let mut out: BTreeMap<u32, [u64; 5]> = BTreeMap::new();
    for t in thread::all() {
        // The length first: a grown table is published before its length,
        // so a length read is never larger than the table read after it.
        let len = t.profile_len.load(Ordering::Acquire) as usize;
        let p = t.profile.load(Ordering::Acquire);
        for fid in 0..len {
            // SAFETY: `len` cells of a table never unmapped.
            let c = unsafe { &*p.add(fid) };
            let calls = c.calls.load(Ordering::Relaxed);
            if calls == 0 {
                continue;
            }
            let row = out.entry(fid as u32).or_insert([0, 0, 0, u64::MAX, 0]);
            row[0] += calls;
            row[1] += c
                .total
                .load(Ordering::Relaxed)
                .wrapping_sub(c.base.load(Ordering::Relaxed));
            let (time, children) = (c.time.load(Ordering::Relaxed), c.children.load(Ordering::Relaxed));
            row[2] += time.saturating_sub(children);
            row[3] = row[3].min(!c.not_min.load(Ordering::Relaxed));
            row[4] = row[4].max(c.max.load(Ordering::Relaxed));
        }
    }
    out
}
