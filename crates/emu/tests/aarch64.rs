//! The AArch64 plans (`mov x9, x30; bl <trampoline>`, as the kernel
//! patches `-fpatchable-function-entry=2`; `bl _mcount` ↔ NOP for `-pg`),
//! run write by write on code from Debian's cross compiler under
//! qemu-aarch64, with a "module" 1 GiB away: beyond `bl`'s ±128 MB.

use fntrace_emu::{scenario, Areas, Variant, AARCH64};

/// Trampolines 16 MB from the code at 0x400000; the module at 1 GiB gets
/// veneers 8 MB from itself.
const AREAS: Areas = Areas {
    tramp: 0x0100_0000,
    near_veneers: 0x0180_0000,
    far_veneers: 0x4080_0000,
    stubs: 0x0200_0000,
};

fn names(list: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = list.iter().map(String::as_str).collect();
    v.sort();
    v
}

#[test]
fn aarch64_patchable_entry() {
    let variant = Variant {
        name: "entry2",
        near: &["-fpatchable-function-entry=2"],
        far: &["-fpatchable-function-entry=2"],
        fix_labels: false,
    };
    let outcome = scenario(&AARCH64, &variant, AREAS);
    assert_eq!(names(&outcome.veneered), ["mod_leaf", "mod_mid"]);
    assert!(outcome.redirected, "two NOPs redirect through a direct-call stub");
}

#[test]
fn aarch64_pg() {
    let variant = Variant {
        name: "pg",
        near: &["-pg"],
        far: &["-pg"],
        fix_labels: false,
    };
    let outcome = scenario(&AARCH64, &variant, AREAS);
    assert_eq!(names(&outcome.veneered), ["mod_leaf", "mod_mid"]);
    assert!(!outcome.redirected, "a -pg site comes after the prologue");
}
