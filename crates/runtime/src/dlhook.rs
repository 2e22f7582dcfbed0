//! Libraries loaded and unloaded at run time (the seeds' "modules"):
//! `dlopen` and `dlclose` are wrapped so that a new library's sites become
//! canonical NOPs under the filters in force as soon as it is loaded, and
//! an unloaded library's records are dropped.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use crate::{api, loader};

type DlOpen = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
type DlClose = unsafe extern "C" fn(*mut c_void) -> c_int;

fn next<T: Copy>(cell: &OnceLock<usize>, name: &[u8]) -> Option<T> {
    let addr = *cell.get_or_init(|| {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name finds the
        // definition after ours (the C library's).
        unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const c_char) as usize }
    });
    // SAFETY: `T` is the function pointer type of the symbol looked up.
    (addr != 0).then(|| unsafe { std::mem::transmute_copy(&addr) })
}

/// The real `dlopen` and `dlclose`: found with `RTLD_NEXT` when the
/// runtime is preloaded, given by `gothook` when it was injected.
static REAL_DLOPEN: OnceLock<usize> = OnceLock::new();
static REAL_DLCLOSE: OnceLock<usize> = OnceLock::new();

/// The real functions behind the wrappers (`fntrace attach`: the wrappers
/// are reached through GOT slots, not by interposition).
pub fn set_real(dlopen: usize, dlclose: usize) {
    let _ = REAL_DLOPEN.set(dlopen);
    let _ = REAL_DLCLOSE.set(dlclose);
}

/// The wrappers' own addresses (the exported names may resolve to the C
/// library's in a process the runtime was injected into).
pub fn wrappers() -> [usize; 2] {
    [
        wrapped_dlopen as *const () as usize,
        wrapped_dlclose as *const () as usize,
    ]
}

/// `dlopen`, then take in the new modules.
///
/// # Safety
/// As the C library's `dlopen`.
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
    // SAFETY: as the caller's.
    unsafe { wrapped_dlopen(file, mode) }
}

unsafe extern "C" fn wrapped_dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
    let Some(real) = next::<DlOpen>(&REAL_DLOPEN, b"dlopen\0") else {
        return std::ptr::null_mut();
    };
    // SAFETY: forwarded as given.
    let handle = unsafe { real(file, mode) };
    // Detached (the hooks stay while a thread may return through a hijacked
    // address): the process's code is its own; the next attach takes the
    // new modules in.
    if !handle.is_null() && (!crate::presence::attached() || crate::presence::active()) {
        let _errno = crate::sys::ErrnoGuard::new();
        let _work = crate::sys::RuntimeWork::new();
        crate::no_unwind("dlopen", || {
            let _ = api::with_state(|state| {
                loader::load_new(state, true);
                Ok(())
            });
            if crate::presence::attached() {
                // The new modules' GOT slots of the unwinder and the loader.
                crate::gothook::install();
            }
        });
    }
    handle
}

/// `dlclose`, then drop the modules that went away.
///
/// # Safety
/// As the C library's `dlclose`.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    // SAFETY: as the caller's.
    unsafe { wrapped_dlclose(handle) }
}

unsafe extern "C" fn wrapped_dlclose(handle: *mut c_void) -> c_int {
    let Some(real) = next::<DlClose>(&REAL_DLCLOSE, b"dlclose\0") else {
        return -1;
    };
    // SAFETY: forwarded as given.
    let r = unsafe { real(handle) };
    let _errno = crate::sys::ErrnoGuard::new();
    crate::no_unwind("dlclose", || {
        let _ = api::with_state(|state| {
            loader::unload_gone(state);
            Ok(())
        });
    });
    r
}
