//! AArch64: `-fpatchable-function-entry=2` sites patched as the kernel does
//! (`mov x9, x30; bl <trampoline>`), `BL`'s ±128 MB reach with PLT-like
//! veneers for far code, and `-pg`'s `bl _mcount`.
//!
//! The plans and site forms are described in `plan.rs`, the trampolines'
//! frame and register layout in `trampoline.rs` ([`FRAME_SIZE`],
//! [`SP_SLOT`], [`PC_SLOT`]).

mod encode;
mod isa;
mod plan;
mod runtime;
mod trampoline;

pub use encode::*;
pub use plan::{ENTRY_SITE_LEN, MCOUNT_SITE_LEN, MOV_X9_LR, VENEER_LEN};
pub use trampoline::{FRAME_SIZE, PC_SLOT, REGS_SLOTS, SP_SLOT};

/// The AArch64 instruction layer (little-endian).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Aarch64;

/// The AArch64 instruction layer.
pub const AARCH64: Aarch64 = Aarch64;

impl Aarch64 {
    /// The instruction word at the start of `code`, if there are 4 bytes.
    pub fn word(code: &[u8]) -> Option<u32> {
        Some(u32::from_le_bytes(code.get(..4)?.try_into().ok()?))
    }

    /// The bytes of a sequence of instruction words.
    pub fn code(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}
