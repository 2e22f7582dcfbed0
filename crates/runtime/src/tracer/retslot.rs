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
//!
//! Pointer authentication (`-mbranch-protection`, the default of several
//! distributions): a function signs its return address with the stack
//! pointer it was entered with (`paciasp`) and authenticates it before
//! returning. An entry site runs before `paciasp`, so the function signs
//! the trampoline's address itself; a put-back value is signed the same
//! way. A `-pg` frame record holds the signed address: the trampoline's
//! address is signed with the same modifier, found as the one that signs
//! the real address into what the record holds ([`hijacked_word`]).
//! Signing uses the hint-space instructions (`PACIA1716`, `XPACLRI`): on
//! a CPU without pointer authentication they do nothing, and nothing is
//! signed.

use super::thread::Frame;

/// The frame's return address was in a register at entry (AArch64 entry
/// sites): `Frame::slot` is the call's stack pointer, not a word.
pub const F_IN_REGISTER: u32 = 64;

/// The frame's return address is signed (pointer authentication): with
/// the modifier `Frame::pad` (a `-pg` frame record), or with the call's
/// stack pointer, its slot (an entry site's).
pub const F_SIGNED: u32 = 128;

/// How many instructions before a `-pg` site its function's prologue is
/// looked for (from `paciasp` to the `bl _mcount`).
const MAX_PROLOGUE: usize = 64;

/// `v` without a pointer authentication code.
#[inline]
pub fn plain(v: usize) -> usize {
    #[cfg(target_arch = "aarch64")]
    return crate::sys::strip_pac(v);
    #[cfg(not(target_arch = "aarch64"))]
    v
}

/// `v` signed with `modifier` (the identity off AArch64, where nothing is).
#[inline]
fn sign(v: usize, modifier: usize) -> usize {
    #[cfg(target_arch = "aarch64")]
    return crate::sys::sign_pac(v, modifier);
    #[cfg(not(target_arch = "aarch64"))]
    {
        let _ = modifier;
        v
    }
}

/// What to write in place of `f.orig` so that the call returns into
/// `handler`: `handler`, or where `f.orig` is signed, `handler` signed the
/// same way (the modifier kept in `f.pad`, [`F_SIGNED`] set). `ip` is the
/// site's return address. `None` if the modifier is not found: the frame
/// is then not hijacked.
pub fn hijacked_word(f: &mut Frame, handler: usize, ip: usize) -> Option<usize> {
    let bare = plain(f.orig);
    if f.flags & F_IN_REGISTER != 0 || bare == f.orig {
        return Some(handler);
    }
    // A `-pg` frame record: `paciasp` signed with the stack pointer at the
    // function's entry, which its prologue then lowered to store the
    // record. Guessing it would not do: a code of 7 bits matches a wrong
    // modifier once in 128. The prologue says it; the signature checks it.
    let record = f.slot - 8;
    let sp = entry_sp(ip, record)?;
    (sign(bare, sp) == f.orig).then(|| {
        f.pad = sp as u64;
        f.flags |= F_SIGNED;
        sign(handler, sp)
    })
}

/// The stack pointer a function was entered with, from its prologue before
/// the `-pg` site whose return address is `ip` and the address of its frame
/// record: `stp x29, x30, [sp, #-N]!` (the record is N below it), or `sub
/// sp, sp, #N` (once or twice) then `stp x29, x30, [sp, #M]`; the prologue
/// starts at `paciasp`. `None` for any other form.
fn entry_sp(ip: usize, record: usize) -> Option<usize> {
    const PACIASP: u32 = 0xd503_233f;
    const STP_FP_LR_PRE: u32 = 0xa980_7bfd; // stp x29, x30, [sp, #imm]!
    const STP_FP_LR: u32 = 0xa900_7bfd; // stp x29, x30, [sp, #imm]
    const IMM7: u32 = 0x7f << 15;
    const SUB_SP: u32 = 0xd100_03ff; // sub sp, sp, #imm12 {, lsl #12}
    const SUB_MASK: u32 = !((1 << 22) | (0xfff << 10));
    let word = |i: usize| -> u32 {
        // SAFETY: code before a site of this function, which starts with
        // `paciasp` (its return address is signed) at most MAX_PROLOGUE
        // words back: the scan stops there, inside the function's mapped
        // code.
        unsafe { ((ip - 4 * i) as *const u32).read_volatile() }
    };
    let simm7 = |w: u32| (((w >> 15) & 0x7f) as i32) << 25 >> 25;
    let start = (2..=MAX_PROLOGUE).find(|&i| word(i) == PACIASP)?;
    let (mut lowered, mut stored) = (0usize, None);
    for i in (2..start).rev() {
        let w = word(i);
        if w & !IMM7 == STP_FP_LR_PRE {
            lowered += (-(simm7(w) * 8)) as usize;
            stored = Some(0);
            break;
        }
        if w & !IMM7 == STP_FP_LR {
            stored = Some((simm7(w) * 8) as usize);
            break;
        }
        if w & SUB_MASK == SUB_SP {
            let imm = ((w >> 10) & 0xfff) as usize;
            lowered += if w & (1 << 22) != 0 { imm << 12 } else { imm };
        }
    }
    Some(record - stored? + lowered)
}

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
            if is_handler(plain(*p)) {
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
            let w = p.read_volatile();
            if is_handler(plain(w)) {
                // The function signed the trampoline's address with its
                // entry stack pointer, the call's slot: the real one goes
                // back signed alike.
                if w != plain(w) {
                    f.flags |= F_SIGNED;
                    p.write_volatile(sign(f.orig, f.slot));
                } else {
                    p.write_volatile(f.orig);
                }
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
    let signed = f.flags & F_SIGNED != 0;
    let (p, real, ours) = match f.flags & F_IN_REGISTER {
        0 if signed => (f.slot, f.orig, sign(handler, f.pad as usize)),
        0 => (f.slot, f.orig, handler),
        _ if signed => (f.pad as usize, sign(f.orig, f.slot), sign(handler, f.slot)),
        _ => (f.pad as usize, f.orig, handler),
    };
    let p = p as *mut usize;
    if p.is_null() {
        return;
    }
    // SAFETY: as the caller guarantees; the word is written only where it
    // still holds the real address put back.
    unsafe {
        if *p == real {
            *p = ours;
        }
    }
}
