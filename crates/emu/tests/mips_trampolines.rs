//! The MIPS trampolines and veneers on their own, under `qemu-user`.
//!
//! `harness/mips_trampolines.c` and `harness/mips_thunks.S`, linked into
//! the emulation harness (the distribution's default: PIC, abicalls, so
//! the C callback computes `gp` from `t9` and fails if `t9` is wrong). The
//! script lays out one 64 KB slot per piece of code at `BASE`, then enters
//! each through a thunk that recreates its site's entry state (`-pg`: `at`
//! = parent, `jalr v1`, the o32 `addiu sp, sp, -8` in the delay slot;
//! entry: `jalr at, at`, `t0` = 0|1, `ra` = parent), with every other GPR
//! and the FP argument registers set to known values, and a callback that
//! clobbers every caller-saved register. The harness checks `ip`,
//! `parent_ip`, `regs` (or null), and every register and `sp` after the
//! return.

use std::fmt::Write as _;

use fntrace_arch::mips::{Mips, MIPS32_BE, MIPS32_LE, MIPS64_LE};
use fntrace_arch::{Family, Patcher, TrampolineSpec};
use fntrace_emu::scenario::hexs;
use fntrace_emu::{build_with, emulate, workdir, Target, MIPS, MIPS64EL, MIPSEL};

const BASE: u64 = 0x3000_0000;
const SLOT: u64 = 0x1_0000;

/// The slots: three trampolines, three veneers to them.
fn pieces(m: &Mips, callback: u64) -> Vec<Vec<u8>> {
    let tramp = |slot: u64, family, regs| {
        m.trampoline(
            BASE + slot * SLOT,
            &TrampolineSpec {
                family,
                callback,
                regs,
            },
        )
        .unwrap()
    };
    vec![
        tramp(0, Family::Mcount, false),
        tramp(1, Family::Mcount, true),
        tramp(2, Family::Entry, false),
        m.veneer(BASE + 3 * SLOT, BASE).unwrap(),
        m.veneer(BASE + 4 * SLOT, BASE + 2 * SLOT).unwrap(),
        m.veneer(BASE + 5 * SLOT, BASE + SLOT).unwrap(),
    ]
}

/// What is entered: name, entry site, through a veneer, slot, `t0`,
/// registers expected.
const ENTERS: &[(&str, u8, u8, u64, u8, u8)] = &[
    ("mcount", 0, 0, 0, 0, 0),
    ("mcount regs", 0, 0, 1, 0, 1),
    ("entry t0=0", 1, 0, 2, 0, 1),
    ("entry t0=1", 1, 0, 2, 1, 0),
    ("veneer mcount", 0, 1, 3, 0, 0),
    ("veneer entry t0=0", 1, 1, 4, 0, 1),
    ("veneer entry t0=1", 1, 1, 4, 1, 0),
    ("veneer mcount regs", 0, 1, 5, 0, 1),
];

fn run_under_qemu(m: Mips, target: &Target) {
    let dir = workdir(&format!("{}-trampolines", target.triple));
    let opts: &[&str] = &["-Wall", "-G0"];
    let program = build_with(
        target,
        &dir,
        &[("mips_trampolines.c", opts), ("mips_thunks.S", opts)],
    );
    let callback = program.addr("callback");
    let mut script = format!("map {BASE:#x} {:#x}\n", 6 * SLOT);
    for (i, p) in pieces(&m, callback).iter().enumerate() {
        assert!(p.len() as u64 <= SLOT);
        writeln!(script, "load {:#x} {}", BASE + i as u64 * SLOT, hexs(p)).unwrap();
    }
    for &(name, entry, veneer, slot, t0, regs) in ENTERS {
        let at = BASE + slot * SLOT;
        writeln!(script, "enter {entry} {veneer} {at:x} {t0} {regs} {name}").unwrap();
    }
    script += "summary\n";
    let text = emulate(target, &program, &script);
    eprintln!("{m:?} (callback {callback:#x}): {text}");
    assert!(text.contains("ALL OK"), "{m:?}:\n{text}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn o32_little_endian_runs() {
    run_under_qemu(MIPS32_LE, &MIPSEL);
}

#[test]
fn o32_big_endian_runs() {
    run_under_qemu(MIPS32_BE, &MIPS);
}

#[test]
fn n64_little_endian_runs() {
    run_under_qemu(MIPS64_LE, &MIPS64EL);
}
