//! The C API, declared in `include/fntrace.h`. Errors return -1 and leave a
//! message for `fntrace_last_error` (per thread); nothing unwinds out.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};

use crate::api::{self, Ops};
use crate::error::Error;
use crate::ops::{Callback, RawOps};
use crate::sys::ErrnoGuard;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn fail(message: String) -> c_int {
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = message);
    -1
}

fn status(result: Result<(), Error>) -> c_int {
    match result {
        Ok(()) => 0,
        Err(e) => fail(e.to_string()),
    }
}

/// A C string argument (NULL: empty).
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn text<'a>(s: *const c_char) -> &'a str {
    if s.is_null() {
        ""
    } else {
        // SAFETY: as the caller guarantees.
        unsafe { CStr::from_ptr(s) }.to_str().unwrap_or("\u{fffd}")
    }
}

fn ops_of(ops: *mut RawOps) -> Result<Ops, c_int> {
    Ops::from_raw(ops).ok_or_else(|| fail("not an ops made by fntrace_ops_new".into()))
}

/// See `fntrace.h`.
#[no_mangle]
pub extern "C" fn fntrace_ops_new(
    entry: Option<Callback>,
    exit: Option<Callback>,
    data: *mut c_void,
    flags: u32,
) -> *mut RawOps {
    let _errno = ErrnoGuard::new();
    crate::no_unwind("fntrace_ops_new", || {
        let ops = Ops::new(entry, exit, data, flags);
        // Make the handle known, so that from_raw accepts it.
        match ops.set_filter("", "") {
            Ok(()) => ops.as_raw(),
            Err(e) => {
                fail(e.to_string());
                std::ptr::null_mut()
            }
        }
    })
}

/// See `fntrace.h`.
///
/// # Safety
/// `filter` and `notrace` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn fntrace_ops_set_filter(
    ops: *mut RawOps,
    filter: *const c_char,
    notrace: *const c_char,
) -> c_int {
    let _errno = ErrnoGuard::new();
    // SAFETY: as the caller guarantees.
    let (filter, notrace) = unsafe { (text(filter), text(notrace)) };
    crate::no_unwind("fntrace_ops_set_filter", || match ops_of(ops) {
        Ok(ops) => status(ops.set_filter(filter, notrace)),
        Err(r) => r,
    })
}

/// See `fntrace.h`.
#[no_mangle]
pub extern "C" fn fntrace_ops_register(ops: *mut RawOps) -> c_int {
    let _errno = ErrnoGuard::new();
    crate::no_unwind("fntrace_ops_register", || match ops_of(ops) {
        Ok(ops) => status(ops.register()),
        Err(r) => r,
    })
}

/// See `fntrace.h`.
#[no_mangle]
pub extern "C" fn fntrace_ops_unregister(ops: *mut RawOps) -> c_int {
    let _errno = ErrnoGuard::new();
    crate::no_unwind("fntrace_ops_unregister", || match ops_of(ops) {
        Ok(ops) => status(ops.unregister()),
        Err(r) => r,
    })
}

/// See `fntrace.h`.
#[no_mangle]
pub extern "C" fn fntrace_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// Copies `text` into `buf` (`len` bytes, NUL-terminated, truncated);
/// returns the full length.
fn copy_out(text: &str, buf: *mut c_char, len: usize) -> usize {
    if !buf.is_null() && len > 0 {
        let n = text.len().min(len - 1);
        // SAFETY: the caller gives `len` writable bytes at `buf`.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
    }
    text.len()
}

/// See `fntrace.h`.
#[no_mangle]
pub extern "C" fn fntrace_enabled_functions(buf: *mut c_char, len: usize) -> usize {
    let _errno = ErrnoGuard::new();
    crate::no_unwind("fntrace_enabled_functions", || {
        let mut text = String::new();
        for site in api::sites().unwrap_or_default() {
            if site.state != "nop" {
                text.push_str(&format!(
                    "{} ({}) {} {}{} {} {:#x}\n",
                    site.function,
                    site.ref_count,
                    site.module,
                    site.state,
                    if site.regs { " R" } else { "" },
                    site.kind,
                    site.address
                ));
            }
        }
        copy_out(&text, buf, len)
    })
}

/// See `fntrace.h`.
#[no_mangle]
pub extern "C" fn fntrace_lookup(ip: usize, buf: *mut c_char, len: usize) -> c_int {
    let _errno = ErrnoGuard::new();
    crate::no_unwind("fntrace_lookup", || match api::lookup(ip) {
        Some(site) => {
            copy_out(&site.function, buf, len);
            0
        }
        None => fail(format!("no site has ip {ip:#x}")),
    })
}

/// Counters of `fntrace.h`'s `struct fntrace_stats`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct CStats {
    modules: u64,
    sites: u64,
    converted: u64,
    canonical: u64,
    skipped: u64,
    batches: u64,
    written: u64,
    syncs: u64,
    protects: u64,
    refused: u64,
    traps: u64,
    recursions: u64,
}

/// See `fntrace.h`.
///
/// # Safety
/// `out` points to a writable `struct fntrace_stats`.
#[no_mangle]
pub unsafe extern "C" fn fntrace_get_stats(out: *mut CStats) -> c_int {
    let _errno = ErrnoGuard::new();
    let stats = crate::no_unwind("fntrace_get_stats", api::stats);
    match stats {
        Ok(s) => {
            let c = CStats {
                modules: s.modules as u64,
                sites: s.sites as u64,
                converted: s.converted as u64,
                canonical: s.canonical as u64,
                skipped: s.skipped.values().sum::<usize>() as u64,
                batches: s.batches as u64,
                written: s.batch.written as u64,
                syncs: s.batch.syncs as u64,
                protects: s.batch.protects as u64,
                refused: s.refused as u64,
                traps: crate::trap::STEERED.load(std::sync::atomic::Ordering::Relaxed),
                recursions: crate::ops::RECURSIONS.load(std::sync::atomic::Ordering::Relaxed),
            };
            // SAFETY: as the caller guarantees.
            unsafe { out.write(c) };
            0
        }
        Err(e) => fail(e.to_string()),
    }
}
