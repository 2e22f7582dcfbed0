//! Where a traced call's return address lives, which the tracers hijack
//! and put back.
//!
//! On x86-64 a call pushes it: the routine gives the callback its stack
//! slot, which is also the call's identity on the shadow stack (deeper
//! calls have lower slots; a slot below the stack pointer is gone).
//!
//! On AArch64 a `-pg` site runs after the prologue, which stored the
//! return address in the frame record: that word is the slot, as on
//! x86-64. At an entry site the function still has it in `x30` (copied to
//! `x9`): the routine keeps `x9` in its own frame for the callback to
//! change, and gives that word tagged ([`crate::routines::IN_REGISTER`]).
//! The call's identity is then the stack pointer it was entered with
//! (the word is [`crate::routines::SLOT_BELOW_SP`] below it), which its
//! return restores, so the return trampoline finds the call by its own
//! stack pointer; the frame is flagged [`F_IN_REGISTER`]. Where the
//! function then saves its hijacked `x30` is its own business: to put the
//! real address back before an unwinder walks the stack, the words of its
//! frame, between the next deeper call's stack pointer and its own, are
//! searched for the trampoline's address ([`put_back`]), and where it was
//! found is kept (`Frame::pad`) for a catch to hijack it again.

use super::thread::Frame;

/// The frame's return address was in a register at entry (AArch64 entry
/// sites): `Frame::slot` is the call's stack pointer, not a word.
pub const F_IN_REGISTER: u32 = 64;

/// A call's identity on the shadow stack, the word holding its return
/// address now, and the frame flags that say how they relate, from the
/// return slot the routine gave the callback.
#[inline]
pub fn split(given: usize) -> (usize, usize, u32) {
    #[cfg(target_arch = "aarch64")]
    if given & crate::routines::IN_REGISTER != 0 {
        let word = given & !crate::routines::IN_REGISTER;
        return (word + crate::routines::SLOT_BELOW_SP, word, F_IN_REGISTER);
    }
    (given, given, 0)
}

/// The slot below which the calls of a function now at stack pointer `sp`
/// lie (gone, when an unwinder runs from there): on x86-64 their slots are
/// below `sp`; on AArch64 a call it made has the identity `sp` itself
/// (entered with it), a `-pg` call a frame record below it.
#[inline]
pub fn below(sp: usize) -> usize {
    if cfg!(target_arch = "aarch64") {
        sp + 1
    } else {
        sp
    }
}

/// Puts the real return address of hijacked frame `f` back where the
/// trampoline's address is, if it is there (`is_handler`), before an
/// unwinder reads the stack; `lo` is the lowest live stack address of
/// its frame (the next deeper call's stack pointer, or the walker's).
/// Whether it was found.
///
/// # Safety
/// `f` is a live frame of this thread's stack, and `lo..` up to its slot
/// is live stack of this thread above the caller's frames.
pub unsafe fn put_back(f: &mut Frame, lo: usize, is_handler: impl Fn(usize) -> bool) -> bool {
    if f.flags & F_IN_REGISTER == 0 {
        let p = f.slot as *mut usize;
        // SAFETY: as the caller guarantees: the frame's return slot, live.
        unsafe {
            if is_handler(*p) {
                *p = f.orig;
                return true;
            }
        }
        return false;
    }
    let mut found = false;
    let mut at = (lo + 7) & !7;
    while at < f.slot {
        let p = at as *mut usize;
        // SAFETY: as the caller guarantees: live stack of this thread, in
        // the function's frame or those of untraced functions it called,
        // none of which holds the trampoline's address but as the
        // function's saved return address (the routine clears its copy).
        unsafe {
            if is_handler(p.read_volatile()) {
                p.write_volatile(f.orig);
                f.pad = at as u64;
                found = true;
            }
        }
        at += 8;
    }
    found
}

/// Hijacks frame `f` again after [`put_back`] (a catch: the frame survives
/// the exception), if its return address is still where it was put back.
///
/// # Safety
/// `f` is a live frame of this thread's stack.
pub unsafe fn hijack_again(f: &Frame, handler: usize) {
    let p = match f.flags & F_IN_REGISTER {
        0 => f.slot,
        _ => f.pad as usize,
    } as *mut usize;
    if p.is_null() {
        return;
    }
    // SAFETY: as the caller guarantees; the word is written only where it
    // still holds the real address put back.
    unsafe {
        if *p == f.orig {
            *p = handler;
        }
    }
}
