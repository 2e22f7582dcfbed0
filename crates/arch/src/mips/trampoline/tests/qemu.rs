//! The trampolines and veneers run for real, under `qemu-user`.
//!
//! `harness/harness.c` and `harness/harness.S` are cross-compiled into a
//! static program (the distribution's default: PIC, abicalls, so the C
//! callback computes `gp` from `t9` and fails if `t9` is wrong). Asked
//! `addr`, it prints the callback's address; the test then lays out one
//! 64 KB slot per piece of code at `BASE` in a file, and the program maps
//! the file there (RWX, `MAP_FIXED`), enters each through a thunk that
//! recreates its site's entry state (`-pg`: `at` = parent, `jalr v1`, the
//! o32 `addiu sp, sp, -8` in the delay slot; entry: `jalr at, at`, `t0` =
//! 0|1, `ra` = parent), with every other GPR and the FP argument registers
//! set to known values, and a callback that clobbers every caller-saved
//! register. It checks `ip`, `parent_ip`, `regs` (or null), and every
//! register and `sp` after the return.

use super::{have, scratch};
use crate::mips::trampoline::{trampoline, veneer};
use crate::mips::{Mips, MIPS32_BE, MIPS32_LE, MIPS64_LE};
use crate::plan::{Family, TrampolineSpec};
use std::process::Command;

const HARNESS_C: &str = include_str!("harness/harness.c");
const HARNESS_S: &str = include_str!("harness/harness.S");
const BASE: u64 = 0x3000_0000;
const SLOT: u64 = 0x1_0000;

/// The slots, in the order `harness.c` expects them.
fn image(m: &Mips, callback: u64) -> Vec<u8> {
    let tramp = |slot: u64, family, regs| {
        trampoline(
            m,
            BASE + slot * SLOT,
            &TrampolineSpec {
                family,
                callback,
                regs,
            },
        )
        .unwrap()
    };
    let pieces = [
        tramp(0, Family::Mcount, false),
        tramp(1, Family::Mcount, true),
        tramp(2, Family::Entry, false),
        veneer(m, BASE + 3 * SLOT, BASE).unwrap(),
        veneer(m, BASE + 4 * SLOT, BASE + 2 * SLOT).unwrap(),
        veneer(m, BASE + 5 * SLOT, BASE + SLOT).unwrap(),
    ];
    let mut file = Vec::new();
    for p in pieces {
        assert!(p.len() as u64 <= SLOT);
        file.extend_from_slice(&p);
        file.resize(file.len().next_multiple_of(SLOT as usize), 0);
    }
    file
}

fn run_under_qemu(m: Mips, prefix: &str, qemu: &str) {
    let cc = format!("{prefix}-gcc");
    if !have(&cc) || !have(qemu) {
        return;
    }
    let dir = scratch("qemu");
    std::fs::write(dir.join("harness.c"), HARNESS_C).unwrap();
    std::fs::write(dir.join("harness.S"), HARNESS_S).unwrap();
    let out = Command::new(&cc)
        .args([
            "-Wall",
            "-static",
            "-O2",
            "-G0",
            "-o",
            "harness",
            "harness.c",
            "harness.S",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cc}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exec = |args: &[&str]| {
        let out = Command::new(qemu)
            .arg(dir.join("harness"))
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status, text + &String::from_utf8_lossy(&out.stderr))
    };
    let (st, text) = exec(&["addr"]);
    assert!(st.success(), "{qemu} harness addr: {text}");
    let callback = u64::from_str_radix(text.trim(), 16).unwrap();
    std::fs::write(dir.join("code.bin"), image(&m, callback)).unwrap();
    let (st, text) = exec(&["run", dir.join("code.bin").to_str().unwrap()]);
    eprintln!("{m:?} (callback {callback:#x}): {text}");
    assert!(st.success() && text.contains("ALL OK"), "{m:?}: {st}\n{text}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn o32_little_endian_runs() {
    run_under_qemu(MIPS32_LE, "mipsel-linux-gnu", "qemu-mipsel");
}

#[test]
fn o32_big_endian_runs() {
    run_under_qemu(MIPS32_BE, "mips-linux-gnu", "qemu-mips");
}

#[test]
fn n64_little_endian_runs() {
    run_under_qemu(MIPS64_LE, "mips64el-linux-gnuabi64", "qemu-mips64el");
}
