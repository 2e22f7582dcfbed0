//! The unwinder's and the loader's entry points in a process we attached
//! to. Preloaded, the runtime interposes `_Unwind_RaiseException`,
//! `__cxa_begin_catch`, `pthread_exit`... (`tracer/unwind.rs`) so that
//! hijacked return addresses are put back before an unwinder reads the
//! stack. Which functions a client wraps it says once (`set_client`): this
//! module names none. Loaded by `fntrace
//! attach` (`RTLD_LOCAL`, after every module was bound) it interposes
//! nothing, so it writes its wrappers into the GOT slots through which the
//! modules call those functions (the technique of `plthook`), and puts the
//! slots back when no thread has a hijacked return address left. `dlopen`
//! and `dlclose` are hooked the same way, so that a library loaded while
//! attached is taken in (and its slots hooked) at once, and one unloaded is
//! forgotten before its code could be written.
//!
//! A GOT slot is one aligned word: a thread calling through it at the
//! moment of the write reads either the old or the new address, and both
//! lead to the real function. Slots in RELRO pages are made writable for
//! the write only.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::file::ModuleFile;
use crate::{modules, sys};

/// Functions a client wraps and needs hooked in an attached process (the
/// tracer's unwinder wrappers: `tracer/unwind.rs`), given once.
#[derive(Debug, Clone)]
pub struct ClientHooks {
    /// The functions' names.
    pub names: Vec<&'static str>,
    /// Their wrappers, in the same order.
    pub wrappers: Vec<usize>,
    /// Told the real address of function `i` (never 0).
    pub set_real: fn(usize, usize),
}

static CLIENT: OnceLock<ClientHooks> = OnceLock::new();

/// Gives the client's hooks (once; later calls change nothing).
pub fn set_client(hooks: ClientHooks) {
    let _ = CLIENT.set(hooks);
}

/// A slot we wrote: its address, what it held, what we wrote.
struct Hooked {
    slot: usize,
    original: usize,
    wrapper: usize,
}

static HOOKED: Mutex<Vec<Hooked>> = Mutex::new(Vec::new());

fn hooked() -> std::sync::MutexGuard<'static, Vec<Hooked>> {
    HOOKED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes `value` into the word at `slot`, a GOT slot of a loaded module.
fn write_slot(slot: usize, value: usize) -> bool {
    let Some(prot) = sys::protection_at(slot) else {
        return false;
    };
    let writable = prot & libc::PROT_WRITE != 0;
    if !writable && sys::protect(slot, slot + 8, prot | libc::PROT_WRITE).is_err() {
        return false;
    }
    // SAFETY: `slot` is an aligned word of a GOT (a relocation target of a
    // loaded module, mapped and now writable); the dynamic linker is done
    // with it (or, lazily bound, only ever writes a final address to it).
    unsafe { (*(slot as *const AtomicUsize)).store(value, Ordering::Release) };
    if !writable {
        let _ = sys::protect(slot, slot + 8, prot);
    }
    true
}

fn read_slot(slot: usize) -> usize {
    // SAFETY: as in `write_slot`: a mapped, aligned word.
    unsafe { (*(slot as *const AtomicUsize)).load(Ordering::Acquire) }
}

/// Hooks every module's GOT slots of the unwinder's entry points; returns
/// how many slots hold a wrapper now.
pub fn install() -> usize {
    let client = CLIENT.get();
    let mut names: Vec<&str> = client.map(|c| c.names.clone()).unwrap_or_default();
    let n = names.len();
    names.extend(["dlopen", "dlclose"]);
    let mut wrappers: Vec<usize> = client.map(|c| c.wrappers.clone()).unwrap_or_default();
    wrappers.extend(crate::dlhook::wrappers());
    let real: Vec<usize> = names
        .iter()
        // The global scope, where our RTLD_LOCAL copy is not.
        .map(|name| crate::sys::lookup_global(name).unwrap_or(0))
        .collect();
    if let Some(client) = client {
        for (i, &addr) in real.iter().enumerate().take(n) {
            if addr != 0 {
                (client.set_real)(i, addr);
            }
        }
    }
    crate::dlhook::set_real(real[n], real[n + 1]);
    let mut hooked = hooked();
    for loaded in modules::loaded() {
        if crate::loader::ignored(&loaded) {
            continue;
        }
        let Ok(file) = ModuleFile::open(&loaded.path) else {
            continue;
        };
        let Ok(imports) = fntrace_sites::imports(file.bytes(), &names) else {
            continue;
        };
        for import in imports {
            let slot = loaded.bias.wrapping_add(import.slot as usize);
            let wrapper = wrappers[import.which];
            // Hooked already (an earlier dlopen): no need to look at the map.
            if real[import.which] == 0 || slot % 8 != 0 || hooked.iter().any(|h| h.slot == slot) {
                continue;
            }
            if sys::protection_at(slot).is_none() {
                continue;
            }
            let original = read_slot(slot);
            if original == wrapper {
                continue;
            }
            if write_slot(slot, wrapper) {
                hooked.push(Hooked {
                    slot,
                    original,
                    wrapper,
                });
            }
        }
    }
    hooked.len()
}

/// Puts back every slot that still holds our wrapper (a module unloaded
/// since is skipped); returns how many.
pub fn remove() -> usize {
    let mut hooked = hooked();
    let mut n = 0;
    for h in hooked.drain(..) {
        if sys::protection_at(h.slot).is_some()
            && read_slot(h.slot) == h.wrapper
            && write_slot(h.slot, h.original)
        {
            n += 1;
        }
    }
    n
}
