//! What MIPS sites look like, for discovery.
//!
//! A "call" here is a whole `-pg` sequence, from its first instruction
//! through the delay slot of its call, because that is what a site is on
//! MIPS (see `docs/SITES.md`). The forms, as gcc 12 and GNU as emit them:
//! - non-PIC: `move at, ra; jal _mcount; <delay>`;
//! - PIC (abicalls): `move at, ra; [addiu sp, sp, -8;] lw/ld t9,
//!   %call16(_mcount)(gp); jalr t9; <delay>`;
//! - `-mlong-calls`: the address built in a register (`lui; addiu` on o32,
//!   `lui; lui; daddiu; daddiu; dsll32; daddu` on n64), then `move at, ra;
//!   jalr reg; <delay>`.
//!
//! The delay slot is `addiu sp, sp, -8` on o32 (which `_mcount` undoes) or a
//! `nop`; the stack adjustment appears once, before the call or in its
//! delay slot. Plain calls that no `move at, ra` prepares are not reported:
//! nothing in fntrace patches them.

use super::encode::{
    daddu, dsll32, is_bal, is_jal, is_move, jal_target, jalr_ra, jr, opcode, r_fields, reg, sp_adjust, NOP,
};
use super::Mips;
use crate::isa::{Call, CallTarget, Isa, PointerReloc, RelocCall, SledKind};

/// `R_MIPS_32`: `S + A`, 32 bits.
pub const R_MIPS_32: u32 = 2;
/// `R_MIPS_REL32`: `B + A` for local targets (dynamic relocations).
pub const R_MIPS_REL32: u32 = 3;
/// `R_MIPS_26`: the target field of `jal`/`j`.
pub const R_MIPS_26: u32 = 4;
/// `R_MIPS_HI16`.
pub const R_MIPS_HI16: u32 = 5;
/// `R_MIPS_LO16`.
pub const R_MIPS_LO16: u32 = 6;
/// `R_MIPS_CALL16`: the GOT offset of a call's target (`lw t9, ...(gp)`).
pub const R_MIPS_CALL16: u32 = 11;
/// `R_MIPS_64`: `S + A`, 64 bits.
pub const R_MIPS_64: u32 = 18;
/// `R_MIPS_GOT_DISP`.
pub const R_MIPS_GOT_DISP: u32 = 19;
/// `R_MIPS_HIGHER`.
pub const R_MIPS_HIGHER: u32 = 28;
/// `R_MIPS_HIGHEST`.
pub const R_MIPS_HIGHEST: u32 = 29;
/// `R_MIPS_JALR`: the hint on a `jalr t9` naming its target.
pub const R_MIPS_JALR: u32 = 37;

/// The longest `-pg` sequence, in instructions (n64 `-mlong-calls`).
const MAX_SEQUENCE: usize = 9;

/// The 16-bit immediate of an I-format word, sign-extended.
fn simm(word: u32) -> i64 {
    i64::from(word as u16 as i16)
}

fn rs(word: u32) -> u32 {
    r_fields(word).0
}

fn rt(word: u32) -> u32 {
    r_fields(word).1
}

/// `lui rt, imm`: `(rt, imm << 16 sign-extended)`.
fn lui(word: u32) -> Option<(u32, i64)> {
    (opcode(word) == 0x0f && rs(word) == 0).then(|| (rt(word), i64::from((word << 16) as i32)))
}

/// `addiu`/`daddiu r, r, imm`: the immediate.
fn add_imm(word: u32, r: u32, double: bool) -> Option<i64> {
    let ok = match opcode(word) {
        0x09 => true,
        0x19 => double,
        _ => false,
    };
    (ok && rs(word) == r && rt(word) == r).then(|| simm(word))
}

/// `lw`/`ld t9, off(gp)`: the offset.
fn t9_load(word: u32) -> Option<i64> {
    let op = opcode(word);
    ((op == 0x23 || op == 0x37) && rs(word) == reg::GP && rt(word) == reg::T9).then(|| simm(word))
}

/// `bal off` (`bgezal zero, off`) at `at`: its target.
fn bal_target(at: u64, word: u32) -> Option<u64> {
    is_bal(word).then(|| at.wrapping_add(4).wrapping_add((simm(word) << 2) as u64))
}

/// `dsll32 r, r, 0`.
fn is_dsll32(word: u32, r: u32) -> bool {
    word == dsll32(r, r, 0)
}

/// `daddu r, r, s`.
fn is_daddu(word: u32, r: u32, s: u32) -> bool {
    word == daddu(r, r, s)
}

impl Mips {
    /// An address built in a register at `w[0..]` (`-mlong-calls`):
    /// `(instructions, register, value)`.
    fn build(&self, w: &[u32]) -> Option<(usize, u32, u64)> {
        let (r, high) = lui(*w.first()?)?;
        // n64: lui r, %highest; lui s, %hi; daddiu r, r, %higher;
        // daddiu s, s, %lo; dsll32 r, r, 0; daddu r, r, s.
        if let (Some(&w1), Some(&w2), Some(&w3), Some(&w4), Some(&w5)) =
            (w.get(1), w.get(2), w.get(3), w.get(4), w.get(5))
        {
            if let Some((s, hi)) = lui(w1).filter(|&(s, _)| s != r && s != 0) {
                if let (Some(higher), Some(lo), true, true) = (
                    add_imm(w2, r, true),
                    add_imm(w3, s, true),
                    is_dsll32(w4, r),
                    is_daddu(w5, r, s),
                ) {
                    let upper = high.wrapping_add(higher).wrapping_shl(32);
                    let value = upper.wrapping_add(hi.wrapping_add(lo));
                    return Some((6, r, value as u64));
                }
            }
        }
        // lui r, %hi; addiu r, r, %lo.
        let lo = add_imm(*w.get(1)?, r, self.n64)?;
        let value = high.wrapping_add(lo);
        let value = if self.n64 {
            value as u64
        } else {
            u64::from(value as u32)
        };
        Some((2, r, value))
    }

    /// The `-pg` sequence that starts at `w[0]` (located at `addr`):
    /// `(instructions, target)`.
    fn sequence(&self, w: &[u32], addr: u64) -> Option<(usize, CallTarget)> {
        let at = |k: usize| addr.wrapping_add(4 * k as u64);
        let built = self.build(w);
        let mut k = built.map_or(0, |(n, _, _)| n);
        if !is_move(*w.get(k)?, reg::AT, reg::RA) {
            return None;
        }
        k += 1;
        let mut adjusted = false;
        if sp_adjust(*w.get(k)?) == Some(-8) {
            adjusted = true;
            k += 1;
        }
        let word = *w.get(k)?;
        let target = if let Some((_, r, value)) = built {
            // gcc's profiler call builds the address in `v1` (the plans
            // rely on it: `at` is the return address, `v1` is scratch).
            (jalr_ra(word) == Some(r) && r == reg::V1).then_some(CallTarget::Direct(value))?
        } else if let Some(off) = t9_load(word) {
            // PIC; GNU ld may have turned `jalr t9` into `bal`/`jal`.
            k += 1;
            let word = *w.get(k)?;
            if jalr_ra(word) == Some(reg::T9) {
                CallTarget::GpRelative(off)
            } else if is_jal(word) {
                CallTarget::Direct(jal_target(at(k), word))
            } else {
                CallTarget::Direct(bal_target(at(k), word)?)
            }
        } else if is_jal(word) {
            CallTarget::Direct(jal_target(at(k), word))
        } else {
            CallTarget::Direct(bal_target(at(k), word)?)
        };
        let delay = *w.get(k + 1)?;
        if delay != NOP && (adjusted || sp_adjust(delay) != Some(-8)) {
            return None;
        }
        Some((k + 2, target))
    }

    fn sequence_call(&self, code: &[u8], addr: u64) -> Option<Call> {
        let w = self.words(&code[..code.len().min(4 * (MAX_SEQUENCE + 1))]);
        let (n, target) = self.sequence(&w, addr)?;
        Some(Call {
            len: (4 * n) as u8,
            target,
        })
    }

    /// Whether `word` may start a sequence.
    fn may_start(word: u32) -> bool {
        is_move(word, reg::AT, reg::RA) || lui(word).is_some()
    }
}

impl Isa for Mips {
    fn name(&self) -> &'static str {
        match (self.n64, self.big_endian) {
            (false, true) => "mips",
            (false, false) => "mipsel",
            (true, true) => "mips64",
            (true, false) => "mips64el",
        }
    }

    fn pointer_size(&self) -> usize {
        if self.n64 {
            8
        } else {
            4
        }
    }

    fn decode_call(&self, code: &[u8], addr: u64) -> Option<Call> {
        self.sequence_call(code, addr)
    }

    fn for_each_call(&self, code: &[u8], addr: u64, found: &mut dyn FnMut(u64, Call)) {
        let w = self.words(code);
        let mut i = 0;
        while i < w.len() {
            let at = addr.wrapping_add(4 * i as u64);
            let end = w.len().min(i + MAX_SEQUENCE + 1);
            match Mips::may_start(w[i])
                .then(|| self.sequence(&w[i..end], at))
                .flatten()
            {
                Some((n, target)) => {
                    let len = (4 * n) as u8;
                    found(at, Call { len, target });
                    i += n;
                }
                None => i += 1,
            }
        }
    }

    fn may_call(&self, code: &[u8], _addr: u64, _wanted: &mut dyn FnMut(CallTarget) -> bool) -> bool {
        // Every sequence has a `move at, ra`.
        code.chunks_exact(4)
            .any(|c| self.word(c).is_some_and(|w| is_move(w, reg::AT, reg::RA)))
    }

    fn nop_run(&self, code: &[u8], max_bytes: usize) -> (usize, usize) {
        let count = code[..code.len().min(max_bytes)]
            .chunks_exact(4)
            .take_while(|c| self.word(c) == Some(NOP))
            .count();
        (count, 4 * count)
    }

    fn landing_pad_len(&self, _code: &[u8]) -> usize {
        0
    }

    /// GNU ld's non-PIC PLT entries: `lui t7, %hi(slot); lw/ld t9,
    /// %lo(slot)(t7); jr t9; addiu t8, t7, %lo(slot)` (`t7` is `$15`, `t3`
    /// in n64 names).
    fn for_each_plt_stub(&self, code: &[u8], addr: u64, found: &mut dyn FnMut(u64, u64)) {
        const T7: u32 = 15;
        const T8: u32 = 24;
        let jr_t9 = jr(reg::T9);
        let w = self.words(code);
        let mut i = 0;
        while i + 4 <= w.len() {
            let stub = (|| {
                let (r, high) = lui(w[i]).filter(|&(r, _)| r == T7)?;
                let load = w[i + 1];
                let op = opcode(load);
                let ok = (op == 0x23 || op == 0x37) && rs(load) == r && rt(load) == reg::T9;
                let add = w[i + 3];
                let ok = ok
                    && w[i + 2] == jr_t9
                    && matches!(opcode(add), 0x09 | 0x19)
                    && rs(add) == r
                    && rt(add) == T8;
                let slot = high.wrapping_add(simm(load));
                let slot = if self.n64 {
                    slot as u64
                } else {
                    u64::from(slot as u32)
                };
                ok.then_some(slot)
            })();
            match stub {
                Some(slot) => {
                    found(addr.wrapping_add(4 * i as u64), slot);
                    i += 4;
                }
                None => i += 1,
            }
        }
    }

    fn xray_sled(&self, _kind: SledKind, _code: &[u8]) -> Result<usize, String> {
        Err(format!("no XRay sleds on {}", self.name()))
    }

    fn reloc_call(&self, r_type: u32, r_offset: u64, section: &[u8]) -> Option<RelocCall> {
        // n64 packs three types into one: the first is in the low byte.
        match r_type & 0xff {
            R_MIPS_26 | R_MIPS_HI16 | R_MIPS_LO16 | R_MIPS_CALL16 | R_MIPS_GOT_DISP | R_MIPS_HIGHER
            | R_MIPS_HIGHEST | R_MIPS_JALR => {}
            _ => return None,
        }
        if !r_offset.is_multiple_of(4) {
            return None;
        }
        // The nearest sequence start at or before the relocated word whose
        // sequence covers it.
        (0..MAX_SEQUENCE as u64).find_map(|back| {
            let start = r_offset.checked_sub(4 * back)?;
            let code = section.get(usize::try_from(start).ok()?..)?;
            let call = self.sequence_call(code, start)?;
            (r_offset < start + u64::from(call.len)).then_some(RelocCall {
                offset: start,
                len: call.len,
            })
        })
    }

    fn pointer_reloc(&self, r_type: u32) -> Option<PointerReloc> {
        // n64 dynamic relocations are `R_MIPS_REL32` composed with
        // `R_MIPS_64`.
        const REL32_64: u32 = R_MIPS_REL32 | R_MIPS_64 << 8;
        match (self.n64, r_type) {
            (false, R_MIPS_32) | (true, R_MIPS_64) => Some(PointerReloc::Absolute),
            (false, R_MIPS_REL32) | (true, REL32_64) => Some(PointerReloc::Relative),
            _ => None,
        }
    }

    fn absolute_pointer_reloc(&self) -> (u32, bool) {
        if self.n64 {
            (R_MIPS_64, true)
        } else {
            (R_MIPS_32, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mips::{MIPS32_BE, MIPS32_LE, MIPS64_LE};

    // Words as gcc 12 emits them (see the module comment).
    const NONPIC_O32: [u32; 3] = [0x03e0_0825, 0x0c10_02bc, 0x27bd_fff8];
    const PIC_O32: [u32; 5] = [0x03e0_0825, 0x27bd_fff8, 0x8f99_805c, 0x0320_f809, 0];
    const PIC_N64: [u32; 4] = [0x03e0_0825, 0xdf99_80a8, 0x0320_f809, 0];
    const LONG_O32: [u32; 5] = [0x3c03_0040, 0x2463_0b50, 0x03e0_0825, 0x0060_f809, 0x27bd_fff8];
    const LONG_N64: [u32; 9] = [
        0x3c03_0000,
        0x3c01_2003,
        0x6463_0001,
        0x6421_c520,
        0x0003_183c,
        0x0061_182d,
        0x03e0_0825,
        0x0060_f809,
        0,
    ];

    fn calls(isa: &Mips, words: &[u32], addr: u64) -> Vec<(u64, Call)> {
        let mut code = isa.code(&[0x2402_000a]);
        code.extend(isa.code(words));
        code.extend(isa.code(&[0x03e0_0008]));
        let mut out = Vec::new();
        isa.for_each_call(&code, addr - 4, &mut |a, c| out.push((a, c)));
        out
    }

    #[test]
    fn sequences() {
        let call = |len: u8, target| Call { len, target };
        for isa in [MIPS32_BE, MIPS32_LE] {
            assert_eq!(
                calls(&isa, &NONPIC_O32, 0x4008a0),
                [(0x4008a0, call(12, CallTarget::Direct(0x400af0)))]
            );
            assert_eq!(
                calls(&isa, &PIC_O32, 0xa24),
                [(0xa24, call(20, CallTarget::GpRelative(-32676)))]
            );
            assert_eq!(
                calls(&isa, &LONG_O32, 0x4008d0),
                [(0x4008d0, call(20, CallTarget::Direct(0x400b50)))]
            );
        }
        assert_eq!(
            calls(&MIPS64_LE, &PIC_N64, 0xe64),
            [(0xe64, call(16, CallTarget::GpRelative(-32600)))]
        );
        assert_eq!(
            calls(&MIPS64_LE, &LONG_N64, 0x1_2000_3f40),
            [(0x1_2000_3f40, call(36, CallTarget::Direct(0x1_2002_c520)))]
        );
    }

    #[test]
    fn broken_sequences_are_not_calls() {
        // Without `move at, ra`, with a wrong delay slot, cut short.
        let no_move = [0x0c10_02bc, 0x27bd_fff8];
        assert!(calls(&MIPS32_BE, &no_move, 0x1000).is_empty());
        let bad_delay = [0x03e0_0825, 0x0c10_02bc, 0x2402_0001];
        assert!(calls(&MIPS32_BE, &bad_delay, 0x1000).is_empty());
        let code = MIPS32_BE.code(&PIC_O32);
        for len in 0..code.len() {
            assert_eq!(MIPS32_BE.decode_call(&code[..len], 0), None);
        }
        assert!(MIPS32_BE.decode_call(&code, 0).is_some());
        // A long call whose register is not the one built.
        let mut other = LONG_O32;
        other[3] = 0x0040_f809;
        assert!(calls(&MIPS32_LE, &other, 0x1000).is_empty());
    }

    #[test]
    fn relocations_find_the_sequence_start() {
        let isa = MIPS32_BE;
        let mut code = isa.code(&[0x27bd_f000]);
        code.extend(isa.code(&PIC_O32));
        // R_MIPS_CALL16 at the load, R_MIPS_JALR at the jalr.
        let expect = Some(RelocCall { offset: 4, len: 20 });
        assert_eq!(isa.reloc_call(R_MIPS_CALL16, 12, &code), expect);
        assert_eq!(isa.reloc_call(R_MIPS_JALR, 16, &code), expect);
        assert_eq!(isa.reloc_call(R_MIPS_32, 12, &code), None);
        assert_eq!(isa.reloc_call(R_MIPS_CALL16, 4000, &code), None);
        let code = MIPS64_LE.code(&LONG_N64);
        let packed = R_MIPS_LO16; // with R_MIPS_NONE, R_MIPS_NONE
        let expect = Some(RelocCall { offset: 0, len: 36 });
        assert_eq!(MIPS64_LE.reloc_call(packed, 12, &code), expect);
    }

    #[test]
    fn plt_stubs_and_nops() {
        let isa = MIPS32_BE;
        let plt = isa.code(&[0x3c0f_0041, 0x8df9_0b14, 0x0320_0008, 0x25f8_0b14]);
        let mut stubs = Vec::new();
        isa.for_each_plt_stub(&plt, 0x400af0, &mut |s, slot| stubs.push((s, slot)));
        assert_eq!(stubs, [(0x400af0, 0x410b14)]);
        let code = isa.code(&[0, 0, 0, 0x03e0_0008]);
        assert_eq!(isa.nop_run(&code, 128), (3, 12));
        assert_eq!(isa.nop_run(&code, 8), (2, 8));
        assert_eq!(isa.nop_run(&code[..3], 128), (0, 0));
    }
}
