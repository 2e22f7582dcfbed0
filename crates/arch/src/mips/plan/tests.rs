//! The plans' write orders against the seeds' text. (That each state is
//! safe to run is shown by running them: `crates/emu`.)

use super::*;
use crate::mips::{MIPS32_BE, MIPS32_LE, MIPS64_LE};

fn site(m: &Mips, addr: u64, words: &[u32], entry: bool) -> (Vec<u8>, u64, bool) {
    (m.code(words), addr, entry)
}

fn plan(m: &Mips, s: &(Vec<u8>, u64, bool), from: State, to: State) -> Result<Vec<(u64, u32)>, PlanError> {
    let site = PlanSite {
        addr: s.1,
        original: &s.0,
        entry: s.2,
    };
    Ok(m.plan(&site, from, to)?
        .into_iter()
        .map(|w| (w.addr, m.word(&w.bytes).unwrap()))
        .collect())
}

// Real gcc 12 output (`-O2`), o32.
const JAL_O32: [u32; 3] = [0x03e00825, 0x0c000000, 0x27bdfff8];
const PIC_O32: [u32; 5] = [0x03e00825, 0x27bdfff8, 0x8f998018, 0x0320f809, 0x00000000];
const LONG_O32: [u32; 5] = [0x3c030000, 0x24630000, 0x03e00825, 0x0060f809, 0x27bdfff8];
// n64.
const JAL_N64: [u32; 3] = [0x03e00825, 0x0c000000, 0x00000000];
const LONG_N64: [u32; 9] = [
    0x3c030000, 0x3c010000, 0x64630000, 0x64210000, 0x0003183c, 0x0061182d, 0x03e00825, 0x0060f809,
    0x00000000,
];

#[test]
fn jal_site_is_one_write_each_way() {
    let s = site(&MIPS32_BE, 0x400100, &JAL_O32, false);
    let on = State::Call {
        target: 0x0e00_0000,
        regs: false,
    };
    // Off: a never-taken branch-likely annuls the delay slot's sp adjust.
    assert_eq!(
        plan(&MIPS32_BE, &s, State::Original, State::Off).unwrap(),
        [(0x400104, 0x5400_0001)]
    );
    assert_eq!(
        plan(&MIPS32_BE, &s, State::Off, on).unwrap(),
        [(0x400104, e::jal(0x0e00_0000))]
    );
    assert_eq!(
        plan(&MIPS32_BE, &s, on, State::Off).unwrap(),
        [(0x400104, 0x5400_0001)]
    );
    // n64 has no adjust: the 004 seed's NOP.
    let s = site(&MIPS64_LE, 0x400100, &JAL_N64, false);
    assert_eq!(
        plan(&MIPS64_LE, &s, State::Original, State::Off).unwrap(),
        [(0x400104, 0)]
    );
}

#[test]
fn jal_beyond_the_region_needs_a_veneer() {
    let s = site(&MIPS32_LE, 0x0fff_fff0, &JAL_O32, false);
    let ps = PlanSite {
        addr: s.1,
        original: &s.0,
        entry: false,
    };
    // The delay slot (0x0ffffff8) decides the region: 0x0...
    assert!(MIPS32_LE.reaches(&ps, 0x0e00_0000));
    assert!(!MIPS32_LE.reaches(&ps, 0x1000_0000));
    let err = plan(
        &MIPS32_LE,
        &s,
        State::Off,
        State::Call {
            target: 0x1000_0000,
            regs: false,
        },
    );
    assert!(matches!(err, Err(PlanError::Reach { .. })));
}

#[test]
fn pic_site_off_undoes_the_adjust_before_the_call() {
    let s = site(&MIPS32_LE, 0x400200, &PIC_O32, false);
    assert_eq!(
        plan(&MIPS32_LE, &s, State::Original, State::Off).unwrap(),
        [(0x40020c, e::addiu(reg::SP, reg::SP, 8))]
    );
}

#[test]
fn long_call_follows_the_004_seed() {
    let s = site(&MIPS32_BE, 0x5000_0000, &LONG_O32, false);
    // Off is `b 1f`, 0x10000004: over the jalr and its delay slot.
    assert_eq!(
        plan(&MIPS32_BE, &s, State::Original, State::Off).unwrap(),
        [(0x5000_0000, 0x1000_0004)]
    );
    // On: the low half first (in the branch's delay slot), `lui` last.
    let t = 0x0e01_8004;
    assert_eq!(
        plan(
            &MIPS32_BE,
            &s,
            State::Off,
            State::Call {
                target: t,
                regs: false
            }
        )
        .unwrap(),
        [(0x5000_0004, 0x2463_8004), (0x5000_0000, 0x3c03_0e02)]
    );
    // n64: `b` over nine words, then five address words, `lui v1` last.
    let s = site(&MIPS64_LE, 0x5000_0000, &LONG_N64, false);
    let w = plan(
        &MIPS64_LE,
        &s,
        State::Original,
        State::Call {
            target: t,
            regs: false,
        },
    )
    .unwrap();
    assert_eq!(w.first(), Some(&(0x5000_0000, e::b(8))));
    assert_eq!(w.last().unwrap().0, 0x5000_0000);
}

#[test]
fn entry_site_follows_the_001_seed() {
    let m = MIPS64_LE;
    let s = site(&m, 0x400300, &[0; 4], true);
    let caller = 0x0e00_0000;
    let on = State::Call {
        target: caller,
        regs: true,
    };
    let lui = e::lui(reg::AT, 0x0e00);
    let jalr = e::jalr(reg::AT, reg::AT);
    // Enable: `lui at` and `li t0` while the middle word is a NOP, `jalr at, at` last.
    let w = plan(&m, &s, State::Off, on).unwrap();
    assert_eq!(w.last(), Some(&(0x400304, jalr)));
    assert!(w.contains(&(0x400300, lui)) && w.contains(&(0x400308, e::li(reg::T0_N64, 0))));
    // Disable: one write, jalr → nop.
    assert_eq!(plan(&m, &s, on, State::Off).unwrap(), [(0x400304, 0)]);
    // Regs → no regs: one write, `li t0, 0` → `li t0, 1`.
    let no_regs = State::Call {
        target: caller,
        regs: false,
    };
    assert_eq!(
        plan(&m, &s, on, no_regs).unwrap(),
        [(0x400308, e::li(reg::T0_N64, 1))]
    );
    // The caller must be 64 KB-aligned: `lui at` has no low half.
    assert!(plan(
        &m,
        &s,
        State::Off,
        State::Call {
            target: caller + 0x100,
            regs: true
        }
    )
    .is_err());
    // Direct call: nop, B' high, B' low, (nop), `jr at` last.
    let b2 = 0x0040_1234;
    let w = plan(&m, &s, on, State::Redirect { to: b2 }).unwrap();
    assert_eq!(
        w,
        [
            (0x400304, 0),
            (0x400300, e::lui(reg::AT, e::hi(b2))),
            (0x400304, e::addiu(reg::AT, reg::AT, e::lo(b2))),
            (0x400308, e::jr(reg::AT)),
        ]
    );
    // Three NOPs cannot redirect.
    let s3 = site(&m, 0x400300, &[0; 3], true);
    assert!(matches!(
        plan(&m, &s3, State::Off, State::Redirect { to: b2 }),
        Err(PlanError::Unsupported(_))
    ));
}

#[test]
fn garbage_is_refused() {
    let s = site(&MIPS32_BE, 0x400000, &[0x1234_5678, 0x0c00_0000, 0], false);
    assert!(matches!(
        plan(&MIPS32_BE, &s, State::Original, State::Off),
        Err(PlanError::Form(_))
    ));
    let s = (vec![1, 2, 3], 0x400000, false);
    assert!(plan(&MIPS32_BE, &s, State::Original, State::Off).is_err());
}
