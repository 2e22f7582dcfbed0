//! MIPS trampolines and veneers, as machine code.
//!
//! Two trampolines, after the kernel's `arch/mips/kernel/mcount.S`
//! (`ftrace_caller`, seed 004) and the `-fpatchable-function-entry` design
//! of seed 001 (`ftrace_regs_caller`), for MIPS32 o32 and MIPS64 n64 in
//! either byte order. Both call
//! `void callback(unsigned long ip, unsigned long parent_ip, unsigned long *regs)`
//! with the C calling convention of the ABI: arguments in `a0..a2`, `t9` =
//! the callback's address (a PIC callee computes `gp` from it), on o32 a
//! 16-byte argument save area at `0(sp)` and `sp` 8-aligned, on n64 `sp`
//! 16-aligned and no save area.
//!
//! # The frame
//!
//! One layout serves both families; `W` is the size of `unsigned long` (4
//! on o32, 8 on n64), so `regs[i]` in C is slot `i`:
//!
//! | | o32 | n64 |
//! |---|---|---|
//! | argument save area | `0..16` | — |
//! | `regs[0..32]`: GPR `i` at `REGS + W*i` | `16..144` | `0..256` |
//! | `regs[32]`: the pc | `144` | `256` |
//! | `$f12`, `$f14` (o32) / `$f12..$f19` (n64), 8 bytes each | `152`, `160` | `264..328` |
//! | frame size | `168` | `336` |
//!
//! `regs` points at slot 0. Always saved (and restored from the frame after
//! the callback, so a callback given `regs` may change them, as the
//! kernel's `WITH_REGS` allows): `at`, `v0` (gcc's `-pg` keeps the static
//! chain there), `v1`, the argument registers `a0..a3` (n64: `a0..a7`,
//! `$4..$11`), `t0` (the entry sites' flag: o32 `$8`, n64 `$12`), `$15`
//! (gcc's static chain register at a function's entry), `t9` (a PIC
//! function's own address at its entry), `gp`, `fp` and `ra`. With regs the
//! other GPRs are stored too (for the callback to read; they are not
//! reloaded: `s0..s7` survive the C callback by the ABI, and the remaining
//! temporaries are dead at a call), `regs[0]` = 0, `regs[29]` = the traced
//! function's `sp` (before the o32 `-pg` site's `addiu sp, sp, -8`), and
//! `regs[32]` = the pc: `ip`, the address the traced function continues at
//! (for `-pg`, the instruction after the call's delay slot; for an entry
//! site, the word after `li t0`, i.e. the site's address + 12). The pc and
//! `regs[29]` are information only: writing them changes nothing.
//!
//! Floating point: no FP register carries anything the trampoline needs,
//! but a hard-float C callback may clobber the FP argument registers of the
//! traced function, so they are saved with `sdc1` and reloaded with `ldc1`
//! (`$f12`, `$f14` on o32 — in FR=0 mode `sdc1` moves the even/odd pair —,
//! `$f12..$f19` on n64). This assumes an FPU or the kernel's FP emulator:
//! a soft-float system whose kernel has neither gets `SIGILL` from them.
//!
//! # Loading the callback
//!
//! The callback's address is built in `t9` from immediates: `lui`/`addiu`
//! when it is a sign-extended 32-bit value (always on o32; on n64 too, as
//! `addiu` computes in 32 bits and sign-extends, which `daddiu` does not
//! for `0x7fff8000..=0x7fffffff`), else the six-instruction `%highest/%higher/%hi/%lo` build (`lui`,
//! `daddiu`, `dsll 16`, `daddiu`, `dsll 16`, `daddiu`) that needs no other
//! register. No literal pool, no PC-relative load: the code does not depend
//! on where it is placed (only the entry family checks `at`'s alignment).

#![cfg_attr(not(test), allow(dead_code))] // the layout items serve the tests and the runtime

use super::encode::{reg::*, *};
use super::Mips;
use crate::plan::{Family, PlanError, TrampolineSpec};

/// Number of `regs` slots: 32 GPRs and the pc.
pub(crate) const REGS_SLOTS: usize = 33;
/// The `regs` slot holding the pc.
pub(crate) const REGS_PC: usize = 32;

/// The frame of a trampoline, in bytes from the lowered `sp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    /// Size of a `regs` slot (`sizeof(unsigned long)`).
    pub word: i16,
    /// Offset of `regs[0]`.
    pub regs: i16,
    /// Offset of the saved `$f12`.
    pub fpr: i16,
    /// The FP registers saved, from `$f12`.
    pub fprs: &'static [u32],
    /// Total size (8-aligned on o32, 16 on n64).
    pub size: i16,
}

/// The frame for `m`'s ABI.
pub(crate) const fn frame(m: &Mips) -> Frame {
    if m.n64 {
        Frame {
            word: 8,
            regs: 0,
            fpr: 264,
            fprs: &[12, 13, 14, 15, 16, 17, 18, 19],
            size: 336,
        }
    } else {
        Frame {
            word: 4,
            regs: 16,
            fpr: 152,
            fprs: &[12, 14],
            size: 168,
        }
    }
}

impl Frame {
    /// Offset of `regs[i]`.
    pub const fn slot(&self, i: usize) -> i16 {
        self.regs + self.word * i as i16
    }
}

/// The registers every trampoline saves and restores, in ascending order.
pub(crate) fn preserved(m: &Mips) -> Vec<u32> {
    let args = if m.n64 { 4..12 } else { 4..8 };
    let mut set: Vec<u32> = [AT, V0, V1].into_iter().chain(args).collect();
    set.extend([m.t0(), 15, T9, GP, FP, RA]);
    set.sort_unstable();
    set.dedup();
    set
}

/// Instruction words being laid down, with the ABI's load/store forms.
struct Asm<'a> {
    m: &'a Mips,
    f: Frame,
    w: Vec<u32>,
}

impl Asm<'_> {
    fn put(&mut self, word: u32) {
        self.w.push(word);
    }
    /// `rt = rs + imm` on pointers (`addiu` / `daddiu`).
    fn addp(&mut self, rt: u32, rs: u32, imm: i16) {
        self.put(if self.m.n64 {
            daddiu(rt, rs, imm)
        } else {
            addiu(rt, rs, imm)
        });
    }
    fn store(&mut self, r: u32, off: i16) {
        self.put(if self.m.n64 {
            sd(r, off, SP)
        } else {
            sw(r, off, SP)
        });
    }
    fn load(&mut self, r: u32, off: i16) {
        self.put(if self.m.n64 {
            ld(r, off, SP)
        } else {
            lw(r, off, SP)
        });
    }
    /// Builds `addr` in `rt` using no other register. A sign-extended
    /// 32-bit value takes `lui`/`addiu` on n64 too: `addiu` adds in 32
    /// bits and sign-extends, where `daddiu` would get
    /// `0x7fff8000..=0x7fffffff` wrong (`lui` sign-extends `%hi` = 0x8000).
    fn li_addr(&mut self, rt: u32, addr: u64) {
        if !self.m.n64 || fits_hi_lo(addr) {
            self.put(lui(rt, hi(addr)));
            self.put(addiu(rt, rt, lo(addr)));
        } else {
            let [highest, higher, hi16, lo16] = parts64(addr);
            self.put(lui(rt, highest));
            self.put(daddiu(rt, rt, higher as i16));
            self.put(dsll(rt, rt, 16));
            self.put(daddiu(rt, rt, hi16 as i16));
            self.put(dsll(rt, rt, 16));
            self.put(daddiu(rt, rt, lo16 as i16));
        }
    }
    /// Lowers `sp` and saves the preserved set and the FP argument registers.
    fn prologue(&mut self) {
        let f = self.f;
        self.addp(SP, SP, -f.size);
        for r in preserved(self.m) {
            self.store(r, f.slot(r as usize));
        }
        for (k, &fr) in f.fprs.iter().enumerate() {
            self.put(sdc1(fr, f.fpr + 8 * k as i16, SP));
        }
    }
    /// Fills the rest of `regs` and points `a2` at it. `sp_above` is what
    /// to add to `sp` to get the traced function's, `pc` holds the pc. The
    /// preserved set must have been saved (`a0` and `a2` are free).
    fn regs_frame(&mut self, sp_above: i16, pc: u32) {
        let f = self.f;
        let keep = preserved(self.m);
        for r in (0..32).filter(|r| *r != SP && !keep.contains(r)) {
            self.store(r, f.slot(r as usize));
        }
        self.addp(A0, SP, sp_above);
        self.store(A0, f.slot(SP as usize));
        self.store(pc, f.slot(REGS_PC));
        self.addp(A0 + 2, SP, f.regs);
    }
    /// Calls the callback with `a0 = ip`, `a1 = parent` (`a2` is set).
    /// Not from the delay slot: `jalr` has written `ra` when it runs.
    fn call(&mut self, callback: u64, ip: u32, parent: u32) {
        self.li_addr(T9, callback);
        self.put(move_(A0, ip));
        self.put(move_(A0 + 1, parent));
        self.put(jalr(RA, T9));
        self.put(NOP);
    }
    /// Reloads the preserved set and the FP argument registers (not `sp`).
    fn restore(&mut self) {
        let f = self.f;
        for (k, &fr) in f.fprs.iter().enumerate() {
            self.put(ldc1(fr, f.fpr + 8 * k as i16, SP));
        }
        for r in preserved(self.m) {
            self.load(r, f.slot(r as usize));
        }
    }
}

/// The trampoline of `spec.family` placed at `at`, calling `spec.callback`.
///
/// - [`Family::Mcount`] (`ftrace_caller`): entered from a `-pg` site with
///   `at` = parent_ip, `ra` = ip and, on o32, `sp` lowered by 8 by the
///   site; calls `callback(ra, at, regs or 0 as spec.regs says)`, then
///   returns like the kernel's `ftrace_stub` (`jr ra` with `move ra, at` in
///   the delay slot), after `addiu sp, sp, 8` on o32 as glibc's `_mcount`
///   does. `v1` and `t9` held `_mcount`'s address: they are restored anyway.
/// - [`Family::Entry`] (`ftrace_regs_caller`): entered from
///   `lui at, %hi(tramp); jalr at, at; li t0, 0|1` with `at` = ip, `ra` =
///   parent_ip, `sp` untouched; calls `callback(at, ra, t0 == 0 ? regs : 0)`
///   (`spec.regs` is ignored: the site chooses), restores everything and
///   returns with `jr at`. `at` must be 64 KB-aligned and a sign-extended
///   32-bit address, for `lui` alone builds it.
pub(super) fn trampoline(m: &Mips, at: u64, spec: &TrampolineSpec) -> Result<Vec<u8>, PlanError> {
    if !m.n64 && spec.callback > u32::MAX as u64 {
        return Err(PlanError::Unsupported(format!(
            "callback {:#x} is not a 32-bit address",
            spec.callback
        )));
    }
    if spec.callback & 3 != 0 {
        return Err(PlanError::Unsupported(format!(
            "callback {:#x} is not word-aligned",
            spec.callback
        )));
    }
    let f = frame(m);
    let mut a = Asm {
        m,
        f,
        w: Vec::with_capacity(128),
    };
    match spec.family {
        Family::Mcount => {
            // The -pg site's `addiu sp, sp, -8` (o32) is below our frame.
            let site_adjust = if m.n64 { 0 } else { 8 };
            a.prologue();
            if spec.regs {
                a.regs_frame(f.size + site_adjust, RA);
            } else {
                a.put(move_(A0 + 2, ZERO));
            }
            a.call(spec.callback, RA, AT);
            a.restore();
            a.addp(SP, SP, f.size + site_adjust);
            a.put(jr(RA));
            a.put(move_(RA, AT));
        }
        Family::Entry => {
            if at & 0xffff != 0 || !fits_hi_lo(at) || (!m.n64 && at > u32::MAX as u64) {
                return Err(PlanError::Unsupported(format!(
                    "an entry trampoline must be at a 64 KB-aligned 32-bit address, not {at:#x}"
                )));
            }
            a.prologue();
            // t0 != 0: no regs. The delay slot runs either way.
            let branch = a.w.len();
            a.put(NOP);
            a.put(move_(A0 + 2, ZERO));
            a.regs_frame(f.size, AT);
            let skip = (a.w.len() - branch - 1) as i16;
            a.w[branch] = bne(m.t0(), ZERO, skip);
            a.call(spec.callback, AT, RA);
            a.restore();
            a.addp(SP, SP, f.size);
            a.put(jr(AT));
            a.put(NOP);
        }
    }
    Ok(m.code(&a.w))
}

/// Length of a veneer: 4 instructions on o32, 8 on n64.
pub(super) fn veneer_len(m: &Mips) -> usize {
    if m.n64 {
        32
    } else {
        16
    }
}

/// A veneer at `at` that jumps to `to`, changing only `v1` (which `-pg`
/// sites already clobber, and no function takes at its entry): `to` is
/// built in `v1` (`lui`/`addiu`, or on n64 the six-instruction 64-bit
/// build), then `jr v1; nop`, padded with `nop`s to
/// [`veneer_len`]. Reached by `jal`, by `jalr v1` or (64 KB-aligned) by an
/// entry site's `jalr at, at`: `ra`, `at`, `sp` and the arguments arrive
/// intact at `to`. `at` is not used: the code is the same anywhere.
pub(super) fn veneer(m: &Mips, at: u64, to: u64) -> Result<Vec<u8>, PlanError> {
    let _ = at;
    if to & 3 != 0 || (!m.n64 && to > u32::MAX as u64) {
        return Err(PlanError::Unsupported(format!("a veneer cannot jump to {to:#x}")));
    }
    let mut a = Asm {
        m,
        f: frame(m),
        w: Vec::with_capacity(8),
    };
    a.li_addr(V1, to);
    a.put(jr(V1));
    a.put(NOP);
    a.w.resize(veneer_len(m) / 4, NOP);
    Ok(m.code(&a.w))
}

#[cfg(test)]
mod tests;
