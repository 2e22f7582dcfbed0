//! AArch64 trampolines, generated as machine code: the kernel's
//! `ftrace_caller` (entry sites) and `_mcount` (`-pg` sites), calling one C
//! callback `callback(ip, parent_ip, regs)`.
//!
//! # Frame
//!
//! The trampoline takes [`FRAME_SIZE`] bytes of stack (`sp` stays 16-aligned):
//!
//! | offset from `sp` | contents                                            |
//! |------------------|-----------------------------------------------------|
//! | 0 .. 264         | register frame, 8 bytes a slot (below)              |
//! | 264              | padding                                             |
//! | 272 ([`OUR_RECORD`])  | frame record `{x29, x30 = ip}` of the trampoline |
//! | 288 ([`SITE_RECORD`]) | entry family: frame record `{x29, x9}` standing for the traced function, whose prologue has not run yet |
//!
//! `x29` points at the trampoline's record while the callback runs, so a
//! frame-pointer unwinder walks callback → trampoline (`ip`, in the traced
//! function) → the traced function's caller.
//!
//! # Register frame (`regs`)
//!
//! Slot `n` (byte offset `8 * n`): `x0`..`x30` at 0..30, `sp` at
//! [`SP_SLOT`] (31), `pc` at [`PC_SLOT`] (32), all as they were when the
//! site started to run: `x30` is the traced function's return address
//! (`parent_ip`), `sp` its stack pointer at the site, `pc` the site's
//! address (entry family: the function's entry, `ip - 8`; mcount family:
//! the `bl`, `ip - 4`). For entry sites `x9` already holds `x30`'s copy.
//! With `regs == false` only `x0`..`x9` and `x29` are stored and the
//! callback gets a null pointer.
//!
//! On the way out `x0`..`x9` are reloaded from their slots (a callback
//! given `regs` may change the arguments); the other slots are read-only.
//!
//! # Return
//!
//! - Entry family: entered by the site's `bl` with `x30` = `ip` and `x9` =
//!   the function's return address. It restores `x0`..`x9` and `x29`, sets
//!   `x30 = x9` and returns with `ret x16` to `ip` (read back from its
//!   frame record), as the kernel's `ret x9` does: `ret` pairs with the
//!   site's `bl` in the return-address predictor, and needs no BTI landing
//!   pad. Only `x16` is clobbered (and the callback's own scratch,
//!   `x10`..`x18`, dead at a function's entry).
//! - Mcount family: entered by `bl` from after the prologue with `x30` =
//!   `ip`; `parent_ip` is the saved `x30` of the traced function's frame
//!   record, `[x29, #8]`, stripped of a PAC by `xpaclri`. It restores
//!   `x0`..`x9`, `x29` and `x30` and returns with `ret`, exactly as a real
//!   `_mcount` would.
//!
//! The callback's address is a literal at the end of the code, loaded with
//! `ldr x16` (position independent) and called with `blr x16`.

use super::encode::{
    add_imm, blr, ldp, ldr, ldr_literal, mov, mov_sp, reg, ret, stp, str, sub_imm, Index, BTI_C, NOP, RET,
    XPACLRI,
};
use super::Aarch64;
use crate::plan::{Family, PlanError, TrampolineSpec};

/// Slot of `sp` in the register frame.
pub const SP_SLOT: usize = 31;
/// Slot of `pc` in the register frame.
pub const PC_SLOT: usize = 32;
/// Slots in the register frame.
pub const REGS_SLOTS: usize = 33;
/// Offset of the trampoline's frame record.
pub const OUR_RECORD: i32 = 272;
/// Offset of the traced function's stand-in frame record (entry family).
pub const SITE_RECORD: i32 = 288;
/// Stack the trampoline takes.
pub const FRAME_SIZE: u32 = 304;

const fn slot(n: usize) -> i32 {
    8 * n as i32
}

/// Stores `x0`..`x9` (and with `regs` `x10`..`x29`, else `x29` alone).
fn save(words: &mut Vec<u32>, regs: bool) {
    let last = if regs { 28 } else { 8 };
    for r in (0..=last).step_by(2) {
        words.push(stp(r, r + 1, reg::SP, slot(r as usize), Index::Offset));
    }
    if !regs {
        words.push(str(reg::FP, reg::SP, slot(29), Index::Offset));
    }
}

/// Stores `parent` as `x30`, the site's `sp` and `pc` (`ip - site_len`)
/// and points `x2` at the frame; or sets `x2` to null.
fn regs_arg(words: &mut Vec<u32>, regs: bool, ip: u32, parent: u32, site_len: u32) {
    if !regs {
        words.push(mov(reg::X2, reg::XZR));
        return;
    }
    words.extend([
        str(parent, reg::SP, slot(30), Index::Offset),
        add_imm(reg::X16, reg::SP, FRAME_SIZE),
        str(reg::X16, reg::SP, slot(SP_SLOT), Index::Offset),
        sub_imm(reg::X16, ip, site_len),
        str(reg::X16, reg::SP, slot(PC_SLOT), Index::Offset),
        mov_sp(reg::X2, reg::SP),
    ]);
}

/// The trampoline for `spec`, placed at `at` (word-aligned; 16 is
/// [`crate::Patcher::trampoline_align`]).
pub(super) fn trampoline(at: u64, spec: &TrampolineSpec) -> Result<Vec<u8>, PlanError> {
    if at & 3 != 0 {
        return Err(PlanError::Unsupported(format!(
            "a trampoline at {at:#x} is not word-aligned"
        )));
    }
    let mut w = vec![BTI_C, sub_imm(reg::SP, reg::SP, FRAME_SIZE)];
    save(&mut w, spec.regs);
    match spec.family {
        Family::Entry => {
            w.extend([
                stp(reg::FP, reg::X9, reg::SP, SITE_RECORD, Index::Offset),
                add_imm(reg::FP, reg::SP, SITE_RECORD as u32),
                stp(reg::FP, reg::LR, reg::SP, OUR_RECORD, Index::Offset),
                add_imm(reg::FP, reg::SP, OUR_RECORD as u32),
                mov(reg::X0, reg::LR),
                mov(reg::X1, reg::X9),
            ]);
            regs_arg(&mut w, spec.regs, reg::X0, reg::X9, 8);
        }
        Family::Mcount => {
            w.extend([
                stp(reg::FP, reg::LR, reg::SP, OUR_RECORD, Index::Offset),
                mov(reg::X0, reg::LR),
                ldr(reg::LR, reg::FP, 8, Index::Offset),
                XPACLRI,
                mov(reg::X1, reg::LR),
                add_imm(reg::FP, reg::SP, OUR_RECORD as u32),
            ]);
            regs_arg(&mut w, spec.regs, reg::X0, reg::X1, 4);
        }
    }
    // The literal's place is known once the code's length is: leave the
    // `ldr` for later.
    let ldr_index = w.len();
    w.extend([NOP, blr(reg::X16)]);
    for r in (0..=8).step_by(2) {
        w.push(ldp(r, r + 1, reg::SP, slot(r as usize), Index::Offset));
    }
    match spec.family {
        Family::Entry => w.extend([
            ldr(reg::FP, reg::SP, slot(29), Index::Offset),
            ldr(reg::X16, reg::SP, OUR_RECORD + 8, Index::Offset),
            mov(reg::LR, reg::X9),
            add_imm(reg::SP, reg::SP, FRAME_SIZE),
            ret(reg::X16),
        ]),
        Family::Mcount => w.extend([
            ldp(reg::FP, reg::LR, reg::SP, OUR_RECORD, Index::Offset),
            add_imm(reg::SP, reg::SP, FRAME_SIZE),
            RET,
        ]),
    }
    if (at + 4 * w.len() as u64) & 7 != 0 {
        w.push(NOP);
    }
    let lit = at + 4 * w.len() as u64;
    let ldr_at = at + 4 * ldr_index as u64;
    w[ldr_index] = ldr_literal(reg::X16, ldr_at, lit).expect("literal is near");
    let mut code = Aarch64::code(&w);
    code.extend_from_slice(&spec.callback.to_le_bytes());
    debug_assert!(REGS_SLOTS * 8 <= OUR_RECORD as usize);
    Ok(code)
}
