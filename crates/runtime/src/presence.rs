//! How the runtime came into the process — preloaded from its start, or
//! injected by `fntrace attach` — and whether an attach session is open.
//! The engine (what `dlopen` takes in) and the tracers (what a forked child
//! records) ask; attach control (`attach.rs`), the layer above both, sets.

use std::sync::atomic::{AtomicBool, Ordering};

/// A control thread is running (an attach session is open).
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The runtime was set up by an attach (not preloaded).
pub(crate) static ATTACHED: AtomicBool = AtomicBool::new(false);

/// Whether an attach session is open.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// Whether the runtime came into this process by `fntrace attach`.
pub fn attached() -> bool {
    ATTACHED.load(Ordering::Relaxed)
}
