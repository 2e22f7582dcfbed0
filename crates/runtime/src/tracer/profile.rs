//! The function profiler (ftrace's `function_profile_enabled`): per thread,
//! one cell per function id with calls, total, self, min and max time; no
//! event is stored. The tables are summed into `profile.tsv` at exit.
//! Total time counts only the outermost call of a recursive function.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use super::thread::{self, Thread};
use crate::sys;

/// One function's numbers in one thread (ticks). Written only by the
/// thread, read by the exit report.
#[repr(C)]
pub struct Cell {
    calls: AtomicU64,
    total: AtomicU64,
    self_: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
    active: AtomicU64,
}

fn cell(t: &mut Thread, fid: u32) -> Option<&'static Cell> {
    let fid = fid as usize;
    let mut len = t.profile_len.load(Ordering::Relaxed) as usize;
    if fid >= len {
        let new_len = (super::function_count().max(fid + 1) * 2).max(1024);
        let p = sys::map_anon(new_len * std::mem::size_of::<Cell>())? as *mut Cell;
        let old = t.profile.load(Ordering::Relaxed);
        if !old.is_null() {
            // SAFETY: both tables hold at least `len` cells; the old one is
            // kept (the exit report may read it), so the copy is of live data.
            unsafe { std::ptr::copy_nonoverlapping(old, p, len) };
        }
        t.profile.store(p, Ordering::Release);
        t.profile_len.store(new_len as u64, Ordering::Release);
        len = new_len;
    }
    debug_assert!(fid < len);
    // SAFETY: `fid < len` cells of a table that is never unmapped.
    Some(unsafe { &*t.profile.load(Ordering::Relaxed).add(fid) })
}

/// A call of `fid` begins.
pub fn enter(t: &mut Thread, fid: u32) {
    if let Some(c) = cell(t, fid) {
        c.active
            .store(c.active.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

/// A call of `fid` ended after `dur` ticks, `children` of them in callees.
pub fn exit(t: &mut Thread, fid: u32, dur: u64, children: u64) {
    let Some(c) = cell(t, fid) else { return };
    let add = |a: &AtomicU64, v: u64| a.store(a.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
    add(&c.calls, 1);
    add(&c.self_, dur.saturating_sub(children));
    let active = c.active.load(Ordering::Relaxed).saturating_sub(1);
    c.active.store(active, Ordering::Relaxed);
    if active == 0 {
        add(&c.total, dur);
    }
    let min = c.min.load(Ordering::Relaxed);
    if min == 0 || dur < min {
        c.min.store(dur.max(1), Ordering::Relaxed);
    }
    if dur > c.max.load(Ordering::Relaxed) {
        c.max.store(dur, Ordering::Relaxed);
    }
}

/// Forgets every count (a new session after `fntrace attach` detached);
/// the calls still open (`active`) stay counted as such.
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
            for a in [&c.calls, &c.total, &c.self_, &c.min, &c.max] {
                a.store(0, Ordering::Relaxed);
            }
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
            row[1] += c.total.load(Ordering::Relaxed);
            row[2] += c.self_.load(Ordering::Relaxed);
            row[3] = row[3].min(c.min.load(Ordering::Relaxed));
            row[4] = row[4].max(c.max.load(Ordering::Relaxed));
        }
    }
    out
}
