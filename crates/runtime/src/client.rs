//! The runtime used alone (`LD_PRELOAD=libfntrace_runtime.so`), configured
//! by environment variables: a counting client that registers one ops and
//! prints how often each traced function was entered and left, at exit.
//!
//! - `FNTRACE_FILTER`, `FNTRACE_NOTRACE`: patterns (ftrace syntax), separated
//!   by spaces or commas (`fntrace_format::settings`, where every name is);
//! - `FNTRACE_COUNT`: `1` to print the counts on stderr, or a file to write;
//! - `FNTRACE_REGS=1`: use the trampoline that saves every register.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use fntrace_format::settings;

use crate::api::{self, Ops};
use crate::index;
use crate::ops::{RawOps, FL_RECURSION_SAFE, FL_SAVE_REGS};
use crate::routines::Regs;

static DESTINATION: OnceLock<String> = OnceLock::new();

unsafe extern "C" fn count(ip: usize, _parent: usize, _ops: *mut RawOps, _regs: *mut Regs) {
    if let Some(entry) = index::lookup(ip) {
        entry.words.hits[entry.site as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Registers the counting client if the environment asks for it.
pub fn start_from_env() -> Result<(), String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let Some(destination) = var(settings::COUNT) else {
        return Ok(());
    };
    let mut flags = FL_RECURSION_SAFE;
    if var(settings::REGS).is_some_and(|v| v != "0") {
        flags |= FL_SAVE_REGS;
    }
    let ops = Ops::new(Some(count), Some(count), std::ptr::null_mut(), flags);
    let filter = var(settings::FILTER).unwrap_or_default();
    let notrace = var(settings::NOTRACE).unwrap_or_default();
    ops.set_filter(&filter, &notrace).map_err(|e| e.to_string())?;
    let _ = DESTINATION.set(destination);
    // SAFETY: `report` is a plain function that stays loaded (the runtime
    // is never unloaded).
    unsafe { libc::atexit(report) };
    ops.register().map_err(|e| e.to_string())
}

/// One line per function that ran: `fntrace-count: FUNCTION MODULE
/// entries=N exits=M`, sorted.
fn lines() -> Vec<String> {
    let Ok(sites) = api::sites() else {
        return Vec::new();
    };
    let mut counts: std::collections::BTreeMap<(String, String), (u64, u64)> = Default::default();
    for site in sites {
        let Some(entry) = index::lookup(site.ip) else {
            continue;
        };
        let hits = entry.words.hits[entry.site as usize].load(Ordering::Relaxed);
        if hits == 0 {
            continue;
        }
        let slot = counts.entry((site.function, site.module)).or_default();
        if site.exit {
            slot.1 += hits;
        } else {
            slot.0 += hits;
        }
    }
    counts
        .into_iter()
        .map(|((function, module), (entries, exits))| {
            format!("fntrace-count: {function} {module} entries={entries} exits={exits}")
        })
        .collect()
}

extern "C" fn report() {
    crate::no_unwind("the exit report", || {
        let _errno = crate::sys::ErrnoGuard::new();
        let text: String = lines().into_iter().map(|l| l + "\n").collect();
        match DESTINATION.get().map(String::as_str) {
            Some("1") | None => {
                let _ = std::io::stderr().write_all(text.as_bytes());
            }
            Some(path) => {
                if let Err(e) = std::fs::write(path, text) {
                    eprintln!("fntrace: cannot write {path}: {e}");
                }
            }
        }
    });
}
