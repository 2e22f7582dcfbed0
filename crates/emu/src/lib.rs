//! fntrace's patch plans for MIPS and AArch64, run for real: code built by
//! Debian's cross compilers runs under `qemu-user` in a small C harness
//! (`harness/harness.c`) that applies the plan's writes to its own code
//! one at a time, running the traced functions after every write. The
//! Rust side discovers the sites with `fntrace-sites`, keeps them in
//! `fntrace-core`'s site records (the same core and decision function as
//! on x86-64: ops registered, re-filtered, unregistered), asks the arch
//! layer (`fntrace-arch`) for trampolines, veneers and plans, writes the script
//! and checks every run against a model of the sites' states. Why qemu-user
//! and not an emulator library: see `docs/ARCHITECTURE.md`.
//!
//! The same harness, with a test's own C or assembly linked in
//! ([`build_with`]), runs the arch layer's trampolines, veneers and stubs
//! on their own: the AArch64 plans on functions of eight arguments with
//! the register frame checked (`tests/aarch64_trampolines.rs`), the MIPS
//! trampolines entered with every register set and checked after
//! (`tests/mips_trampolines.rs`).
#![forbid(unsafe_code)]

pub mod build;
mod expect;
pub mod labels;
pub mod scenario;

pub use build::{
    build, build_with, emulate, scenario, scenario_with, workdir, Program, Target, Variant, AARCH64, MIPS,
    MIPS64EL, MIPSEL,
};
pub use scenario::{Areas, Outcome};
