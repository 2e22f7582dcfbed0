//! Where the punned jump at a bare entry can land.
//!
//! The jump is `e9 rel32` at `e`, so byte `e+i` (`i` in 1..=4) is byte
//! `i-1` of `rel32` (little-endian). Each one at an interior boundary must
//! be `int3` (`cc`): the detour's address, `e + 5 + rel32`, has up to four
//! fixed base-256 digits. Finding the next allowed address is digit
//! arithmetic, not a scan.

use crate::patch::Code;

use super::JUMP_LEN;

/// `jmp rel32`.
const JMP: u8 = 0xe9;
/// The byte every interior boundary of the jump holds.
const PUN: u8 = super::super::INT3;
/// Flipping it maps `i32` to `u32` keeping the order.
const SIGN: u32 = 0x8000_0000;

/// The fixed bits of `rel32` and their values, from the boundary mask
/// (bits other than 1..=4 are ignored).
fn pattern(boundaries: u8) -> (u32, u32) {
    (1..JUMP_LEN)
        .filter(|i| boundaries >> i & 1 != 0)
        .fold((0, 0), |(mask, value), i| {
            let shift = 8 * (i - 1);
            (mask | 0xff << shift, value | u32::from(PUN) << shift)
        })
}

/// `rel32` of a jump at `entry` to `to`, if it fits.
fn rel(entry: u64, to: u64) -> Option<i32> {
    i32::try_from(i128::from(to) - (i128::from(entry) + JUMP_LEN as i128)).ok()
}

/// Whether `jmp rel32` at `entry` reaches `to` and puns: each byte `e+i`
/// (`i` in 1..=4) with bit `i` of `boundaries` set is `0xcc`.
pub fn landing_fits(entry: u64, boundaries: u8, to: u64) -> bool {
    let (mask, value) = pattern(boundaries);
    rel(entry, to).is_some_and(|rel| rel as u32 & mask == value)
}

/// The smallest `to` with `from <= to < until` for which [`landing_fits`]
/// holds; `None` if there is none. Constant time.
pub fn next_landing(entry: u64, boundaries: u8, from: u64, until: u64) -> Option<u64> {
    let base = i128::from(entry) + JUMP_LEN as i128;
    let lowest = (i128::from(from) - base).max(i128::from(i32::MIN));
    let lowest = i32::try_from(lowest).ok()?;
    let (mask, value) = pattern(boundaries);
    // In the order-preserving image of `i32` in `u32` the fixed top byte,
    // if any, is `cc ^ 80`.
    let found = next_matching(lowest as u32 ^ SIGN, mask, value ^ (SIGN & mask))?;
    let to = base + i128::from((found ^ SIGN) as i32);
    (to < i128::from(until)).then_some(to as u64)
}

/// The smallest `y >= low` with `y & mask == value`, where `mask` is made
/// of whole bytes: keep the high digits of `low`, raise one digit by as
/// little as the pattern allows, and take the lowest allowed digits below
/// it. Raising a lower digit gives a smaller number, so the lowest digit
/// that can be raised wins.
fn next_matching(low: u32, mask: u32, value: u32) -> Option<u32> {
    if low & mask == value {
        return Some(low);
    }
    let mut best = None;
    for digit in (0..4).rev() {
        let shift = 8 * digit;
        let high = u32::MAX.checked_shl(shift + 8).unwrap_or(0);
        if (low ^ value) & mask & high != 0 {
            // A fixed digit above differs from `low`'s: no number that keeps
            // it (and so no lower digit's raise) fits.
            break;
        }
        let current = low >> shift & 0xff;
        let raised = if mask >> shift & 0xff != 0 {
            let fixed = value >> shift & 0xff;
            if fixed <= current {
                continue;
            }
            fixed
        } else if current == 0xff {
            continue;
        } else {
            current + 1
        };
        let below = (1u32 << shift) - 1;
        best = Some(low & high | raised << shift | value & below);
    }
    best
}

/// The 5 bytes `e9 rel32` of the jump at `entry` to `to`; `None` unless
/// [`landing_fits`].
pub fn jump(entry: u64, boundaries: u8, to: u64) -> Option<Code> {
    if !landing_fits(entry, boundaries, to) {
        return None;
    }
    let rel = rel(entry, to)?.to_le_bytes();
    Code::new(&[JMP, rel[0], rel[1], rel[2], rel[3]])
}

/// The `to - (entry + 5)` that the jump's top byte allows, as `[lo, hi]`:
/// with an interior boundary at `e+4` that byte is `cc`, which puts the
/// detour 816–832 MiB below the entry (-0x34000000..=-0x33000001);
/// otherwise the whole `i32` range.
pub fn landing_window(boundaries: u8) -> (i64, i64) {
    if boundaries >> 4 & 1 != 0 {
        let lo = i64::from(i32::from_le_bytes([0, 0, 0, PUN]));
        (lo, lo + 0xff_ffff)
    } else {
        (i64::from(i32::MIN), i64::from(i32::MAX))
    }
}
