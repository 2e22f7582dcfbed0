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

/// `dlopen`, then take in the new modules.
///
/// # Safety
/// As the C library's `dlopen`.
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
    static REAL: OnceLock<usize> = OnceLock::new();
    let Some(real) = next::<DlOpen>(&REAL, b"dlopen\0") else {
        return std::ptr::null_mut();
    };
    // SAFETY: forwarded as given.
    let handle = unsafe { real(file, mode) };
    if !handle.is_null() {
        let _errno = crate::sys::ErrnoGuard::new();
        crate::no_unwind("dlopen", || {
            let _ = api::with_state(|state| {
                loader::load_new(state, true);
                Ok(())
            });
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
    static REAL: OnceLock<usize> = OnceLock::new();
    let Some(real) = next::<DlClose>(&REAL, b"dlclose\0") else {
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
