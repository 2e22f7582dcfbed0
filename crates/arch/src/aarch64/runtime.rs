//! The verbs the runtime uses on AArch64 ([`BreakpointPatcher`]): sites
//! switched by rewriting one aligned instruction word, as the kernel's
//! arm64 ftrace does — no breakpoint is ever needed.
//!
//! Entry sites (`-fpatchable-function-entry=2`) are made `mov x9, x30;
//! nop` once, while nothing runs them (the kernel's `ftrace_init_nop`);
//! from then on only their second word changes, `nop` ↔ `bl slot`. A
//! `-pg` site is one word, `nop` ↔ `bl slot`. `B`, `BL` and `NOP` are
//! among the instructions the architecture lets one thread rewrite while
//! another runs them (concurrent modification and execution), so a plan is
//! one phase per word: word 0 (which only the conversion changes; a rewrite
//! that keeps it stores the same value), then word 1.

use super::encode::{bl, br, ldr_literal, reg, NOP};
use super::plan::{ENTRY_SITE_LEN, MCOUNT_SITE_LEN, MOV_X9_LR};
use super::Aarch64;
use crate::patch::{BreakpointPatcher, Code, PatchError, Resume, Shape, SlotLayout};
use crate::plan::Write;

/// `udf #0`: padding that traps if ever run.
const UDF: u32 = 0;

impl Aarch64 {
    /// The word of a site of `len` bytes that holds its call.
    fn call_at(addr: u64, len: usize) -> u64 {
        addr + len as u64 - 4
    }
}

impl BreakpointPatcher for Aarch64 {
    #[inline]
    fn phases(&self) -> usize {
        2
    }

    #[inline]
    fn phase(&self, addr: u64, new: &Code, phase: usize) -> Option<Write> {
        let bytes = new.as_slice().get(4 * phase..4 * phase + 4)?;
        Some(Write {
            addr: addr + 4 * phase as u64,
            bytes: Code::new(bytes)?,
        })
    }

    fn phase_masked(&self, addr: u64, _old: &Code, new: &Code, _starts: u8, phase: usize) -> Option<Write> {
        // Every instruction is one word: a word's start is the only place
        // a thread can resume, and each word is written whole.
        self.phase(addr, new, phase)
    }

    fn make_bare(&self, _: Shape, _: u64, _: &Code, _: Option<u64>) -> Result<Code, PatchError> {
        Err(PatchError::Shape)
    }

    #[inline]
    fn make_nop(&self, shape: Shape, len: usize) -> Result<Code, PatchError> {
        let words: &[u32] = match (shape, len) {
            (Shape::Inline, ENTRY_SITE_LEN) => &[MOV_X9_LR, NOP],
            (Shape::Inline, MCOUNT_SITE_LEN) => &[NOP],
            (Shape::Bare { .. }, _) => return Err(PatchError::Shape),
            _ => return Err(PatchError::Length(len)),
        };
        Code::new(&Aarch64::code(words)).ok_or(PatchError::Length(len))
    }

    #[inline]
    fn call_fits(&self, shape: Shape, len: usize) -> bool {
        shape == Shape::Inline && (len == ENTRY_SITE_LEN || len == MCOUNT_SITE_LEN)
    }

    #[inline]
    fn make_call(&self, shape: Shape, addr: u64, len: usize, target: u64) -> Result<Code, PatchError> {
        if !self.call_fits(shape, len) {
            return Err(PatchError::Length(len));
        }
        let from = Aarch64::call_at(addr, len);
        let call = bl(from, target).ok_or(PatchError::Reach { from, to: target })?;
        let words: &[u32] = if len == ENTRY_SITE_LEN {
            &[MOV_X9_LR, call]
        } else {
            &[call]
        };
        Code::new(&Aarch64::code(words)).ok_or(PatchError::Length(len))
    }

    #[inline]
    fn return_address(&self, _: Shape, addr: u64, len: usize) -> u64 {
        addr + len as u64
    }

    fn resume(&self, shape: Shape, addr: u64, len: usize, target: Option<u64>) -> Resume {
        // Never asked: no site ever holds a breakpoint. The effect of the
        // new form, for completeness.
        match target {
            Some(target) => Resume::Call {
                target,
                ret: self.return_address(shape, addr, len),
            },
            None => Resume::At(addr + len as u64),
        }
    }

    fn reaches(&self, from: u64, to: u64) -> bool {
        bl(from, to).is_some()
    }

    fn slot_layout(&self) -> SlotLayout {
        // 0: ldr x16, data; 4: ldr x17, target; 8: br x17; 12: udf;
        // 16: data word; 24: target word. x16 and x17 are the registers the
        // ABI gives veneers: free at a function's entry and at a call.
        let words = [
            ldr_literal(reg::X16, 0, 16).expect("near"),
            ldr_literal(reg::X17, 4, 24).expect("near"),
            br(reg::X17),
            UDF,
        ];
        SlotLayout {
            code: Aarch64::code(&words),
            data: 16,
            target: 24,
            size: 32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(code: &Code) -> Vec<u32> {
        code.chunks(4).map(|w| Aarch64::word(w).unwrap()).collect()
    }

    #[test]
    fn entry_site_forms() {
        let p = Aarch64;
        let at = 0x40_0000;
        assert_eq!(words(&p.make_nop(Shape::Inline, 8).unwrap()), [MOV_X9_LR, NOP]);
        let on = p.make_call(Shape::Inline, at, 8, at + 0x1000).unwrap();
        assert_eq!(words(&on), [MOV_X9_LR, bl(at + 4, at + 0x1000).unwrap()]);
        assert_eq!(p.return_address(Shape::Inline, at, 8), at + 8);
        // Far: beyond BL's ±128 MB.
        assert!(matches!(
            p.make_call(Shape::Inline, at, 8, at + (1 << 28)),
            Err(PatchError::Reach { from, .. }) if from == at + 4
        ));
        // One phase per word, each a whole aligned word.
        let w0 = p.phase(at, &on, 0).unwrap();
        let w1 = p.phase(at, &on, 1).unwrap();
        assert_eq!((w0.addr, w0.bytes.len()), (at, 4));
        assert_eq!((w1.addr, w1.bytes.len()), (at + 4, 4));
        assert_eq!(Aarch64::word(&w1.bytes), Some(words(&on)[1]));
        assert!(p.phase(at, &on, 2).is_none());
    }

    #[test]
    fn mcount_site_forms() {
        let p = Aarch64;
        let at = 0x40_0010;
        assert_eq!(words(&p.make_nop(Shape::Inline, 4).unwrap()), [NOP]);
        let on = p.make_call(Shape::Inline, at, 4, at - 0x100).unwrap();
        assert_eq!(words(&on), [bl(at, at - 0x100).unwrap()]);
        assert!(p.phase(at, &on, 1).is_none());
        assert!(p.make_nop(Shape::Inline, 12).is_err());
        assert!(!p.call_fits(Shape::ReturnSled, 8));
    }

    #[test]
    fn slot_loads_its_words() {
        let layout = Aarch64.slot_layout();
        assert_eq!(layout.code.len(), 16);
        let w: Vec<u32> = layout.code.chunks(4).map(|w| Aarch64::word(w).unwrap()).collect();
        assert_eq!(w[0], ldr_literal(reg::X16, 0, layout.data as u64).unwrap());
        assert_eq!(w[1], ldr_literal(reg::X17, 4, layout.target as u64).unwrap());
        assert_eq!(w[2], br(reg::X17));
    }
}
