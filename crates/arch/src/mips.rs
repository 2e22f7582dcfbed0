//! MIPS: MIPS32 (o32, big- and little-endian) and MIPS64 (n64), the
//! architecture of the seeds' own designs.
//!
//! Site forms, as Debian's cross compilers (gcc 12) emit them (see
//! `docs/ARCHITECTURE.md`):
//! - `-pg`, non-PIC: `move at, ra; jal _mcount; <delay>` — on o32 the delay
//!   slot is `addiu sp, sp, -8`, which `_mcount` undoes;
//! - `-pg`, PIC (abicalls): `move at, ra; [addiu sp, sp, -8;] lw/ld t9,
//!   %call16(_mcount)(gp); jalr t9; <delay>`;
//! - `-pg -mlong-calls`: the address of `_mcount` built in `v1` (`lui/addiu`
//!   on o32, six instructions on n64), `move at, ra; jalr v1; <delay>`;
//! - `-fpatchable-function-entry=N`: N `nop`s (`0x00000000`).

mod encode;
mod isa;
mod plan;
mod trampoline;

pub use encode::*;

/// The MIPS instruction layer for one ABI and byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mips {
    /// Big-endian (`mips`), else little-endian (`mipsel`).
    pub big_endian: bool,
    /// 64-bit n64 ABI, else 32-bit o32.
    pub n64: bool,
}

/// MIPS32 o32, big-endian (`mips-linux-gnu`).
pub const MIPS32_BE: Mips = Mips {
    big_endian: true,
    n64: false,
};
/// MIPS32 o32, little-endian (`mipsel-linux-gnu`).
pub const MIPS32_LE: Mips = Mips {
    big_endian: false,
    n64: false,
};
/// MIPS64 n64, big-endian (`mips64-linux-gnuabi64`).
pub const MIPS64_BE: Mips = Mips {
    big_endian: true,
    n64: true,
};
/// MIPS64 n64, little-endian (`mips64el-linux-gnuabi64`).
pub const MIPS64_LE: Mips = Mips {
    big_endian: false,
    n64: true,
};

impl Mips {
    /// The 001 design's flag register `t0` in this ABI (`$8` in o32,
    /// `$12` in n64): 0 with registers, 1 without.
    pub(crate) const fn t0(&self) -> u32 {
        if self.n64 {
            encode::reg::T0_N64
        } else {
            encode::reg::T0_O32
        }
    }

    /// The instruction word at the start of `code`, if there are 4 bytes.
    pub fn word(&self, code: &[u8]) -> Option<u32> {
        let b: [u8; 4] = code.get(..4)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    /// The bytes of instruction `word` in this byte order.
    pub fn bytes(&self, word: u32) -> Vec<u8> {
        if self.big_endian {
            word.to_be_bytes().to_vec()
        } else {
            word.to_le_bytes().to_vec()
        }
    }

    /// Every instruction word of `code` (a trailing partial word ignored).
    pub fn words(&self, code: &[u8]) -> Vec<u32> {
        code.chunks_exact(4).filter_map(|c| self.word(c)).collect()
    }

    /// The bytes of a sequence of instruction words.
    pub fn code(&self, words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|&w| self.bytes(w)).collect()
    }
}
