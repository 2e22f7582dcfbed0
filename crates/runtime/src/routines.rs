//! The common trampoline routines: what a trampoline slot jumps to, in
//! the assembly of the machine (`routines/x86_64.rs`,
//! `routines/aarch64.rs`). A routine saves what the callback may clobber
//! (or builds the whole [`Regs`] frame), calls the ops' callback with the
//! site's `ip`, its function's return address, the ops, the frame and the
//! return slot, and returns into the traced function. One routine per site
//! role and register frame, chosen by [`Variant`].

#[cfg_attr(target_arch = "aarch64", path = "routines/aarch64.rs")]
#[cfg_attr(target_arch = "x86_64", path = "routines/x86_64.rs")]
mod arch;

pub use arch::*;

/// Offsets of the callbacks in an ops (see `ops::RawOps`).
pub const ENTRY_OFFSET: usize = 8;
/// See [`ENTRY_OFFSET`].
pub const EXIT_OFFSET: usize = 16;

/// Which routine a slot jumps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    /// The site's role.
    pub role: fntrace_core::Role,
    /// Build the register frame.
    pub regs: bool,
}

/// The address of the routine for `variant`.
pub fn routine(variant: Variant) -> usize {
    arch::routine_of(variant.role, variant.regs) as usize
}
