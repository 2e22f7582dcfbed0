//! The punned jump's landings: `next_landing` against a brute-force scan,
//! and the jump's bytes decoded from every boundary.

use iced_x86::{Code as Op, Decoder, DecoderOptions};

use super::{jump, landing_fits, landing_window, next_landing, JUMP_LEN};

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An entry address: in a non-PIE executable, a PIE, a library, or
/// anywhere in the lower half.
fn some_entry(rng: &mut Rng) -> u64 {
    let base = [0x40_0000, 0x5555_5555_0000, 0x7f12_3456_0000, rng.next() >> 1][rng.below(4) as usize];
    base + rng.below(0x100_0000)
}

/// A `rel32` that fits `boundaries`: random bytes, `cc` where fixed.
fn some_fitting_rel(rng: &mut Rng, boundaries: u8) -> i32 {
    let mut bytes = (rng.next() as u32).to_le_bytes();
    for i in 1..JUMP_LEN {
        if boundaries >> i & 1 != 0 {
            bytes[i - 1] = 0xcc;
        }
    }
    i32::from_le_bytes(bytes)
}

#[test]
fn next_landing_is_the_first_a_scan_finds() {
    const WINDOW: u64 = 700;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut found = 0;
    for round in 0..6000 {
        let entry = some_entry(&mut rng);
        // Every mask, and bits outside 1..=4 that must be ignored.
        let boundaries = (round % 32) as u8 | (rng.next() as u8 & 0xe1);
        let base = entry as i128 + JUMP_LEN as i128;
        let from = match rng.below(3) {
            // Just before a landing.
            0 => base + i128::from(some_fitting_rel(&mut rng, boundaries)) - i128::from(rng.below(WINDOW)),
            // Around the ends of the reach.
            1 => {
                base + [i128::from(i32::MIN), i128::from(i32::MAX)][rng.below(2) as usize] - 350
                    + i128::from(rng.below(WINDOW))
            }
            // Anywhere within reach.
            _ => base + i128::from(rng.next() as i32),
        };
        let Ok(from) = u64::try_from(from) else { continue };
        let until = from + WINDOW;
        let scan = (from..until).find(|&to| landing_fits(entry, boundaries, to));
        let next = next_landing(entry, boundaries, from, until);
        assert_eq!(
            next, scan,
            "entry {entry:#x} boundaries {boundaries:#b} from {from:#x}"
        );
        if let Some(to) = next {
            found += 1;
            let rel = to as i128 - base;
            let (lo, hi) = landing_window(boundaries);
            assert!(i128::from(lo) <= rel && rel <= i128::from(hi));
            // Without an upper bound the same one comes back.
            assert_eq!(next_landing(entry, boundaries, from, u64::MAX), Some(to));
            assert_eq!(next_landing(entry, boundaries, from, to), None);
        }
    }
    assert!(found > 1500, "{found} landings found");
}

#[test]
fn next_landing_jumps_whole_digits() {
    let entry = 0x5555_5555_1000u64;
    let base = entry + 5;
    // No boundary: every address in reach.
    assert_eq!(next_landing(entry, 0, 0, u64::MAX), Some(base - 0x8000_0000));
    assert_eq!(next_landing(entry, 0, base, base + 1), Some(base));
    assert_eq!(next_landing(entry, 0, base + 0x8000_0000, u64::MAX), None);
    // push rbx; sub rsp,0x10: byte 0 fixed, one address in 256.
    let first = next_landing(entry, 1 << 1, base, u64::MAX).unwrap();
    assert_eq!(first, base + 0xcc);
    assert_eq!(
        next_landing(entry, 1 << 1, first + 1, u64::MAX),
        Some(first + 0x100)
    );
    // test edi,edi; je: bytes 1 and 3 fixed, runs of 256 every 64 KiB in
    // the band; from the top of a run to the next.
    let run = next_landing(entry, 1 << 2 | 1 << 4, 0, u64::MAX).unwrap();
    assert_eq!(run, base - 0x3400_0000 + 0xcc00);
    assert_eq!(
        next_landing(entry, 1 << 2 | 1 << 4, run + 0xff, u64::MAX),
        Some(run + 0xff)
    );
    assert_eq!(
        next_landing(entry, 1 << 2 | 1 << 4, run + 0x100, u64::MAX),
        Some(run + 0x1_0000)
    );
    // push rbp; mov rbp,rsp: the last of the band, then nothing.
    let last = base - 0x3300_0000 - 0x34;
    assert!(landing_fits(entry, 1 << 1 | 1 << 4, last));
    assert_eq!(next_landing(entry, 1 << 1 | 1 << 4, last, u64::MAX), Some(last));
    assert_eq!(next_landing(entry, 1 << 1 | 1 << 4, last + 1, u64::MAX), None);
    // An entry too low for the band has none.
    assert_eq!(next_landing(0x40_1000, 1 << 4, 0, u64::MAX), None);
}

#[test]
fn landing_window_is_the_band_or_all_of_i32() {
    assert_eq!(landing_window(1 << 4), (-0x3400_0000, -0x3300_0001));
    assert_eq!(landing_window(1 << 1 | 1 << 4), (-0x3400_0000, -0x3300_0001));
    let all = (i64::from(i32::MIN), i64::from(i32::MAX));
    for boundaries in [0, 1 << 1, 1 << 2 | 1 << 3, 0xef] {
        assert_eq!(landing_window(boundaries), all, "{boundaries:#b}");
    }
}

/// The jump's bytes, decoded from `e`: a jump to the landing; from every
/// interior boundary: `int3`.
#[test]
fn the_jump_traps_at_every_boundary() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for round in 0..3000 {
        let entry = some_entry(&mut rng);
        let boundaries = (round % 16) as u8 * 2;
        let base = entry as i128 + JUMP_LEN as i128;
        let from = base + i128::from(rng.next() as i32);
        let Ok(from) = u64::try_from(from) else { continue };
        let Some(to) = next_landing(entry, boundaries, from, u64::MAX) else {
            continue;
        };
        let code = jump(entry, boundaries, to).expect("a landing fits");
        let bytes = code.as_slice();
        assert_eq!(bytes.len(), 5);
        let jmp = Decoder::with_ip(64, bytes, entry, DecoderOptions::NONE).decode();
        assert_eq!((jmp.code(), jmp.near_branch_target()), (Op::Jmp_rel32_64, to));
        for i in 1..JUMP_LEN {
            if boundaries >> i & 1 != 0 {
                let at = Decoder::with_ip(64, &bytes[i..], entry + i as u64, DecoderOptions::NONE).decode();
                assert_eq!(at.code(), Op::Int3, "{bytes:02x?} at e+{i}");
            }
        }
        // With byte 0 fixed, one byte off breaks the pun.
        if boundaries & 1 << 1 != 0 {
            assert!(jump(entry, boundaries, to + 1).is_none() && jump(entry, boundaries, to - 1).is_none());
        }
    }
    assert!(jump(0x1000, 0, 0x1005 + 0x8000_0000).is_none());
    assert_eq!(
        jump(0x1000, 0, 0x1005).unwrap().as_slice(),
        &[0xe9, 0, 0, 0, 0],
        "a jump to the next instruction"
    );
}
