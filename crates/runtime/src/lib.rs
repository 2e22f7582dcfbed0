//! The fntrace runtime: a library loaded into the traced program (with
//! `LD_PRELOAD`, or linked in) that owns every patchable site and switches
//! each between NOP and call while the program's threads run.
//!
//! At load, before `main`, it discovers the sites of the executable and of
//! every loaded library, turns each into the canonical NOP of its length,
//! and from then on patches sites for the ops (clients) registered through
//! [`Ops`] or the C API (`include/fntrace.h`). Configured alone by
//! environment variables (see `docs/RUNTIME.md`).
//!
//! All of the project's `unsafe` code, inline assembly and code patching
//! live in this crate: `sys` (system calls), `text` (writing code), `trap`
//! (the SIGTRAP handler), `pool` (trampoline memory), `routines` (the
//! assembly), `ops`/`index` (what trampolines read), `modules`, `capi`,
//! `dlhook`. The decisions are made by `fntrace-core`, in safe Rust.

mod api;
mod attach;
mod bare;
mod capi;
mod client;
mod detour;
mod dlhook;
mod error;
mod file;
mod gothook;
mod index;
mod libcall;
mod loader;
mod mirror;
mod modules;
mod notify;
mod ops;
mod originals;
mod pool;
mod presence;
mod routines;
mod sigguard;
mod state;
#[cfg(test)]
mod state_tests;
mod sys;
mod text;
mod tracer;
mod trap;

pub use api::{lookup, parse_filter, sites, stats, Ops, SiteInfo};
pub use error::{Error, Result};
pub use ops::{Callback, RawOps, FL_IPMODIFY, FL_RECURSION_SAFE, FL_SAVE_REGS};
pub use routines::Regs;
pub use state::Stats;

use std::panic::{self, AssertUnwindSafe};

use fntrace_format::settings;

use crate::state::State;
use crate::sys::SyncMethod;

/// Runs `f`, turning a panic into a message and an abort: nothing unwinds
/// into the host.
pub(crate) fn no_unwind<R>(what: &str, f: impl FnOnce() -> R) -> R {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("fntrace: internal error in {what}; aborting");
            std::process::abort();
        }
    }
}

/// Sets the runtime up: called once, before `main`.
fn setup() -> std::result::Result<(), String> {
    let patcher = &fntrace_arch::NATIVE_PATCHER;
    let wanted = std::env::var(settings::SYNC).ok();
    let sync = SyncMethod::setup(wanted.as_deref());
    if sync != SyncMethod::SyncCore {
        eprintln!(
            "fntrace: membarrier SYNC_CORE {}; live patching syncs with {} (slower)",
            if wanted.is_some() {
                format!("not used ({})", settings::SYNC)
            } else {
                "unavailable".into()
            },
            sync.as_str()
        );
    }
    routines::setup();
    #[cfg(target_arch = "x86_64")]
    trap::install().map_err(|e| format!("cannot install the SIGTRAP handler: {e}"))?;
    let from_env = settings::Settings::from_env(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
    loader::want_library_names(from_env.is_ok_and(|s| s.names_modules()));
    let mut state = State::new(patcher, sync, true);
    // ftrace_init: while the process is single-threaded, plain writes.
    let live = sys::thread_count() > 1;
    loader::load_new(&mut state, live);
    if std::env::var_os(settings::VERBOSE).is_some() {
        let s = &state.stats;
        eprintln!(
            "fntrace: {} module(s), {} sites, {} converted, {} already canonical, {} punned, {} bare, skipped {:?}, sync {}",
            s.modules,
            s.sites,
            s.converted,
            s.canonical,
            s.punned,
            s.bare,
            s.skipped,
            sync.as_str()
        );
    }
    *api::lock() = Some(state);
    Ok(())
}

/// The path this library was loaded under, if it is the name `fntrace
/// attach` gives it: then nothing is set up here, in the thread the CLI
/// stopped, but in the control thread the attach starts.
fn loaded_for_attach() -> Option<String> {
    // SAFETY: dladdr fills `info` for an address inside a loaded object;
    // `dli_fname` is then a NUL-terminated string owned by the loader.
    let path = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(init as *const () as *const libc::c_void, &mut info) == 0 || info.dli_fname.is_null()
        {
            return None;
        }
        std::ffi::CStr::from_ptr(info.dli_fname)
            .to_string_lossy()
            .into_owned()
    };
    path.ends_with(fntrace_format::control::ATTACH_NAME)
        .then_some(path)
}

extern "C" fn init() {
    let _errno = sys::ErrnoGuard::new();
    let _work = sys::RuntimeWork::new();
    no_unwind("start-up", || {
        if let Some(path) = loaded_for_attach() {
            attach::from_constructor(&path);
            return;
        }
        if std::env::var_os(settings::DISABLE).is_some() {
            api::set_inactive(format!("disabled by {}", settings::DISABLE));
            return;
        }
        if let Some(recorder) = std::env::var(settings::NO_FOLLOW)
            .ok()
            .and_then(|v| v.parse::<i32>().ok())
        {
            // SAFETY: getppid cannot fail.
            if unsafe { libc::getppid() } != recorder {
                // A process the traced command started (`--no-follow`).
                api::set_inactive(format!("a child of the traced command ({})", settings::NO_FOLLOW));
                return;
            }
            tracer::no_follow();
        }
        if let Err(e) = setup() {
            eprintln!("fntrace: cannot set up: {e}; the program runs untraced");
            api::set_inactive(e);
            return;
        }
        if let Err(e) = client::start_from_env() {
            eprintln!("fntrace: {e}");
        }
        if let Err(e) = tracer::start_from_env() {
            eprintln!("fntrace: cannot trace: {e}; the program runs untraced");
        }
    });
}

/// Runs `init` when the library is loaded, before `main`.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
