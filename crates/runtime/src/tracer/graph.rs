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
//!
//! A thread may run on more than one stack: a signal handler on its
//! alternate stack, coroutines (`swapcontext`, hand-written switches). A
//! handler on the alternate stack never ends the frames it interrupted
//! (they are below it in time, wherever its stack lies). Frames of a stack
//! the thread switched away from look gone, and are closed as such; so
//! that the program never depends on the shadow stack for them, a frame
//! closed without its return gets its real return address back in its
//! slot ([`release`]) — resumed later, it returns straight to its caller.
//! A return whose frame is not the innermost one (frames of another stack
//! lie above it) closes those frames the same way.

use fntrace_format::event::{self, Kind};

use super::fids::{self, DEPTH, GRAPH, HAS_EXIT, NOTRACE, TRACE_OFF, TRACE_ON};
use super::retslot;
use super::thread::{
    self, Frame, Owner, F_DEPTH, F_FORCED, F_GRAPH, F_HIJACKED, F_NOTRACE, F_RESTORED, SHADOW,
};
use super::{args, clock, config, profile, Tracer};
use crate::ops::RawOps;
use crate::routines::Regs;
use crate::sys;

/// The address of the return trampoline that hijacked slots of function
/// `fid` get: the one that keeps every register for a function no
/// compiler prepared (`fids::PLAIN`), else the profiler's for `profile`,
/// else function_graph's.
fn handler(fid: u32) -> usize {
    let flags = fids::flags(fid);
    if flags & fids::RETVAL != 0 && fids::ret_tag(fid) == 0 {
        // The return value is read from the registers it saves (the fast
        // return path records only the integers in rax).
        return super::asm::return_trampoline_all();
    }
    if flags & fids::PLAIN != 0 {
        return super::asm::return_trampoline_bare();
    }
    match config().kind {
        Tracer::Profile => super::asm::profile_trampoline(),
        _ => super::asm::return_trampoline(),
    }
}

/// Whether `a` is a return trampoline (a slot or a frame's return address
/// may hold either: both end in `graph_return`, whichever tracer made it).
fn is_handler(a: usize) -> bool {
    let a = super::asm::return_entry_of(retslot::plain(a));
    a == super::asm::return_trampoline()
        || a == super::asm::profile_trampoline()
        || a == super::asm::return_trampoline_all()
        || a == super::asm::return_trampoline_bare()
}

/// Entry callback of `function_graph` and `profile`.
pub unsafe extern "C" fn graph_entry(
    ip: usize,
    _parent: usize,
    _: *mut RawOps,
    regs: *mut Regs,
    slot: *mut usize,
) {
    let Some(mut t) = thread::enter() else { return };
    let now = clock::now();
    let fid = fids::of_ip(ip);
    let (slot, word, how) = retslot::split(slot as usize);
    // A tail call by a traced function (its frame at the same slot, its
    // return hijacked) into a library function: a call the library-call
    // guard may not want, asked with the tail caller's module (strdup's
    // `jmp memcpy` is libc's own call, not the program's).
    if let Some(top) = t.top() {
        let tail = top.slot == slot && top.flags & F_HIJACKED != 0;
        if tail && fids::flags(fid) & fids::PLAIN != 0 {
            if let Some(home) = fids::home(top.fid) {
                if crate::libcall::skips_tail_call(ip, home) {
                    t.leave();
                    return;
                }
            }
        }
    }
    drop_stale(&mut t, slot, now, Some(word));
    let flags = fids::flags(fid);
    let values = (flags & fids::ARGS != 0 && !regs.is_null()).then(|| {
        // SAFETY: a non-null `regs` is the frame the regs routine built
        // for this call, live until this callback returns.
        unsafe { entry_frame(regs, flags & fids::PLAIN != 0, slot) }
    });
    // SAFETY: `slot` is the traced function's return slot on this stack.
    unsafe { enter_frame(&mut t, fid, ip, (slot, word, how), now, values.as_ref()) };
    t.leave();
}

/// The registers of a call's entry, for its arguments.
///
/// # Safety
/// `regs` is the live frame a regs routine built (`bare`: the bare
/// sites' routine).
#[cfg(target_arch = "x86_64")]
unsafe fn entry_frame(regs: *const Regs, bare: bool, slot: usize) -> args::Frame {
    // SAFETY: as the caller guarantees.
    let r = unsafe { &*regs };
    let mut xmm = [0u64; 8];
    for (i, x) in xmm.iter_mut().enumerate() {
        // SAFETY: as the caller guarantees.
        *x = unsafe { crate::routines::saved_vector(regs, bare, i) };
    }
    args::Frame {
        gp: [
            r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.sp, r.r8, r.r9, r.r10, r.r11, r.r12, r.r13,
            r.r14, r.r15,
        ],
        xmm,
        slot,
    }
}

/// AArch64 records no values yet (`parse` refuses them), so no function
/// has `fids::ARGS` or `fids::RETVAL` and this is never asked: an empty
/// frame.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn entry_frame(_regs: *const Regs, _bare: bool, slot: usize) -> args::Frame {
    args::Frame {
        slot,
        ..Default::default()
    }
}

/// The return registers an exit site's regs routine saved.
///
/// # Safety
/// `regs` is the live frame a regs routine built for an exit site.
unsafe fn exit_frame(regs: *const Regs) -> args::Frame {
    // SAFETY: as the caller guarantees.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        return_frame(
            (*regs).rax,
            (*regs).rdx,
            crate::routines::saved_vector(regs, false, 0),
        )
    }
    // AArch64 has no exit sites.
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = regs;
        args::Frame::default()
    }
}

/// The return registers, for a return value.
fn return_frame(rax: u64, rdx: u64, xmm0: u64) -> args::Frame {
    let mut f = args::Frame::default();
    f.gp[0] = rax;
    f.gp[3] = rdx;
    f.xmm[0] = xmm0;
    f
}

/// Exit-site callback of `function_graph` and `profile`.
pub unsafe extern "C" fn graph_exit(
    ip: usize,
    _parent: usize,
    _: *mut RawOps,
    regs: *mut Regs,
    slot: *mut usize,
) {
    let Some(mut t) = thread::enter_exit() else { return };
    let now = clock::now();
    let fid = fids::of_ip(ip);
    let slot = slot as usize;
    drop_stale(&mut t, slot, now, None);
    if let Some(top) = t.top() {
        if top.slot == slot && top.fid == fid && top.flags & F_HIJACKED == 0 {
            // SAFETY: `ip` is the code right after the exit site, in a
            // mapped executable segment.
            if unsafe { is_return(ip) } {
                t.pop_frame();
                let ret = (fids::flags(fid) & fids::RETVAL != 0 && !regs.is_null()).then(|| {
                    // SAFETY: a non-null `regs` is the live frame the regs
                    // routine built for this exit site (never a bare one).
                    unsafe { exit_frame(regs) }
                });
                close_with(&mut t, top, Kind::Exit, now, ret.as_ref());
            } else {
                // A tail call (XRay tail sled, or a return site before a
                // `jmp`): the function ends when its callee returns, into
                // the trampoline.
                let p = slot as *mut usize;
                let d = t.depth() - 1;
                let f = t.frame(d);
                // SAFETY: the function's live return slot on this stack.
                unsafe {
                    f.orig = *p;
                    *p = handler(f.fid);
                }
                f.flags |= super::hijacked_flags(f.fid);
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
    regs: *mut Regs,
    slot: *mut usize,
) {
    let Some(mut t) = thread::enter() else { return };
    let now = clock::now();
    let fid = fids::of_ip(ip);
    if triggers(&mut t, fid, now) {
        let flags = fids::flags(fid);
        match fids::spec(fid).filter(|_| flags & fids::ARGS != 0 && !regs.is_null()) {
            Some(spec) => {
                // SAFETY: a non-null `regs` is the frame the regs routine
                // built for this call, live until this callback returns.
                let frame = unsafe { entry_frame(regs, flags & fids::PLAIN != 0, slot as usize) };
                args::capture(spec, spec.args.iter(), &frame, |bytes| {
                    t.emit_values(
                        Kind::EntryCaller,
                        fid,
                        now,
                        Some(parent as u64),
                        event::DATA_ARGS,
                        bytes,
                    )
                })
            }
            None => t.emit(Kind::EntryCaller, fid, now, Some(parent as u64)),
        }
    }
    t.leave();
}

/// Applies `fid`'s `trace_on`/`trace_off` triggers; whether tracing is on.
fn triggers(t: &mut Owner, fid: u32, now: u64) -> bool {
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

/// Closes the frames above `slot` (the return slot of the call being
/// entered or returned from, or an unwinder's stack pointer): gone without
/// returning through us. A frame at or below `slot` is gone if it is on
/// the same stack; a handler running on the alternate signal stack ends
/// none of the frames it interrupted.
#[inline]
fn drop_stale(t: &mut Owner, slot: usize, now: u64, entry: Option<usize>) {
    // The common cases, a frame of an outer call on top (or, at a return,
    // the returning call's): one look.
    if t.top_slot()
        .is_none_or(|top| top > slot || (top == slot && entry.is_none()))
    {
        return;
    }
    drop_gone(t, slot, now, entry);
}

#[cold]
fn drop_gone(t: &mut Owner, slot: usize, now: u64, entry: Option<usize>) {
    let mut alt: Option<Option<(usize, usize, bool)>> = None;
    while let Some(top) = t.top() {
        // At an entry, `entry` is the word holding the new call's return
        // address: a frame at the same slot is the one tail-calling it
        // only if that is the trampoline's address.
        let gone = top.slot < slot
            // SAFETY: the entering call's return word, live.
            || entry.is_some_and(|w| top.slot == slot && !is_handler(unsafe { *(w as *const usize) }));
        if !gone || top.slot == 0 {
            break;
        }
        let (start, end, _) = alt.get_or_insert_with(sys::alt_stack).unwrap_or((0, 0, false));
        let on_alt = |a: usize| (start..end).contains(&a);
        if on_alt(slot) && !on_alt(top.slot) {
            break;
        }
        t.pop_frame();
        release(t, &top, slot);
        close(t, top, gone_kind(&top), now);
    }
}

/// A frame ends without returning through the trampoline: if its slot
/// still holds the trampoline's address, the real return address goes
/// back there. The slot is dead stack (a `longjmp` left it: writing it is
/// harmless) or live on another stack (a coroutine switched away, which
/// then returns straight to its caller when resumed). Slots in the
/// tracer's own frames — between the stack pointer (and the red zone under
/// it) and `current`, the slot of the event being handled — are left
/// alone: those bytes are ours now.
///
/// The address is also parked ([`Owner::park`]): a copy of the slot made
/// before (a context switch tail-called from the function saved the
/// trampoline's address as where to resume) still returns through the
/// trampoline, which then finds it there.
fn release(t: &mut Owner, f: &Frame, current: usize) {
    // A return address that was in a register (`retslot.rs`) has no slot
    // to put it back in: the function kept it where it chose.
    if f.flags & F_HIJACKED == 0
        || f.flags & (F_RESTORED | retslot::F_IN_REGISTER) != 0
        || f.slot == 0
        || is_handler(f.orig)
    {
        return;
    }
    let ours = sys::stack_pointer().saturating_sub(256)..current;
    if ours.contains(&f.slot) {
        return;
    }
    let p = f.slot as *mut usize;
    // SAFETY: the slot was this frame's return slot on a stack of this
    // thread; outside our own frames, it is written only where it still
    // holds the trampoline's address, which only a hijacked return slot
    // (live, or dead stack nothing else uses) holds.
    let held = is_handler(retslot::plain(unsafe { p.read_volatile() }));
    if held {
        // SAFETY: as above.
        unsafe { p.write_volatile(f.orig) };
        t.park(f.slot, f.orig);
    }
}

/// Opens a frame for `fid` if it is to be recorded; `(slot, word, how)`
/// are the call's identity, the word holding its return address and
/// their relation (`retslot::split`).
///
/// # Safety
/// `word` holds the return address of the call being entered, on this
/// stack.
unsafe fn enter_frame(
    t: &mut Owner,
    fid: u32,
    ip: usize,
    (slot, word, how): (usize, usize, u32),
    now: u64,
    values: Option<&args::Frame>,
) {
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
    if t.depth() >= SHADOW {
        t.shared()
            .untraced
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return;
    }
    let mut f = Frame {
        slot,
        orig: 0,
        start: now,
        total0: 0,
        fid,
        flags: 0,
        saved_max: t.max_depth,
        // The profiler's fast exits write to a frame's cell: never 0 there.
        cell: if cfg.kind == Tracer::Profile {
            profile::sink()
        } else {
            0
        },
        pad: 0,
    };
    let hijack = flags & HAS_EXIT == 0 && slot != 0;
    if hijack {
        // SAFETY: the caller's slot holds the traced function's return
        // address; this thread alone uses it.
        f.orig = unsafe { *(word as *const usize) };
        f.flags |= super::hijacked_flags(fid) | how;
    }
    if flags & NOTRACE != 0 {
        // Hidden with its callees: a frame only to know when it ends.
        t.hidden += 1;
        f.flags |= F_NOTRACE;
        push_hijacked(t, f, hijack.then_some(word), ip);
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
    push_hijacked(t, f, hijack.then_some(word), ip);
    match cfg.kind {
        Tracer::Profile => profile::enter(t, fid),
        _ if cfg.time_filter == 0 => match (values, fids::spec(fid)) {
            (Some(frame), Some(spec)) => args::capture(spec, spec.args.iter(), frame, |bytes| {
                t.emit_values(Kind::Entry, fid, now, None, event::DATA_ARGS, bytes)
            }),
            _ => t.emit(Kind::Entry, fid, now, None),
        },
        _ => {}
    }
}

/// Pushes `f`, then (with `hijack`) puts the trampoline in its slot: a
/// frame is on the shadow stack before its return can need it.
fn push_hijacked(t: &mut Owner, mut f: Frame, word: Option<usize>, ip: usize) {
    let trampoline = handler(f.fid);
    let ours = word.and_then(|w| Some((w, retslot::hijacked_word(&mut f, trampoline, ip)?)));
    if word.is_some() && ours.is_none() {
        // A signed return address whose modifier was not found: the frame
        // is not hijacked, and ends when found gone.
        f.flags &= !F_HIJACKED;
    }
    t.push_frame(f);
    if let Some((word, ours)) = ours {
        // SAFETY: the word holding the traced function's return address,
        // which `f.orig` was read from; this thread alone uses it.
        unsafe { *(word as *mut usize) = ours };
    }
}

/// Ends a popped frame: its event, its accounting.
fn close(t: &mut Owner, f: Frame, kind: Kind, now: u64) {
    close_with(t, f, kind, now, None);
}

/// [`close`], for a return whose registers are `ret`: with its return
/// value where one is asked for.
fn close_with(t: &mut Owner, f: Frame, kind: Kind, now: u64, ret: Option<&args::Frame>) {
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
    let returned = kind == Kind::Exit;
    // What ends the call: its EXIT or UNWIND; under a time filter, the
    // whole call at its end if it was long enough.
    let (kind, payload) = match cfg.kind {
        Tracer::Profile => return profile::exit(t, &f, dur),
        _ if cfg.time_filter > 0 && dur < cfg.time_filter => return,
        _ if cfg.time_filter > 0 => (Kind::Call, Some(dur)),
        _ => (kind, None),
    };
    // With its return value where one is asked for (a call's arguments
    // are gone by its end).
    match ret
        .filter(|_| returned)
        .and_then(|frame| Some((frame, fids::spec(f.fid)?)))
    {
        Some((frame, spec)) if spec.retval.is_some() => {
            args::capture(spec, spec.retval.iter(), frame, |bytes| {
                t.emit_values(kind, f.fid, now, payload, event::DATA_RETVAL, bytes)
            })
        }
        _ => t.emit(kind, f.fid, now, payload),
    }
}

/// Called by the return trampoline with the slot the traced function
/// returned from: closes its frame and gives the real return address.
#[cfg(target_arch = "x86_64")]
pub extern "C" fn graph_return(slot: usize, saved: *const u64) -> usize {
    let Some((t, was)) = thread::for_return() else {
        lost_return();
    };
    returned(t, was, slot, saved)
}

/// Called by the AArch64 return trampoline with the stack pointer the
/// traced function returned with (`retslot.rs`): the call returning is the
/// outermost of the frames on top at or below it — a call entered at that
/// stack pointer, or whose return slot (a `-pg` frame record) lies below
/// it; deeper frames are gone.
#[cfg(target_arch = "aarch64")]
pub extern "C" fn graph_return_at(sp: usize, saved: *const u64) -> usize {
    let Some((mut t, was)) = thread::for_return() else {
        lost_return();
    };
    let mut slot = sp;
    for i in (0..t.depth()).rev() {
        let s = t.frame(i).slot;
        if s > sp {
            break;
        }
        slot = s;
    }
    // A signed return address (`retslot.rs`) is taken without its code.
    retslot::plain(returned(t, was, slot, saved))
}

/// Ends the call at `slot` that returned into a trampoline (whose save
/// area is `saved`), and gives its real return address.
fn returned(mut t: Owner, was: usize, slot: usize, saved: *const u64) -> usize {
    let now = clock::now();
    drop_stale(&mut t, slot, now, None);
    if t.top_slot().is_some_and(|top| top != slot) {
        end_other_stacks(&mut t, slot, now);
    }
    // SAFETY: `saved` is the return trampoline's save area: `rax` and
    // `rdx` first, the vector registers from `RETURN_VECS`
    // (`fntrace_return_all`).
    let regs = unsafe { return_frame(*saved, *saved.add(1), *saved.add(super::asm::RETURN_VECS / 8)) };
    let mut ret = 0;
    while let Some(top) = t.top() {
        if top.slot != slot {
            break;
        }
        t.pop_frame();
        close_with(&mut t, top, Kind::Exit, now, Some(&regs));
        if top.flags & F_HIJACKED != 0 && !is_handler(top.orig) {
            ret = top.orig;
            break;
        }
    }
    if ret == 0 {
        // Not on the shadow stack: a frame ended before, whose return
        // address had been copied (`release`).
        ret = t.unpark(slot).unwrap_or(0);
    }
    t.leave_to(was);
    if ret == 0 {
        lost_return();
    }
    ret
}

/// Frames of another stack above the frame of the return at `slot` (a
/// coroutine switched away from, a signal handler's stack left): they end
/// here.
#[cold]
fn end_other_stacks(t: &mut Owner, slot: usize, now: u64) {
    if let Some(i) = (0..t.depth()).rev().find(|&i| t.frame(i).slot == slot) {
        while t.depth() > i + 1 {
            let Some(f) = t.pop_frame() else { break };
            release(t, &f, slot);
            close(t, f, gone_kind(&f), now);
        }
    }
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
    let Some((mut t, was)) = thread::for_return() else {
        return;
    };
    let now = clock::now();
    drop_stale(&mut t, retslot::below(sp), now, None);
    // Innermost first: each frame's words lie between the next deeper
    // call's stack and its own slot (`retslot::put_back`).
    let mut lo = sp;
    for i in (0..t.depth()).rev() {
        let f = t.frame(i);
        if f.flags & F_HIJACKED != 0 && f.flags & F_RESTORED == 0 && !is_handler(f.orig) {
            // SAFETY: frames at or above `sp` are live; a word is written
            // only where it still holds the trampoline's address.
            unsafe { retslot::put_back(f, lo, is_handler) };
        }
        lo = lo.max(f.slot);
        // Frames with exit sites too: if the exception unwinds them, their
        // exit happened (cleanups ran), though no exit site saw it. A forced
        // unwind (`pthread_exit`) ends them without a return.
        f.flags |= F_RESTORED;
        if forced {
            f.flags |= F_FORCED;
        }
    }
    t.leave_to(was);
}

/// An unwinder walks this thread's stack (its first frame lookup) without
/// a wrapper having seen the walk begin: a forced unwind started through a
/// pointer (glibc's thread cancellation), or a `backtrace()`. Every return
/// address still hijacked is put back (the walk is below all the frames);
/// those frames end when found gone, as after `pthread_exit`. Frames put
/// back already (an exception's) are left as they are.
pub fn restore_for_walk() {
    let Some((mut t, was)) = thread::for_return() else {
        return;
    };
    let mut lo = sys::stack_pointer();
    for i in (0..t.depth()).rev() {
        let f = t.frame(i);
        let bound = lo;
        lo = lo.max(f.slot);
        if f.flags & F_HIJACKED == 0 || f.flags & F_RESTORED != 0 || is_handler(f.orig) {
            continue;
        }
        // SAFETY: every frame is above this walk (which runs below them
        // all); a word is written only where it holds the trampoline's
        // address, which only a hijacked return address holds.
        unsafe { retslot::put_back(f, bound, is_handler) };
        f.flags |= F_RESTORED | F_FORCED;
    }
    t.leave_to(was);
}

/// At a catch (`__cxa_begin_catch`, called by the catching frame, whose
/// stack pointer is `sp`): frames below `sp` were unwound and end now;
/// the frames above survive, so their returns are hijacked again.
pub extern "C" fn catch(sp: usize) {
    let Some((mut t, was)) = thread::for_return() else {
        return;
    };
    let now = clock::now();
    drop_stale(&mut t, retslot::below(sp), now, None);
    for i in 0..t.depth() {
        let f = t.frame(i);
        if f.flags & F_RESTORED == 0 {
            continue;
        }
        f.flags &= !(F_RESTORED | F_FORCED);
        if f.cell == 0 && config().kind == Tracer::Profile {
            // A frame of another tracer's session (attached before) gets
            // the profiler's trampoline: its fast exit needs a cell.
            f.cell = profile::sink();
        }
        if f.flags & F_HIJACKED != 0 && !is_handler(f.orig) {
            // SAFETY: the frame is above the catching frame's stack pointer:
            // live; the real address `restore_all` put back is replaced only
            // where it still is.
            unsafe { retslot::hijack_again(f, handler(f.fid)) };
        }
    }
    t.leave_to(was);
}

/// A thread ends: its frames still open (left by `pthread_exit`, or by a
/// start routine that never returned through the trampoline) end here.
pub fn thread_end(t: &mut Owner) {
    let now = clock::now();
    let sp = sys::stack_pointer();
    t.shared().busy.store(sp, std::sync::atomic::Ordering::Relaxed);
    // The frames still live on this stack (the thread's own start and
    // exit code when a library is traced whole: glibc's `start_thread`,
    // the key destructors' caller running this) return later, with no
    // frame to return through: their return addresses are put back.
    let live = sys::thread_stack().map(|(_, end)| sp..end);
    let mut lo = sp;
    while let Some(mut top) = t.pop_frame() {
        let hijacked = top.flags & F_HIJACKED != 0 && top.flags & F_RESTORED == 0;
        if hijacked && live.as_ref().is_some_and(|l| l.contains(&top.slot)) {
            // SAFETY: the slot lies in this thread's stack above this
            // function's frame: a frame still live; a word is written only
            // where it holds a trampoline's address, which only a hijacked
            // return address holds.
            unsafe { retslot::put_back(&mut top, lo, is_handler) };
        }
        lo = lo.max(top.slot);
        close(t, top, gone_kind(&top), now);
    }
}
