//! What AArch64 sites look like, for discovery.
//!
//! The forms, as gcc 12 emits them (see `docs/SITES.md`):
//! - `-fpatchable-function-entry=N[,M]`: N `nop`s (`d503201f`), after a
//!   `bti c` with `-mbranch-protection`;
//! - `-pg`: `mov x0, x30; bl _mcount` after the prologue; the site is the
//!   `bl` (through the PLT in dynamic executables).

use super::encode::{br, decode_bl, hint, reg, BTI_C, NOP};
use super::Aarch64;
use crate::isa::{Call, CallTarget, Isa, PointerReloc, RelocCall, SledKind};

/// `R_AARCH64_ABS64`: `S + A`, 64 bits.
pub const R_AARCH64_ABS64: u32 = 257;
/// `R_AARCH64_PREL64`: `S + A - P`, 64 bits.
pub const R_AARCH64_PREL64: u32 = 260;
/// `R_AARCH64_CALL26`: the target of `bl`.
pub const R_AARCH64_CALL26: u32 = 283;
/// `R_AARCH64_RELATIVE`: `B + A`.
pub const R_AARCH64_RELATIVE: u32 = 1027;

/// `bti jc`, the other landing pad a call may reach (`bti c` is
/// [`BTI_C`]).
const BTI_JC: u32 = hint(38);
/// `br x17`, the PLT's jump.
const BR_X17: u32 = br(reg::X17);

/// `bl` at `at`: its target.
fn bl_target(at: u64, word: u32) -> Option<u64> {
    decode_bl(word, at)
}

/// `adrp x16, page` at `at`: the page.
fn adrp_x16(at: u64, word: u32) -> Option<u64> {
    if word & 0x9f00_001f != 0x9000_0010 {
        return None;
    }
    let immlo = (word >> 29) & 3;
    let immhi = (word >> 5) & 0x7_ffff;
    // 21 bits, sign-extended, in pages.
    let imm = (((immhi << 2 | immlo) << 11) as i32 >> 11) as i64;
    Some((at & !0xfff).wrapping_add((imm << 12) as u64))
}

/// `ldr x17, [x16, #off]`: the offset.
fn ldr_x17_x16(word: u32) -> Option<u64> {
    (word & 0xffc0_03ff == 0xf940_0211).then(|| u64::from((word >> 10) & 0xfff) * 8)
}

/// `add x16, x16, #imm`.
fn is_add_x16(word: u32) -> bool {
    word & 0xffc0_03ff == 0x9100_0210
}

fn words(code: &[u8]) -> impl Iterator<Item = u32> + '_ {
    code.chunks_exact(4).filter_map(Aarch64::word)
}

impl Isa for Aarch64 {
    fn name(&self) -> &'static str {
        "aarch64"
    }

    fn pointer_size(&self) -> usize {
        8
    }

    fn decode_call(&self, code: &[u8], addr: u64) -> Option<Call> {
        let target = bl_target(addr, Aarch64::word(code)?)?;
        Some(Call {
            len: 4,
            target: CallTarget::Direct(target),
        })
    }

    fn for_each_call(&self, code: &[u8], addr: u64, found: &mut dyn FnMut(u64, Call)) {
        for (i, chunk) in code.chunks_exact(4).enumerate() {
            let at = addr.wrapping_add(4 * i as u64);
            if let Some(call) = self.decode_call(chunk, at) {
                found(at, call);
            }
        }
    }

    fn nop_run(&self, code: &[u8], max_bytes: usize) -> (usize, usize) {
        let count = words(&code[..code.len().min(max_bytes)])
            .take_while(|&w| w == NOP)
            .count();
        (count, 4 * count)
    }

    fn landing_pad_len(&self, code: &[u8]) -> usize {
        match Aarch64::word(code) {
            Some(BTI_C | BTI_JC) => 4,
            _ => 0,
        }
    }

    /// GNU ld's PLT entries: `[bti c;] adrp x16, page; ldr x17, [x16,
    /// #off]; add x16, x16, #off; br x17`, jumping through `page + off`.
    fn for_each_plt_stub(&self, code: &[u8], addr: u64, found: &mut dyn FnMut(u64, u64)) {
        let w: Vec<u32> = words(code).collect();
        let at = |i: usize| addr.wrapping_add(4 * i as u64);
        let mut i = 0;
        while i + 4 <= w.len() {
            let slot = adrp_x16(at(i), w[i]).and_then(|page| {
                let off = ldr_x17_x16(w[i + 1])?;
                (is_add_x16(w[i + 2]) && w[i + 3] == BR_X17).then(|| page.wrapping_add(off))
            });
            match slot {
                Some(slot) => {
                    let pad = i > 0 && w[i - 1] == BTI_C;
                    found(at(if pad { i - 1 } else { i }), slot);
                    i += 4;
                }
                None => i += 1,
            }
        }
    }

    fn xray_sled(&self, _kind: SledKind, _code: &[u8]) -> Result<usize, String> {
        Err("no XRay sleds on aarch64".into())
    }

    /// `R_AARCH64_CALL26` on a `bl`: the call is the `bl` (`JUMP26` marks a
    /// `b`, a tail call, never a profiling call).
    fn reloc_call(&self, r_type: u32, r_offset: u64, section: &[u8]) -> Option<RelocCall> {
        if r_type != R_AARCH64_CALL26 {
            return None;
        }
        let start = usize::try_from(r_offset).ok()?;
        let word = Aarch64::word(section.get(start..)?)?;
        bl_target(r_offset, word)?;
        Some(RelocCall {
            offset: r_offset,
            len: 4,
        })
    }

    fn pointer_reloc(&self, r_type: u32) -> Option<PointerReloc> {
        match r_type {
            R_AARCH64_ABS64 => Some(PointerReloc::Absolute),
            R_AARCH64_PREL64 => Some(PointerReloc::PcRelative),
            R_AARCH64_RELATIVE => Some(PointerReloc::Relative),
            _ => None,
        }
    }

    fn absolute_pointer_reloc(&self) -> (u32, bool) {
        (R_AARCH64_ABS64, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aarch64::AARCH64;

    #[test]
    fn calls() {
        // `bl 790 <_mcount@plt>` at 0x7e0, as GNU ld wrote it.
        let code = Aarch64::code(&[0xaa1e_03e0, 0x97ff_ffec, NOP]);
        let mut found = Vec::new();
        AARCH64.for_each_call(&code, 0x7dc, &mut |a, c| found.push((a, c)));
        let call = Call {
            len: 4,
            target: CallTarget::Direct(0x790),
        };
        assert_eq!(found, [(0x7e0, call)]);
        assert_eq!(AARCH64.decode_call(&code[4..], 0x7e0), Some(call));
        assert_eq!(AARCH64.decode_call(&code[4..7], 0x7e0), None);
        // Forward: `bl 0x1000` at 0.
        let fwd = Aarch64::code(&[0x9400_0400]);
        assert_eq!(
            AARCH64.decode_call(&fwd, 0).map(|c| c.target),
            Some(CallTarget::Direct(0x1000))
        );
    }

    #[test]
    fn plt_and_pads() {
        // _mcount@plt at 0x790: adrp x16, 0x20000; ldr x17, [x16, #56]; ...
        let plt = Aarch64::code(&[0x9000_0110, 0xf940_1e11, 0x9100_e210, BR_X17]);
        let mut stubs = Vec::new();
        AARCH64.for_each_plt_stub(&plt, 0x790, &mut |s, slot| stubs.push((s, slot)));
        assert_eq!(stubs, [(0x790, 0x20038)]);
        let entry = Aarch64::code(&[BTI_C, NOP, NOP, 0x1100_0400]);
        assert_eq!(AARCH64.landing_pad_len(&entry), 4);
        assert_eq!(AARCH64.nop_run(&entry[4..], 128), (2, 8));
        assert_eq!(AARCH64.nop_run(&entry, 128), (0, 0));
    }

    #[test]
    fn relocations() {
        let code = Aarch64::code(&[0xaa1e_03e0, 0x9400_0000]);
        let expect = Some(RelocCall { offset: 4, len: 4 });
        assert_eq!(AARCH64.reloc_call(R_AARCH64_CALL26, 4, &code), expect);
        assert_eq!(AARCH64.reloc_call(R_AARCH64_CALL26, 0, &code), None);
        assert_eq!(AARCH64.reloc_call(R_AARCH64_CALL26, 8, &code), None);
        assert_eq!(AARCH64.reloc_call(R_AARCH64_ABS64, 4, &code), None);
    }
}
