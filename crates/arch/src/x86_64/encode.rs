//! x86-64 patching verbs: canonical NOPs, `call rel32`, trampoline slots.

use crate::patch::{BreakpointPatcher, Code, PatchError, Resume, Shape, SlotLayout, MAX_SITE_LEN};
use crate::plan::Write;

use super::X86_64;

/// `int3`: the breakpoint of live patching (and the slots' padding).
pub const INT3: u8 = 0xcc;
/// `call rel32` opcode and length.
const CALL: u8 = 0xe8;
const CALL_LEN: usize = 5;
/// `ret`.
const RET: u8 = 0xc3;
/// `jmp rel32`'s length.
const JMP_LEN: usize = 5;

/// The recommended single-instruction NOPs of 1 to 9 bytes (Intel SDM,
/// "Recommended Multi-Byte Sequence of NOP Instruction"); longer ones add
/// `66` prefixes and a `cs` prefix to the 9-byte form, as binutils does.
const NOPS: [&[u8]; 9] = [
    &[0x90],
    &[0x66, 0x90],
    &[0x0f, 0x1f, 0x00],
    &[0x0f, 0x1f, 0x40, 0x00],
    &[0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
    &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
];

/// `NOP_WORDS[len]`: one NOP instruction of `len` bytes (none for 0), as
/// the little-endian word of a [`Code`] — built once. Beyond 9 bytes: `66`
/// prefixes and `2e`, then the 8-byte `nopl 0x0(%rax,%rax,1)`, as binutils
/// does.
const NOP_WORDS: [u128; MAX_SITE_LEN + 1] = nop_words();

const fn nop_words() -> [u128; MAX_SITE_LEN + 1] {
    let mut out = [0; MAX_SITE_LEN + 1];
    let mut len = 1;
    while len <= MAX_SITE_LEN {
        let mut bytes = [0u8; 16];
        let (prefixes, nop) = if len <= NOPS.len() {
            (0, NOPS[len - 1])
        } else {
            (len - 9, NOPS[7])
        };
        let mut i = 0;
        while i < prefixes {
            bytes[i] = 0x66;
            i += 1;
        }
        if prefixes > 0 {
            bytes[prefixes] = 0x2e;
            i += 1;
        }
        let mut j = 0;
        while j < nop.len() {
            bytes[i + j] = nop[j];
            j += 1;
        }
        out[len] = u128::from_le_bytes(bytes);
        len += 1;
    }
    out
}

/// An XRay exit sled of `len` bytes (`CALL_LEN + 1..=MAX_SITE_LEN`) off:
/// `ret`, a NOP up to where a call would end, `ret`, a NOP to the end.
fn return_sled(len: usize) -> u128 {
    RET as u128
        | NOP_WORDS[CALL_LEN - 1] << 8
        | (RET as u128) << (8 * CALL_LEN)
        | NOP_WORDS[len - CALL_LEN - 1] << (8 * (CALL_LEN + 1))
}

/// `len` one-byte NOPs, as the word of a [`Code`].
fn ones(len: usize) -> u128 {
    (0..len).fold(0, |w, i| w | 0x90 << (8 * i))
}

/// The one-byte instructions a punned call's displacement is made of:
/// `nop`, and `clc`, `stc`, `cmc`, `cld`, `sahf`, which change only flags,
/// dead at a function's entry (the ABI has DF clear there already).
pub const PUN_BYTES: [u8; 6] = [0x90, 0xf8, 0xf9, 0xf5, 0xfc, 0x9e];

/// The displacements of a punned call ([`Shape::Punned`]), every byte one
/// of [`PUN_BYTES`]: all negative, from about -1.8 GiB to -48 MiB. The
/// first is `90 90 90 90`: with it the run's off form is the run itself,
/// and switching writes one byte.
pub fn pun_displacements() -> impl Iterator<Item = i32> {
    (0..PUN_BYTES.len().pow(4)).map(|n| {
        let digit = |k: u32| PUN_BYTES[n / PUN_BYTES.len().pow(k) % PUN_BYTES.len()];
        i32::from_le_bytes([digit(0), digit(1), digit(2), digit(3)])
    })
}

/// `call rel32` with displacement `disp`, as the word of its 5 bytes.
fn call_word(disp: i32) -> u128 {
    CALL as u128 | (disp as u32 as u128) << 8
}

/// The displacement of a `rel32` branch at `from` (instruction start) of
/// `len` bytes to `to`, if it fits.
fn rel32(from: u64, len: usize, to: u64) -> Option<i32> {
    let next = from.wrapping_add(len as u64);
    i32::try_from(to.wrapping_sub(next) as i64).ok()
}

impl BreakpointPatcher for X86_64 {
    #[inline]
    fn phases(&self) -> usize {
        3
    }

    #[inline]
    fn phase(&self, addr: u64, new: &Code, phase: usize) -> Option<Write> {
        // The kernel's `text_poke_bp`: `int3` on the first byte, sync; the
        // tail, sync; the first byte, sync. In words, without a copy: this
        // runs for each of 100,000 sites.
        let (word, len) = (new.word(), new.len());
        let (addr, word, len) = match phase {
            0 => (addr, INT3.into(), 1),
            1 => (addr + 1, word >> 8, len.saturating_sub(1)),
            2 => (addr, word & 0xff, len.min(1)),
            _ => return None,
        };
        Some(Write {
            addr,
            bytes: Code::from_word(word, len),
        })
    }

    fn phase_masked(&self, addr: u64, old: &Code, new: &Code, starts: u8, phase: usize) -> Option<Write> {
        // Each start gets `int3` over the bytes there now, then the other
        // bytes change with the starts kept `int3`, then the starts: a
        // thread resuming at a start sees `int3`, or old bytes from there
        // on, or new ones — never a mix. Bytes that do not change are
        // rewritten with their own values, one byte store each.
        let starts = starts | 1;
        let (source, len) = match phase {
            0 => (old, old.len()),
            1 | 2 => (new, new.len()),
            _ => return None,
        };
        let mut bytes = [0u8; MAX_SITE_LEN];
        bytes[..len].copy_from_slice(source.as_slice());
        if phase < 2 {
            for (i, b) in bytes.iter_mut().enumerate().take(len.min(8)) {
                if starts >> i & 1 != 0 {
                    *b = INT3;
                }
            }
        }
        Some(Write {
            addr,
            bytes: Code::new(&bytes[..len])?,
        })
    }

    fn make_bare(
        &self,
        shape: Shape,
        addr: u64,
        original: &Code,
        target: Option<u64>,
    ) -> Result<Code, PatchError> {
        let Shape::Bare { boundaries, trap } = shape else {
            return Err(PatchError::Shape);
        };
        let Some(target) = target else {
            return Ok(*original);
        };
        let mut bytes = [0u8; MAX_SITE_LEN];
        let len = original.len();
        bytes[..len].copy_from_slice(original.as_slice());
        if trap {
            bytes[0] = INT3;
            return Code::new(&bytes[..len]).ok_or(PatchError::Length(len));
        }
        if len < JMP_LEN {
            return Err(PatchError::Length(len));
        }
        // The punned `jmp rel32` over the first five bytes (its one
        // definition: `bare::jump`); what follows is the function's own tail
        // of its fifth byte's instruction, never run.
        let jump = super::bare::jump(addr, boundaries, target).ok_or(PatchError::Reach {
            from: addr,
            to: target,
        })?;
        bytes[..JMP_LEN].copy_from_slice(jump.as_slice());
        Code::new(&bytes[..len]).ok_or(PatchError::Length(len))
    }

    #[inline]
    fn make_nop(&self, shape: Shape, len: usize) -> Result<Code, PatchError> {
        let word = match shape {
            Shape::Inline if (1..=MAX_SITE_LEN).contains(&len) => NOP_WORDS[len],
            Shape::ReturnSled if (CALL_LEN + 1..=MAX_SITE_LEN).contains(&len) => return_sled(len),
            Shape::Punned { disp } if (CALL_LEN..=MAX_SITE_LEN).contains(&len) => {
                ones(len) & !(0xffff_ffff << (8 * (len - 4))) | (disp as u32 as u128) << (8 * (len - 4))
            }
            Shape::Bare { .. } => return Err(PatchError::Shape),
            _ => return Err(PatchError::Length(len)),
        };
        Ok(Code::from_word(word, len))
    }

    #[inline]
    fn call_fits(&self, shape: Shape, len: usize) -> bool {
        len <= MAX_SITE_LEN
            && match shape {
                Shape::Inline | Shape::Punned { .. } => len >= CALL_LEN,
                Shape::ReturnSled => len > CALL_LEN,
                Shape::Bare { .. } => false,
            }
    }

    #[inline]
    fn make_call(&self, shape: Shape, addr: u64, len: usize, target: u64) -> Result<Code, PatchError> {
        if !self.call_fits(shape, len) {
            return Err(PatchError::Length(len));
        }
        // Inline: a NOP, then the call; a sled: the call where the first
        // `ret` and its NOP were; a punned run: one-byte NOPs, then the
        // call, whose displacement is the run's own.
        let (at, rest) = match shape {
            Shape::Inline => (len - CALL_LEN, NOP_WORDS[len - CALL_LEN]),
            Shape::ReturnSled => (0, return_sled(len) >> (8 * CALL_LEN) << (8 * CALL_LEN)),
            Shape::Punned { .. } => (len - CALL_LEN, ones(len - CALL_LEN)),
            Shape::Bare { .. } => return Err(PatchError::Shape),
        };
        let from = addr + at as u64;
        let disp = rel32(from, CALL_LEN, target).ok_or(PatchError::Reach { from, to: target })?;
        if matches!(shape, Shape::Punned { disp: own } if own != disp) {
            return Err(PatchError::Reach { from, to: target });
        }
        Ok(Code::from_word(rest | call_word(disp) << (8 * at), len))
    }

    #[inline]
    fn return_address(&self, shape: Shape, addr: u64, len: usize) -> u64 {
        match shape {
            Shape::Inline | Shape::Punned { .. } => addr + len as u64,
            Shape::ReturnSled => addr + CALL_LEN as u64,
            // Its detour's, which the runtime knows (never asked).
            Shape::Bare { .. } => addr,
        }
    }

    #[inline]
    fn resume(&self, shape: Shape, addr: u64, len: usize, target: Option<u64>) -> Resume {
        match (shape, target) {
            (_, Some(target)) => Resume::Call {
                target,
                ret: self.return_address(shape, addr, len),
            },
            (Shape::Inline | Shape::Punned { .. }, None) => Resume::At(addr + len as u64),
            (Shape::ReturnSled, None) => Resume::Return,
            // Its detour's copy, which the runtime knows (never asked).
            (Shape::Bare { .. }, None) => Resume::At(addr),
        }
    }

    fn reaches(&self, from: u64, to: u64) -> bool {
        rel32(from, CALL_LEN, to).is_some()
    }

    fn slot_layout(&self) -> SlotLayout {
        // 0: mov 16(%rip), %r11    4c 8b 1d <disp32 = 16 - 7>
        // 7: jmp *24(%rip)         ff 25 <disp32 = 24 - 13>
        // 13: int3 × 3; 16: data word; 24: target word.
        let mut code = vec![0x4c, 0x8b, 0x1d];
        code.extend_from_slice(&(16i32 - 7).to_le_bytes());
        code.extend_from_slice(&[0xff, 0x25]);
        code.extend_from_slice(&(24i32 - 13).to_le_bytes());
        code.extend_from_slice(&[INT3; 3]);
        SlotLayout {
            code,
            data: 16,
            target: 24,
            size: 32,
        }
    }
}
