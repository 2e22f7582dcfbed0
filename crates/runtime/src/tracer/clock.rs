//! Event time: the TSC where it is invariant (constant rate, not stopped
//! in idle states: `constant_tsc` and `nonstop_tsc` in `/proc/cpuinfo`),
//! else `CLOCK_MONOTONIC` through the vDSO (always, on AArch64). Calibrated against the
//! monotonic clock: a point at start and one refreshed by the writer and
//! at exit (`process.json`'s `clock`).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::sys;

static TSC: AtomicBool = AtomicBool::new(false);

/// Chooses the clock (`FNTRACE_CLOCK=monotonic` forces the fallback).
pub fn setup() {
    let forced = std::env::var(fntrace_format::settings::CLOCK).ok();
    let usable = match forced.as_deref() {
        Some("monotonic") => false,
        _ => tsc_invariant(),
    };
    TSC.store(usable, Ordering::Relaxed);
}

fn tsc_invariant() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(text) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = text.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// Whether ticks are the TSC's.
pub fn is_tsc() -> bool {
    TSC.load(Ordering::Relaxed)
}

/// `"tsc"` or `"monotonic"`.
pub fn source() -> &'static str {
    if TSC.load(Ordering::Relaxed) {
        "tsc"
    } else {
        "monotonic"
    }
}

/// The time now, in ticks.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if TSC.load(Ordering::Relaxed) {
        return sys::rdtsc();
    }
    sys::monotonic_ns()
}

/// A calibration point: (tick, monotonic ns) read together.
pub fn point() -> (u64, u64) {
    // The tick read between two clock reads, from the closest pair of 3.
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..3 {
        let a = sys::monotonic_ns();
        let t = now();
        let b = sys::monotonic_ns();
        if b - a < best.0 {
            best = (b - a, t, a + (b - a) / 2);
        }
    }
    (best.1, best.2)
}

/// Ticks per nanosecond between two points (1 for the monotonic clock).
pub fn ticks_per_ns(p0: (u64, u64), p1: (u64, u64)) -> f64 {
    if p1.1 <= p0.1 || p1.0 <= p0.0 {
        return 1.0;
    }
    (p1.0 - p0.0) as f64 / (p1.1 - p0.1) as f64
}
