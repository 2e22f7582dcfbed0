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
//! address is signed with the same modifier, the entry stack pointer read
//! from the prologue and checked against what the record holds
//! ([`hijacked_word`]). A signature is 7 bits under a 48-bit address
//! space: once in 128 it is all zero, and a signed address equals the
//! plain one. So whether a function signs is read from its code, and an
//! entry site's function is given an entry of the trampoline whose
//! signatures (keys A and B) are not zero and differ ([`entry_for`]): the
//! word found later says then whether, and with which key, it signed.
//! Signing uses the hint-space instructions (`PACIA1716`, `PACIB1716`,
//! `XPACLRI`): on a CPU without pointer authentication they do nothing,
//! and nothing is signed.

use super::thread::Frame;

/// The frame's return address was in a register at entry (AArch64 entry
/// sites): `Frame::slot` is the call's stack pointer, not a word.
pub const F_IN_REGISTER: u32 = 64;

/// The frame's return address is signed (pointer authentication): with
/// the modifier `Frame::pad` (a `-pg` frame record), or with the call's
/// stack pointer, its slot (an entry site's).
pub const F_SIGNED: u32 = 128;

/// With [`F_SIGNED`]: signed with key B (`pacibsp`), not A.
pub const F_KEY_B: u32 = 256;

/// How many instructions before a `-pg` site its function's prologue is
/// looked for, and the end of the code before it (`retslot::prologue`).
const MAX_PROLOGUE: usize = 64;

/// `v` without a pointer authentication code.
#[inline]
pub fn plain(v: usize) -> usize {
    #[cfg(target_arch = "aarch64")]
    return crate::sys::strip_pac(v);
    #[cfg(not(target_arch = "aarch64"))]
    v
}

/// `v` signed with `modifier` and key A (`key_b`: B); the identity off
/// AArch64, where nothing is.
#[inline]
fn sign_with(v: usize, modifier: usize, key_b: bool) -> usize {
    #[cfg(target_arch = "aarch64")]
    return crate::sys::sign_pac(v, modifier, key_b);
    #[cfg(not(target_arch = "aarch64"))]
    {
        let _ = (modifier, key_b);
        v
    }
}

/// `v` signed as frame flags `flags` say ([`F_KEY_B`]) with `modifier`.
#[inline]
fn sign(v: usize, modifier: usize, flags: u32) -> usize {
    sign_with(v, modifier, flags & F_KEY_B != 0)
}

/// Whether return addresses may be signed here: on AArch64 with pointer
/// authentication (elsewhere, and without it, nothing is signed).
#[inline]
fn signing() -> bool {
    #[cfg(target_arch = "aarch64")]
    return crate::sys::has_pac();
    #[cfg(not(target_arch = "aarch64"))]
    false
}

/// The entry into the return trampoline `handler` to give a call whose
/// function may sign its return address with `modifier` itself, with key A
/// or B: one that differs from itself signed with either key, whose two
/// signatures differ too, so that the word found later says whether and
/// how the function signed it (a signature of 7 bits is all zero once in
/// 128, and a signed address then equals the plain one; two keys' agree
/// as often). The trampoline has
/// [`RETURN_ENTRIES`](super::asm::RETURN_ENTRIES) entries, 4 bytes apart:
/// the NOPs before it fall into it. `None` if every one is ambiguous.
fn entry_for(handler: usize, modifier: usize) -> Option<usize> {
    if !signing() {
        return Some(handler);
    }
    // Either key: the function's code does not say which it uses, so the
    // entry signed with A, signed with B and plain must be three words.
    (0..super::asm::RETURN_ENTRIES)
        .map(|i| handler - 4 * i)
        .find(|&h| {
            let (a, b) = (sign_with(h, modifier, false), sign_with(h, modifier, true));
            a != h && b != h && a != b
        })
}

/// What to write in place of `f.orig` so that the call returns into
/// `handler`: an entry of it, or where `f.orig` is signed, one signed the
/// same way (the modifier kept in `f.pad`, [`F_SIGNED`] set). `ip` is the
/// site's return address. `None` where how the function signs is not
/// known for certain: the frame is then not hijacked.
///
/// Whether an address is signed is read from the code, never from the
/// value alone: a signed address equals the plain one once in 128.
pub fn hijacked_word(f: &mut Frame, handler: usize, ip: usize) -> Option<usize> {
    if !signing() {
        return Some(handler);
    }
    if f.flags & F_IN_REGISTER != 0 {
        // An entry site: the function signs `x30` itself after the site
        // (at its start, or later on the paths that save it when
        // shrink-wrapped), with the stack pointer it was entered with.
        return entry_for(handler, f.slot);
    }
    // A `-pg` frame record, stored after `paciasp` signed the return
    // address with the stack pointer at the function's entry, which the
    // prologue then lowered. The prologue says how; the value checks it.
    let bare = plain(f.orig);
    match prologue(ip, f.slot - 8) {
        Prologue::Signs(sp, key_b) if sign_with(bare, sp, key_b) == f.orig => {
            f.pad = sp as u64;
            f.flags |= F_SIGNED | if key_b { F_KEY_B } else { 0 };
            Some(sign_with(handler, sp, key_b))
        }
        Prologue::Plain if bare == f.orig => Some(handler),
        _ => None,
    }
}

/// How a function with a `-pg` site signs its return address.
#[derive(Debug, PartialEq)]
enum Prologue {
    /// With `paciasp` (key B: `pacibsp`), entered with this stack pointer.
    Signs(usize, bool),
    /// Not at all: no signing instruction in its prologue.
    Plain,
    /// Not known: a prologue of another form.
    Unknown,
}

/// How the function whose `-pg` site returns to `ip`, and whose frame
/// record is at `record`, signs: read back from the site. The record's
/// store is `stp x29, x30, [sp, #-N]!` (the record is N below the entry
/// stack pointer) or `stp x29, x30, [sp, #M]` after `sub sp, sp, #N`
/// (once or twice); `paciasp` right before them signs. No signing
/// instruction between there and the end of the code before the function
/// (a return or branch, at most [`MAX_PROLOGUE`] words back): plain.
fn prologue(ip: usize, record: usize) -> Prologue {
    const PACIASP: u32 = 0xd503_233f;
    const PACIBSP: u32 = 0xd503_237f;
    const STP_FP_LR_PRE: u32 = 0xa980_7bfd; // stp x29, x30, [sp, #imm]!
    const STP_FP_LR: u32 = 0xa900_7bfd; // stp x29, x30, [sp, #imm]
    const IMM7: u32 = 0x7f << 15;
    const SUB_SP: u32 = 0xd100_03ff; // sub sp, sp, #imm12 {, lsl #12}
    const SUB_MASK: u32 = !((1 << 22) | (0xfff << 10));
    let mut code = CodeBefore::new(ip);
    // Where the code before the function ends: `ret`, `retaa`/`retab`,
    // `br`, `b` (a tail call), or zeros (`udf`, padding).
    let ends = |w: u32| {
        w & 0xffff_fc1f == 0xd65f_0000
            || w & 0xffff_fc1f == 0xd61f_0000
            || w & 0xffff_fbff == 0xd65f_0bff
            || w & 0xfc00_0000 == 0x1400_0000
            || w == 0
    };
    let simm7 = |w: u32| (((w >> 15) & 0x7f) as i32) << 25 >> 25;
    // The record's store, back from the site (within the function: no
    // end of code before it, every word readable).
    let mut i = 2;
    let store = loop {
        match code.word(i) {
            Some(w) if w & !IMM7 == STP_FP_LR_PRE || w & !IMM7 == STP_FP_LR => break w,
            Some(w) if !ends(w) => i += 1,
            _ => return Prologue::Unknown,
        }
    };
    let (mut lowered, stored) = if store & !IMM7 == STP_FP_LR_PRE {
        ((-(simm7(store) * 8)) as usize, 0)
    } else {
        (0, (simm7(store) * 8) as usize)
    };
    // Then `sub sp` (before an offset store only), then the first word of
    // the prologue.
    let mut before = code.word(i + 1);
    i += 1;
    while let Some(w) = before.filter(|w| w & SUB_MASK == SUB_SP && store & !IMM7 == STP_FP_LR) {
        let imm = ((w >> 10) & 0xfff) as usize;
        lowered += if w & (1 << 22) != 0 { imm << 12 } else { imm };
        before = code.word(i + 1);
        i += 1;
    }
    if let Some(w @ (PACIASP | PACIBSP)) = before {
        return Prologue::Signs(record - stored + lowered, w == PACIBSP);
    }
    // No signing right before: plain if none is found back to the end of
    // the code before the function.
    while let Some(w) = before {
        match w {
            PACIASP | PACIBSP => return Prologue::Unknown,
            w if ends(w) => return Prologue::Plain,
            _ => {}
        }
        before = code.word(i + 1);
        i += 1;
    }
    Prologue::Unknown
}

/// The code before `ip`, the return address of a site, read word by word
/// as the scan asks: [`CodeBefore::word`]`(i)` is the word `4 * i` bytes
/// before it. Words in the page of the site's call are read directly (a
/// few per call, on the traced call's path); the words before that page,
/// which may not be mapped, through the kernel, once and only if the scan
/// reaches them.
struct CodeBefore {
    ip: usize,
    /// Start of the site's page.
    page: usize,
    /// The [`MAX_PROLOGUE`] words' bytes before `page`, once read (`None`
    /// inside if unreadable).
    before: Option<Option<[u8; 4 * MAX_PROLOGUE]>>,
}

impl CodeBefore {
    fn new(ip: usize) -> CodeBefore {
        const PAGE: usize = 4096; // the smallest: a boundary of every page size
        CodeBefore {
            ip,
            page: (ip - 4) & !(PAGE - 1),
            before: None,
        }
    }

    /// The word `4 * i` bytes before the site's return address, or `None`
    /// if unreadable or more than [`MAX_PROLOGUE`] words back.
    fn word(&mut self, i: usize) -> Option<u32> {
        if i > MAX_PROLOGUE {
            return None;
        }
        let at = self.ip - 4 * i;
        if at >= self.page {
            // SAFETY: the site's own page: `ip - 4` holds its call
            // instruction, and every word from the page's start to it is
            // mapped alike.
            return Some(unsafe { (at as *const u32).read_volatile() });
        }
        // `at` lies below the page by less than MAX_PROLOGUE words (`ip - 4`
        // is in it), so at or above `lo`.
        let lo = self.page - 4 * MAX_PROLOGUE;
        let bytes = self.before.get_or_insert_with(|| {
            let mut bytes = [0u8; 4 * MAX_PROLOGUE];
            (crate::sys::read_memory(lo, &mut bytes) == bytes.len()).then_some(bytes)
        });
        let b = bytes.as_ref()?.get(at - lo..at - lo + 4)?;
        Some(u32::from_ne_bytes(b.try_into().ok()?))
    }
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
                // The function signed the trampoline's entry with its
                // entry stack pointer, the call's slot, and key A or B, or
                // did not (the entry differs from itself signed either
                // way: `entry_for`): the real address goes back alike.
                // Signed otherwise, it is left.
                let bare = plain(w);
                let how = if w == bare {
                    0
                } else if sign_with(bare, f.slot, false) == w {
                    F_SIGNED
                } else if sign_with(bare, f.slot, true) == w {
                    F_SIGNED | F_KEY_B
                } else {
                    at += 8;
                    continue;
                };
                f.flags |= how;
                p.write_volatile(if how == 0 {
                    f.orig
                } else {
                    sign(f.orig, f.slot, how)
                });
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
        0 if signed => (f.slot, f.orig, sign(handler, f.pad as usize, f.flags)),
        0 => (f.slot, f.orig, handler),
        _ => {
            let Some(entry) = entry_for(handler, f.slot) else {
                return;
            };
            match signed {
                true => (
                    f.pad as usize,
                    sign(f.orig, f.slot, f.flags),
                    sign(entry, f.slot, f.flags),
                ),
                false => (f.pad as usize, f.orig, entry),
            }
        }
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
