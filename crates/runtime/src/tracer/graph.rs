//! The tracers' callbacks: `function` (entry with the caller), and
//! `function_graph` and `profile`, which follow each traced call to its end
//! — through the function's exit sites where it has them, else by hijacking
//! its return address (the kernel's `return_to_handler`) with a per-thread
//! shadow stack.
//!
//! The shadow stack is kept in stack order by the address of each frame's
//! return slot: a frame whose slot lies below the slot of a new call (or of
//! a return) is gone — a `longjmp`, or an exception that unwound it — and is
//! closed there (`UNWIND`, or `EXIT` if an exception unwound it: its exit
//! happened). Two frames may share a slot: a tail call, which returns for
//! both at once.

use fntrace_format::event::Kind;

use super::fids::{self, DEPTH, GRAPH, HAS_EXIT, NOTRACE, TRACE_OFF, TRACE_ON};
use super::thread::{
    self, Frame, Thread, F_DEPTH, F_FORCED, F_GRAPH, F_HIJACKED, F_NOTRACE, F_RESTORED, SHADOW,
};
use super::{clock, config, profile, Tracer};
use crate::ops::RawOps;
use crate::routines::Regs;

/// The return trampoline's address.
fn handler() -> usize {
    super::asm::return_trampoline()
}

/// Entry callback of `function_graph` and `profile`.
pub unsafe extern "C" fn graph_entry(
    ip: usize,
    _parent: usize,
    _: *mut RawOps,
    _: *mut Regs,
    slot: *mut usize,
) {
    let Some(t) = thread::enter() else { return };
    let now = clock::now();
    let fid = fids::of_ip(ip);
    let slot = slot as usize;
    drop_stale(t, slot, now, true);
    // SAFETY: `slot` is the traced function's return slot on this stack.
    unsafe { enter_frame(t, fid, slot, now) };
    t.leave();
}

/// Exit-site callback of `function_graph` and `profile`.
pub unsafe extern "C" fn graph_exit(
    ip: usize,
    _parent: usize,
    _: *mut RawOps,
    _: *mut Regs,
    slot: *mut usize,
) {
    let Some(t) = thread::enter() else { return };
    let now = clock::now();
    let fid = fids::of_ip(ip);
    let slot = slot as usize;
    drop_stale(t, slot, now, false);
    if let Some(top) = t.top() {
        if top.slot == slot && top.fid == fid && top.flags & F_HIJACKED == 0 {
            // SAFETY: `ip` is the code right after the exit site, in a
            // mapped executable segment.
            if unsafe { is_return(ip) } {
                t.depth -= 1;
                close(t, top, Kind::Exit, now);
            } else {
                // A tail call (XRay tail sled, or a return site before a
                // `jmp`): the function ends when its callee returns, into
                // the trampoline.
                let p = slot as *mut usize;
                let d = t.depth - 1;
                let f = t.frame(d);
                // SAFETY: the function's live return slot on this stack.
                unsafe {
                    f.orig = *p;
                    *p = handler();
                }
                f.flags |= F_HIJACKED;
            }
        }
    }
    t.leave();
}

/// Whether the instruction at `ip` returns (`ret`, `ret imm16`, `rep ret`,
/// `bnd ret`), rather than jumping on.
///
/// # Safety
/// `ip` points into mapped code.
unsafe fn is_return(ip: usize) -> bool {
    let p = ip as *const u8;
    // SAFETY: code bytes after a site: readable.
    let (b0, b1) = unsafe { (*p, *p.add(1)) };
    matches!(b0, 0xc3 | 0xc2) || (matches!(b0, 0xf3 | 0xf2) && matches!(b1, 0xc3 | 0xc2))
}

/// Entry callback of `function`.
pub unsafe extern "C" fn function_entry(
    ip: usize,
    parent: usize,
    _: *mut RawOps,
    _: *mut Regs,
    _: *mut usize,
) {
    let Some(t) = thread::enter() else { return };
    let now = clock::now();
    let fid = fids::of_ip(ip);
    if triggers(t, fid, now) {
        t.emit(Kind::EntryCaller, fid, now, Some(parent as u64));
    }
    t.leave();
}

/// Applies `fid`'s `trace_on`/`trace_off` triggers; whether tracing is on.
fn triggers(t: &mut Thread, fid: u32, now: u64) -> bool {
    let cfg = config();
    let flags = fids::flags(fid);
    if flags & (TRACE_ON | TRACE_OFF) != 0 {
        let on = flags & TRACE_ON != 0;
        let was = cfg.tracing.swap(on, std::sync::atomic::Ordering::Relaxed);
        if was != on && cfg.time_filter == 0 && cfg.kind != Tracer::Profile {
            t.emit(Kind::Mark, on as u32, now, None);
        }
    }
    cfg.tracing.load(std::sync::atomic::Ordering::Relaxed)
}

/// How a frame found gone ended: `EXIT` if an exception unwound it (its
/// cleanups ran; for a forced unwind, only C++ frames have them), else
/// `UNWIND` (a `longjmp`, or a C frame skipped by `pthread_exit`).
fn gone_kind(f: &Frame) -> Kind {
    let cleaned =
        f.flags & F_RESTORED != 0 && (f.flags & F_FORCED == 0 || fids::flags(f.fid) & fids::CXX != 0);
    if cleaned {
        Kind::Exit
    } else {
        Kind::Unwind
    }
}

/// Closes the frames above `slot`: gone without returning through us.
fn drop_stale(t: &mut Thread, slot: usize, now: u64, entry: bool) {
    let handler = handler();
    while let Some(top) = t.top() {
        let gone = top.slot < slot
            // SAFETY: a slot at or above a live call's slot is live stack.
            || (entry && top.slot == slot && unsafe { *(slot as *const usize) } != handler);
        if !gone || top.slot == 0 {
            break;
        }
        t.depth -= 1;
        close(t, top, gone_kind(&top), now);
    }
}

/// Opens a frame for `fid` if it is to be recorded.
///
/// # Safety
/// `slot` is the return slot of the call being entered, on this stack.
unsafe fn enter_frame(t: &mut Thread, fid: u32, slot: usize, now: u64) {
    let cfg = config();
    let flags = fids::flags(fid);
    if !triggers(t, fid, now) {
        return;
    }
    if t.hidden > 0 || (cfg.has_graph && t.inside == 0 && flags & GRAPH == 0) {
        return;
    }
    if t.recorded >= t.max_depth {
        return;
    }
    if t.depth >= SHADOW {
        t.overflow += 1;
        return;
    }
    let mut f = Frame {
        slot,
        orig: 0,
        start: now,
        children: 0,
        fid,
        flags: 0,
        saved_max: t.max_depth,
        pad: [0; 5],
    };
    if flags & HAS_EXIT == 0 && slot != 0 {
        let p = slot as *mut usize;
        // SAFETY: the caller's slot holds the traced function's return
        // address; this thread alone uses it.
        unsafe {
            f.orig = *p;
            *p = handler();
        }
        f.flags |= F_HIJACKED;
    }
    if flags & NOTRACE != 0 {
        // Hidden with its callees: a frame only to know when it ends.
        t.hidden += 1;
        f.flags |= F_NOTRACE;
        let depth = t.depth;
        *t.frame(depth) = f;
        t.depth += 1;
        return;
    }
    if flags & GRAPH != 0 {
        t.inside += 1;
        f.flags |= F_GRAPH;
    }
    if flags & DEPTH != 0 {
        t.max_depth = t.recorded + u32::from(fids::depth(fid));
        f.flags |= F_DEPTH;
    }
    t.recorded += 1;
    let depth = t.depth;
    *t.frame(depth) = f;
    t.depth += 1;
    match cfg.kind {
        Tracer::Profile => profile::enter(t, fid),
        _ if cfg.time_filter == 0 => t.emit(Kind::Entry, fid, now, None),
        _ => {}
    }
}

/// Ends a popped frame: its event, its accounting.
fn close(t: &mut Thread, f: Frame, kind: Kind, now: u64) {
    let cfg = config();
    if f.flags & F_NOTRACE != 0 {
        t.hidden = t.hidden.saturating_sub(1);
        return;
    }
    t.recorded = t.recorded.saturating_sub(1);
    if f.flags & F_GRAPH != 0 {
        t.inside = t.inside.saturating_sub(1);
    }
    if f.flags & F_DEPTH != 0 {
        t.max_depth = f.saved_max;
    }
    let dur = now.saturating_sub(f.start);
    match cfg.kind {
        Tracer::Profile => {
            profile::exit(t, f.fid, dur, f.children);
            if t.depth > 0 {
                let d = t.depth - 1;
                t.frame(d).children += dur;
            }
        }
        _ if cfg.time_filter > 0 => {
            if dur >= cfg.time_filter {
                t.emit(Kind::Call, f.fid, now, Some(dur));
            }
        }
        _ => t.emit(kind, f.fid, now, None),
    }
}

/// Called by the return trampoline with the slot the traced function
/// returned from: closes its frame and gives the real return address.
pub extern "C" fn graph_return(slot: usize) -> usize {
    let Some(t) = thread::for_return() else {
        lost_return();
    };
    let was_busy = t.busy;
    t.busy = true;
    let now = clock::now();
    drop_stale(t, slot, now, false);
    let handler = handler();
    let mut ret = 0;
    while let Some(top) = t.top() {
        if top.slot != slot {
            break;
        }
        t.depth -= 1;
        close(t, top, Kind::Exit, now);
        if top.flags & F_HIJACKED != 0 && top.orig != handler {
            ret = top.orig;
            break;
        }
    }
    t.busy = was_busy;
    t.allow_fast();
    if ret == 0 {
        lost_return();
    }
    ret
}

fn lost_return() -> ! {
    crate::sys::write_stderr(
        b"fntrace: a traced function returned but its return address is lost; aborting\n",
    );
    std::process::abort();
}

/// Puts back every hijacked return address of this thread before an
/// unwinder walks the stack (an exception, `pthread_exit`): frames below
/// `sp` are gone; the others stay open and end when found gone later.
pub extern "C" fn restore_all(sp: usize, forced: bool) {
    let Some(t) = thread::for_return() else { return };
    let was_busy = t.busy;
    t.busy = true;
    let now = clock::now();
    drop_stale(t, sp, now, false);
    let handler = handler();
    for i in 0..t.depth {
        let f = t.frame(i);
        if f.flags & F_HIJACKED != 0 && f.flags & F_RESTORED == 0 {
            let p = f.slot as *mut usize;
            // SAFETY: frames at or above `sp` are live; the slot is written
            // only where it still holds the trampoline's address.
            unsafe {
                if f.orig != handler && *p == handler {
                    *p = f.orig;
                }
            }
        }
        // Frames with exit sites too: if the exception unwinds them, their
        // exit happened (cleanups ran), though no exit site saw it. A forced
        // unwind (`pthread_exit`) ends them without a return.
        f.flags |= F_RESTORED;
        if forced {
            f.flags |= F_FORCED;
        }
    }
    t.busy = was_busy;
    t.allow_fast();
}

/// At a catch (`__cxa_begin_catch`, called by the catching frame, whose
/// stack pointer is `sp`): frames below `sp` were unwound and end now;
/// the frames above survive, so their returns are hijacked again.
pub extern "C" fn catch(sp: usize) {
    let Some(t) = thread::for_return() else { return };
    let was_busy = t.busy;
    t.busy = true;
    let now = clock::now();
    drop_stale(t, sp, now, false);
    let handler = handler();
    for i in 0..t.depth {
        let f = t.frame(i);
        if f.flags & F_RESTORED == 0 {
            continue;
        }
        f.flags &= !(F_RESTORED | F_FORCED);
        if f.flags & F_HIJACKED != 0 && f.orig != handler {
            let p = f.slot as *mut usize;
            // SAFETY: the frame is above the catching frame's stack pointer:
            // live; its slot holds the real address `restore_all` put back.
            unsafe {
                if *p == f.orig {
                    *p = handler;
                }
            }
        }
    }
    t.busy = was_busy;
    t.allow_fast();
}

/// A thread ends: its frames still open (left by `pthread_exit`, or by a
/// start routine that never returned through the trampoline) end here.
pub fn thread_end(t: &mut Thread) {
    let now = clock::now();
    t.busy = true;
    while let Some(top) = t.top() {
        t.depth -= 1;
        close(t, top, gone_kind(&top), now);
    }
}
