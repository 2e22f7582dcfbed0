//! Notifications the engine sends its clients: modules taken in. A client
//! (a tracer) subscribes once; the engine calls every subscriber with the
//! state locked, after a module's records exist and before the filters in
//! force are applied to it, so that the client's per-function data is
//! ready when its sites start calling. The engine never names a client.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::state::State;

/// A subscriber: called with the state locked when modules were added.
pub type ModulesAdded = fn(&State);

/// Subscribers, as addresses (0: free). A few words, not a lock: a `fork`
/// can never find them held.
static SUBSCRIBERS: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// Calls `f` whenever modules are added (once per subscriber: subscribing
/// the same function again changes nothing). False if every place is taken.
pub fn on_modules_added(f: ModulesAdded) -> bool {
    let addr = f as usize;
    for s in &SUBSCRIBERS {
        match s.compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(a) if a == addr => return true,
            Err(_) => {}
        }
    }
    false
}

/// Tells every subscriber that modules were added to `state`.
pub fn modules_added(state: &State) {
    for s in &SUBSCRIBERS {
        let addr = s.load(Ordering::Acquire);
        if addr != 0 {
            // SAFETY: only `on_modules_added` stores here, the address of a
            // `ModulesAdded` function (code lives as long as the process).
            let f = unsafe { std::mem::transmute::<usize, ModulesAdded>(addr) };
            f(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscriber_is_kept_once() {
        fn f(_: &State) {}
        assert!(on_modules_added(f));
        assert!(on_modules_added(f));
        let n = SUBSCRIBERS
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) == f as ModulesAdded as usize)
            .count();
        assert_eq!(n, 1);
    }
}
