//! AArch64 (A64) instruction encoders, 64-bit forms only, and the few
//! decoders the plans need.
//!
//! The branch and PC-relative encoders take addresses and return `None`
//! when the target is out of reach or misaligned; the others take
//! immediates a caller writes as constants and panic on an immediate the
//! instruction cannot hold (a bug in the caller, not an input error).

/// Register numbers.
pub mod reg {
    /// `x0`, the first argument and the result.
    pub const X0: u32 = 0;
    /// `x1`.
    pub const X1: u32 = 1;
    /// `x2`.
    pub const X2: u32 = 2;
    /// `x8`, the indirect result register.
    pub const X8: u32 = 8;
    /// `x9`: the entry sites save the return address in it (`mov x9, x30`).
    pub const X9: u32 = 9;
    /// `x16` (`ip0`), the intra-procedure-call scratch register veneers use.
    pub const X16: u32 = 16;
    /// `x17` (`ip1`).
    pub const X17: u32 = 17;
    /// `x29`, the frame pointer.
    pub const FP: u32 = 29;
    /// `x30`, the link register.
    pub const LR: u32 = 30;
    /// `sp` where an instruction reads its base or writes an
    /// `add`/`sub` immediate result.
    pub const SP: u32 = 31;
    /// `xzr` where an instruction reads a data operand.
    pub const XZR: u32 = 31;
}

/// `nop`.
pub const NOP: u32 = 0xd503_201f;
/// `bti c` (`hint #34`): a landing pad for `br x16/x17` and `blr`; a NOP
/// on cores without BTI.
pub const BTI_C: u32 = hint(34);
/// `xpaclri` (`hint #7`): strips a pointer authentication code from
/// `x30`; a NOP on cores without PAuth.
pub const XPACLRI: u32 = hint(7);
/// `ret` (`ret x30`).
pub const RET: u32 = ret(reg::LR);

/// `hint #imm`.
pub const fn hint(imm: u32) -> u32 {
    assert!(imm < 128, "hint immediate");
    NOP & !(0x7f << 5) | imm << 5
}

/// `brk #imm`.
pub const fn brk(imm: u16) -> u32 {
    0xd420_0000 | (imm as u32) << 5
}

const fn rr(rd: u32, rn: u32) -> u32 {
    (rn & 31) << 5 | (rd & 31)
}

/// `mov xd, xm` (`orr xd, xzr, xm`); not for `sp` (see [`mov_sp`]).
pub const fn mov(rd: u32, rm: u32) -> u32 {
    0xaa00_03e0 | (rm & 31) << 16 | (rd & 31)
}

/// `mov xd|sp, xn|sp` (`add xd, xn, #0`): the move that reads or writes `sp`.
pub const fn mov_sp(rd: u32, rn: u32) -> u32 {
    add_imm(rd, rn, 0)
}

const fn addsub_imm(base: u32, rd: u32, rn: u32, imm: u32) -> u32 {
    if imm < 1 << 12 {
        base | imm << 10 | rr(rd, rn)
    } else {
        assert!(imm & 0xfff == 0 && imm < 1 << 24, "add/sub immediate");
        base | 1 << 22 | (imm >> 12) << 10 | rr(rd, rn)
    }
}

/// `add xd|sp, xn|sp, #imm` (`imm` < 4096, or a multiple of 4096 below 2^24,
/// encoded with `lsl #12`).
pub const fn add_imm(rd: u32, rn: u32, imm: u32) -> u32 {
    addsub_imm(0x9100_0000, rd, rn, imm)
}

/// `sub xd|sp, xn|sp, #imm` (immediates as [`add_imm`]).
pub const fn sub_imm(rd: u32, rn: u32, imm: u32) -> u32 {
    addsub_imm(0xd100_0000, rd, rn, imm)
}

/// `movz xd, #imm, lsl #shift` (`shift` 0, 16, 32 or 48).
pub const fn movz(rd: u32, imm: u16, shift: u32) -> u32 {
    assert!(shift & 15 == 0 && shift < 64, "movz shift");
    0xd280_0000 | (shift / 16) << 21 | (imm as u32) << 5 | (rd & 31)
}

/// `movk xd, #imm, lsl #shift` (`shift` 0, 16, 32 or 48).
pub const fn movk(rd: u32, imm: u16, shift: u32) -> u32 {
    assert!(shift & 15 == 0 && shift < 64, "movk shift");
    0xf280_0000 | (shift / 16) << 21 | (imm as u32) << 5 | (rd & 31)
}

/// The `movz`/`movk` sequence that loads any 64-bit `value` into `rd`
/// (one to four instructions; zero halves after the first are skipped).
pub fn mov_imm64(rd: u32, value: u64) -> Vec<u32> {
    let mut out = vec![movz(rd, value as u16, 0)];
    for shift in [16, 32, 48] {
        let half = (value >> shift) as u16;
        if half != 0 {
            out.push(movk(rd, half, shift));
        }
    }
    out
}

/// `br xn`.
pub const fn br(rn: u32) -> u32 {
    0xd61f_0000 | (rn & 31) << 5
}

/// `blr xn`.
pub const fn blr(rn: u32) -> u32 {
    0xd63f_0000 | (rn & 31) << 5
}

/// `ret xn`.
pub const fn ret(rn: u32) -> u32 {
    0xd65f_0000 | (rn & 31) << 5
}

/// The signed word offset from `from` to `to`, if it is a multiple of 4 and
/// fits in `bits` bits (after the division by 4).
const fn word_offset(from: u64, to: u64, bits: u32) -> Option<u32> {
    let delta = to.wrapping_sub(from) as i64;
    if delta & 3 != 0 || from & 3 != 0 {
        return None;
    }
    let words = delta >> 2;
    let limit = 1i64 << (bits - 1);
    if words < -limit || words >= limit {
        return None;
    }
    Some((words as u32) & ((1 << bits) - 1))
}

/// Largest forward distance of `b`/`bl` (`128 MB - 4`).
pub const BRANCH_MAX_FORWARD: u64 = (1 << 27) - 4;
/// Largest backward distance of `b`/`bl` (`128 MB`).
pub const BRANCH_MAX_BACKWARD: u64 = 1 << 27;

/// `bl to`, placed at `from`; `None` beyond ±128 MB or if misaligned.
pub const fn bl(from: u64, to: u64) -> Option<u32> {
    match word_offset(from, to, 26) {
        Some(imm) => Some(0x9400_0000 | imm),
        None => None,
    }
}

/// `b to`, placed at `from`; `None` beyond ±128 MB or if misaligned.
pub const fn b(from: u64, to: u64) -> Option<u32> {
    match word_offset(from, to, 26) {
        Some(imm) => Some(0x1400_0000 | imm),
        None => None,
    }
}

/// `ldr xt, <literal at to>`, placed at `from`; `None` beyond ±1 MB or if
/// misaligned.
pub const fn ldr_literal(rt: u32, from: u64, to: u64) -> Option<u32> {
    match word_offset(from, to, 19) {
        Some(imm) => Some(0x5800_0000 | imm << 5 | (rt & 31)),
        None => None,
    }
}

/// `adr xd, to`, placed at `from`; `None` beyond ±1 MB.
pub const fn adr(rd: u32, from: u64, to: u64) -> Option<u32> {
    let delta = to.wrapping_sub(from) as i64;
    if delta < -(1 << 20) || delta >= 1 << 20 {
        return None;
    }
    let imm = delta as u32;
    Some(0x1000_0000 | (imm & 3) << 29 | ((imm >> 2) & 0x7ffff) << 5 | (rd & 31))
}

/// `adrp xd, to` (the 4 KB page of `to`), placed at `from`; `None` beyond
/// ±4 GiB.
pub const fn adrp(rd: u32, from: u64, to: u64) -> Option<u32> {
    let pages = ((to & !0xfff).wrapping_sub(from & !0xfff) as i64) >> 12;
    if pages < -(1 << 20) || pages >= 1 << 20 {
        return None;
    }
    let imm = pages as u32;
    Some(0x9000_0000 | (imm & 3) << 29 | ((imm >> 2) & 0x7ffff) << 5 | (rd & 31))
}

/// How a load or store addresses memory: `[xn, #off]`, `[xn, #off]!`
/// (pre-index) or `[xn], #off` (post-index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// `[xn, #off]`: unsigned scaled offset for `ldr`/`str`, signed for
    /// `ldp`/`stp`.
    Offset,
    /// `[xn, #off]!`: the base is updated before the access.
    Pre,
    /// `[xn], #off`: the base is updated after the access.
    Post,
}

const fn ldst(load: bool, rt: u32, rn: u32, off: i32, index: Index) -> u32 {
    let opc = if load { 1 << 22 } else { 0 };
    match index {
        Index::Offset => {
            assert!(off >= 0 && off % 8 == 0 && off < 8 << 12, "ldr/str offset");
            0xf900_0000 | opc | (off as u32 / 8) << 10 | rr(rt, rn)
        }
        Index::Pre | Index::Post => {
            assert!(off >= -256 && off < 256, "ldr/str index");
            let mode = if let Index::Pre = index { 0xc00 } else { 0x400 };
            0xf800_0000 | opc | ((off as u32) & 0x1ff) << 12 | mode | rr(rt, rn)
        }
    }
}

/// `ldr xt, [xn|sp, #off]` in the addressing of `index`.
pub const fn ldr(rt: u32, rn: u32, off: i32, index: Index) -> u32 {
    ldst(true, rt, rn, off, index)
}

/// `str xt, [xn|sp, #off]` in the addressing of `index`.
pub const fn str(rt: u32, rn: u32, off: i32, index: Index) -> u32 {
    ldst(false, rt, rn, off, index)
}

const fn pair(load: bool, rt: u32, rt2: u32, rn: u32, off: i32, index: Index) -> u32 {
    assert!(off % 8 == 0 && off >= -512 && off < 512, "ldp/stp offset");
    let mode = match index {
        Index::Offset => 0xa900_0000,
        Index::Pre => 0xa980_0000,
        Index::Post => 0xa880_0000,
    };
    let opc = if load { 1 << 22 } else { 0 };
    mode | opc | ((off / 8) as u32 & 0x7f) << 15 | (rt2 & 31) << 10 | rr(rt, rn)
}

/// `stp xt, xt2, [xn|sp, #off]` in the addressing of `index`.
pub const fn stp(rt: u32, rt2: u32, rn: u32, off: i32, index: Index) -> u32 {
    pair(false, rt, rt2, rn, off, index)
}

/// `ldp xt, xt2, [xn|sp, #off]` in the addressing of `index`.
pub const fn ldp(rt: u32, rt2: u32, rn: u32, off: i32, index: Index) -> u32 {
    pair(true, rt, rt2, rn, off, index)
}

/// The target of a `bl` at `addr`, if `word` is one.
pub const fn decode_bl(word: u32, addr: u64) -> Option<u64> {
    if word & 0xfc00_0000 != 0x9400_0000 {
        return None;
    }
    // Sign-extend the 26-bit word offset.
    let words = ((word << 6) as i32 >> 6) as i64;
    Some(addr.wrapping_add((words * 4) as u64))
}
