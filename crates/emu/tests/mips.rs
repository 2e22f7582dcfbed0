//! The MIPS plans of the 004 and 001 seeds, run write by write on code
//! from Debian's cross compilers under qemu-user: MIPS32 o32 in both byte
//! orders and MIPS64 n64.

use fntrace_arch::mips::{bnel, reg, MIPS32_LE, NOP};
use fntrace_arch::{Code, Family, Patcher, Plan, PlanError, PlanSite, State, TrampolineSpec};
use fntrace_emu::{scenario, scenario_with, Areas, Target, Variant, MIPS, MIPS64EL, MIPSEL};

/// `-pg` as the kernel builds: `jal _mcount` near, `-mlong-calls` in the
/// far "module" (the 004 seed's `MODFLAGS += -mlong-calls`).
const PG: Variant = Variant {
    name: "pg",
    near: &["-pg", "-fno-pic", "-mno-abicalls"],
    far: &["-pg", "-mlong-calls", "-fno-pic", "-mno-abicalls"],
    fix_labels: false,
};

/// `-pg` in PIC code (Debian's default): `jalr t9` through the GOT; the
/// far module's sites cannot `jal` to the trampoline (the 000 seed's
/// "relocation overflow") and go through veneers.
const PG_PIC: Variant = Variant {
    name: "pg-pic",
    near: &["-pg"],
    far: &["-pg"],
    fix_labels: false,
};

/// The 001 seed: four NOPs at the entry (direct calls possible). The far
/// module calls the near code with `-mlong-calls`, as kernel modules do.
const ENTRY4: Variant = Variant {
    name: "entry4",
    near: &["-fpatchable-function-entry=4", "-fno-pic", "-mno-abicalls"],
    far: &[
        "-fpatchable-function-entry=4",
        "-mlong-calls",
        "-fno-pic",
        "-mno-abicalls",
    ],
    fix_labels: true,
};

/// Three NOPs: tracing and the regs switch, no redirect.
const ENTRY3: Variant = Variant {
    name: "entry3",
    near: &["-fpatchable-function-entry=3", "-fno-pic", "-mno-abicalls"],
    far: &[
        "-fpatchable-function-entry=3",
        "-mlong-calls",
        "-fno-pic",
        "-mno-abicalls",
    ],
    fix_labels: true,
};

/// Trampolines in the 256 MB region of the code at 0x400000.
const NEAR: Areas = Areas {
    tramp: 0x0e00_0000,
    near_veneers: 0x0d00_0000,
    far_veneers: 0x5d00_0000,
    stubs: 0x0c00_0000,
};

/// Trampolines in another region: every `jal` needs a veneer.
const FAR: Areas = Areas {
    tramp: 0x3000_0000,
    ..NEAR
};

fn names(list: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = list.iter().map(String::as_str).collect();
    v.sort();
    v
}

fn pg(target: &Target) {
    let near = scenario(target, &PG, NEAR);
    // Long calls reach anywhere; `jal` reaches the trampoline's region.
    assert!(near.veneered.is_empty(), "{:?}", near.veneered);
    assert!(!near.redirected);
    let far = scenario(target, &PG, FAR);
    // Each near `jal` site goes through a veneer; the long calls do not.
    assert_eq!(names(&far.veneered), ["calls_many", "leaf", "many", "mid"]);
    assert!(far.writes > 0 && far.runs > far.writes);
}

fn pg_pic(target: &Target) {
    let outcome = scenario(target, &PG_PIC, NEAR);
    assert_eq!(names(&outcome.veneered), ["mod_leaf", "mod_mid"]);
}

fn entry(target: &Target) {
    let four = scenario(target, &ENTRY4, NEAR);
    assert!(four.redirected, "four NOPs redirect");
    assert!(four.veneered.is_empty(), "`lui at` reaches any 32-bit address");
    let three = scenario(target, &ENTRY3, NEAR);
    assert!(!three.redirected, "three NOPs cannot redirect");
}

#[test]
fn mips_pg() {
    pg(&MIPS);
}

#[test]
fn mipsel_pg() {
    pg(&MIPSEL);
}

#[test]
fn mips64el_pg() {
    pg(&MIPS64EL);
}

#[test]
fn mips_pg_pic() {
    pg_pic(&MIPS);
}

#[test]
fn mipsel_pg_pic() {
    pg_pic(&MIPSEL);
}

#[test]
fn mips64el_pg_pic() {
    pg_pic(&MIPS64EL);
}

#[test]
fn mips_patchable_entry() {
    entry(&MIPS);
}

#[test]
fn mipsel_patchable_entry() {
    entry(&MIPSEL);
}

#[test]
fn mips64el_patchable_entry() {
    entry(&MIPS64EL);
}

/// The 004 seed's plan taken literally on o32: `jal _mcount` → `nop`. The
/// delay slot's `addiu sp, sp, -8` then runs without the `_mcount` that
/// undoes it (the 001 post's objection for MIPS32). Everything else as the
/// arch layer does it.
struct SeedNop;

impl Patcher for SeedNop {
    fn plan(&self, site: &PlanSite<'_>, from: State, to: State) -> Result<Plan, PlanError> {
        let never_taken = MIPS32_LE.bytes(bnel(reg::ZERO, reg::ZERO, 1));
        let mut writes = MIPS32_LE.plan(site, from, to)?;
        for w in &mut writes {
            if *w.bytes == never_taken[..] {
                w.bytes = Code::new(&MIPS32_LE.bytes(NOP)).expect("one word");
            }
        }
        Ok(writes)
    }
    fn reaches(&self, site: &PlanSite<'_>, target: u64) -> bool {
        MIPS32_LE.reaches(site, target)
    }
    fn return_address(&self, site: &PlanSite<'_>) -> Result<u64, PlanError> {
        MIPS32_LE.return_address(site)
    }
    fn veneer(&self, at: u64, to: u64) -> Result<Vec<u8>, PlanError> {
        MIPS32_LE.veneer(at, to)
    }
    fn veneer_len(&self) -> usize {
        MIPS32_LE.veneer_len()
    }
    fn direct_stub(&self, at: u64, replacement: u64) -> Result<Option<Vec<u8>>, PlanError> {
        MIPS32_LE.direct_stub(at, replacement)
    }
    fn trampoline(&self, at: u64, spec: &TrampolineSpec) -> Result<Vec<u8>, PlanError> {
        MIPS32_LE.trampoline(at, spec)
    }
    fn trampoline_align(&self, family: Family) -> u64 {
        MIPS32_LE.trampoline_align(family)
    }
}

/// Why the o32 off form is `bnel zero, zero`: with the seed's NOP the
/// scenario fails at the first off site that runs.
#[test]
fn mipsel_seed_nop_breaks_the_o32_stack() {
    let variant = Variant {
        name: "pg-seed-nop",
        ..PG
    };
    let failed = std::panic::catch_unwind(|| scenario_with(&MIPSEL, &variant, NEAR, Some(&SeedNop)));
    let _ = std::fs::remove_dir_all(fntrace_emu::workdir("mipsel-linux-gnu-pg-seed-nop"));
    let message = failed.expect_err("the seed's NOP must break the stack");
    let message = message.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("stack pointer changed") || message.contains("died"),
        "{message}"
    );
}
