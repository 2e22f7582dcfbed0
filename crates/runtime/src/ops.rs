//! Ops as the trampolines see them: a fixed layout the routines read, the
//! table of registered ops by id, the recursion guard, and the list
//! dispatcher that the list trampoline calls.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, Ordering};

use fntrace_arch::Shape;
use fntrace_core::{bits, OpsFlags, Role, MAX_OPS};

use crate::index;
use crate::routines::Regs;
use crate::sys;

/// A callback: `ip` is the return address of the site's call (the first
/// byte after an entry site), `parent_ip` the traced function's return
/// address, `ops` the ops, `regs` the register frame (null unless the ops
/// asked for registers).
pub type Callback = unsafe extern "C" fn(ip: usize, parent_ip: usize, ops: *mut RawOps, regs: *mut Regs);

/// Flag: give the callback the register frame.
pub const FL_SAVE_REGS: u32 = 1;
/// Flag: the callback may change `regs.ip` (redirect); implies registers.
pub const FL_IPMODIFY: u32 = 2;
/// Flag: call the callback directly, without the recursion guard and the
/// `errno` save (the callback guarantees both itself).
pub const FL_RECURSION_SAFE: u32 = 4;
/// Flag: the ops wants library calls (`libcall.rs`) besides what its
/// filter selects.
pub const FL_LIBCALLS: u32 = 8;

/// An ops in memory. The routines read `entry` and `exit` at fixed offsets
/// (`routines::ENTRY_OFFSET`, `EXIT_OFFSET`). Never freed: a thread that
/// entered a trampoline just before the ops went away may still read it.
#[repr(C)]
#[derive(Debug)]
pub struct RawOps {
    /// The user's data (first, so that C can read it without a call).
    pub data: *mut c_void,
    /// What the routine calls at entry sites.
    pub entry: Option<Callback>,
    /// What the routine calls at exit sites.
    pub exit: Option<Callback>,
    /// The user's entry callback.
    pub user_entry: Option<Callback>,
    /// The user's exit callback.
    pub user_exit: Option<Callback>,
    /// `FL_*` flags.
    pub flags: u32,
    /// The client's own trampoline slots, per site ([`SiteSlot`]), if it
    /// has fast paths of its own.
    pub site_slot: Option<SiteSlot>,
}

/// What a client is told of a site it may want a slot of its own for.
#[derive(Debug, Clone, Copy)]
pub struct SlotSite {
    /// Entry, mcount or exit.
    pub role: Role,
    /// How it is switched.
    pub shape: Shape,
    /// Its function's id (`state::NO_FID` if none).
    pub fid: u32,
}

/// A client's per-site trampoline slots: for a site its ops wants, the
/// data word and routine of a slot of the site's own, or `None` for the
/// ops's shared slot (which calls its callbacks). A site keeps the slot
/// it was first given.
pub type SiteSlot = fn(&RawOps, &SlotSite) -> Option<(usize, usize)>;

// SAFETY: RawOps is immutable once made (`data` belongs to the user, who
// hands it to callbacks on any thread by registering the ops).
unsafe impl Sync for RawOps {}
// SAFETY: as above.
unsafe impl Send for RawOps {}

impl RawOps {
    /// A new ops, leaked: it lives as long as the process.
    pub fn leak(
        entry: Option<Callback>,
        exit: Option<Callback>,
        data: *mut c_void,
        flags: u32,
        site_slot: Option<SiteSlot>,
    ) -> &'static RawOps {
        let direct = flags & FL_RECURSION_SAFE != 0;
        Box::leak(Box::new(RawOps {
            data,
            entry: if direct {
                entry
            } else {
                entry.and(Some(guarded_entry as Callback))
            },
            exit: if direct {
                exit
            } else {
                exit.and(Some(guarded_exit as Callback))
            },
            user_entry: entry,
            user_exit: exit,
            flags,
            site_slot,
        }))
    }

    /// Its flags as the core sees them: the one translation of the `FL_*`
    /// bits and callbacks into [`OpsFlags`].
    pub fn core_flags(&self) -> OpsFlags {
        OpsFlags {
            save_regs: self.flags & FL_SAVE_REGS != 0,
            ipmodify: self.flags & FL_IPMODIFY != 0,
            entry: self.entry.is_some(),
            exit: self.exit.is_some(),
            libcalls: self.flags & FL_LIBCALLS != 0,
        }
    }

    /// Whether its callbacks get the register frame (the trampoline that
    /// saves every register): the core's [`OpsFlags::regs`] decides.
    #[inline]
    pub fn wants_regs(&self) -> bool {
        self.core_flags().regs()
    }

    /// The slot of its own that the client wants for `site`, if any.
    pub fn site_slot(&self, site: &SlotSite) -> Option<(usize, usize)> {
        self.site_slot.and_then(|f| f(self, site))
    }
}

/// The list "ops": its callbacks walk every ops that wants the site.
pub static LIST_OPS: RawOps = RawOps {
    data: std::ptr::null_mut(),
    entry: Some(LIST_ENTRY),
    exit: Some(LIST_EXIT),
    user_entry: None,
    user_exit: None,
    flags: 0,
    site_slot: None,
};

/// Registered ops by id: what the list dispatcher calls.
static TABLE: [AtomicPtr<RawOps>; MAX_OPS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_OPS];

/// Publishes (or, with `None`, retracts) ops `id` for the list dispatcher.
pub fn publish(id: u8, ops: Option<&'static RawOps>) {
    let ptr = ops.map_or(std::ptr::null_mut(), |o| o as *const RawOps as *mut RawOps);
    TABLE[id as usize].store(ptr, Ordering::Release);
}

thread_local! {
    /// Set while this thread runs a callback: a traced function called from
    /// a callback is not traced again.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Calls not made because the thread was already inside a callback (a
/// traced function called by a callback, or by a signal handler that
/// interrupted one).
pub static RECURSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs `f` unless this thread is already inside a callback, keeping
/// `errno` as the traced code left it.
fn guarded(f: impl FnOnce()) {
    let entered = BUSY.try_with(|busy| !busy.replace(true)).unwrap_or(false);
    if !entered {
        RECURSIONS.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let _errno = sys::ErrnoGuard::new();
    f();
    let _ = BUSY.try_with(|busy| busy.set(false));
}

unsafe extern "C" fn guarded_entry(ip: usize, parent: usize, ops: *mut RawOps, regs: *mut Regs) {
    // SAFETY: the routine passes the slot's ops, which is never freed.
    let callback = unsafe { (*ops).user_entry };
    if let Some(callback) = callback {
        // SAFETY: the user registered this callback for exactly this call.
        guarded(|| unsafe { callback(ip, parent, ops, regs) });
    }
}

unsafe extern "C" fn guarded_exit(ip: usize, parent: usize, ops: *mut RawOps, regs: *mut Regs) {
    // SAFETY: as in `guarded_entry`.
    let callback = unsafe { (*ops).user_exit };
    if let Some(callback) = callback {
        // SAFETY: as in `guarded_entry`.
        guarded(|| unsafe { callback(ip, parent, ops, regs) });
    }
}

/// What the routines really call: a [`Callback`] and, in `r8`, the
/// address of the traced function's return slot (tracers hijack it). A
/// client that wants the slot writes its callbacks with this type and
/// stores them through [`as_callback`].
pub type Callback5 = unsafe extern "C" fn(usize, usize, *mut RawOps, *mut Regs, *mut usize);

unsafe extern "C" fn list_entry(ip: usize, parent: usize, _: *mut RawOps, regs: *mut Regs, slot: *mut usize) {
    list(ip, parent, regs, slot, false);
}

unsafe extern "C" fn list_exit(ip: usize, parent: usize, _: *mut RawOps, regs: *mut Regs, slot: *mut usize) {
    list(ip, parent, regs, slot, true);
}

/// Calls every ops that wants the site of `ip` (the kernel's
/// `ftrace_ops_list_func`).
fn list(ip: usize, parent: usize, regs: *mut Regs, slot: *mut usize, exit: bool) {
    guarded(|| {
        let mask = index::wanted(ip);
        for id in bits(mask) {
            let ops = TABLE[id].load(Ordering::Acquire);
            if ops.is_null() {
                continue;
            }
            // SAFETY: published ops are leaked, so valid forever.
            let raw = unsafe { &*ops };
            let callback = if exit { raw.user_exit } else { raw.user_entry };
            let regs = if raw.wants_regs() {
                regs
            } else {
                std::ptr::null_mut()
            };
            if let Some(callback) = callback {
                // SAFETY: as in `as_callback`, every callback may be given the
                // slot; it was registered for sites this ops wants.
                let callback = unsafe { std::mem::transmute::<Callback, Callback5>(callback) };
                // SAFETY: the callback was registered for sites this ops wants.
                unsafe { callback(ip, parent, ops, regs, slot) };
            }
        }
    });
}

// The routines read the callbacks at these offsets.
const _: () = assert!(std::mem::offset_of!(RawOps, entry) == crate::routines::ENTRY_OFFSET);
const _: () = assert!(std::mem::offset_of!(RawOps, exit) == crate::routines::EXIT_OFFSET);

/// A [`Callback5`] as the routines store it (the one conversion: the list
/// dispatcher's callbacks and the tracers' go through it).
pub const fn as_callback(f: Callback5) -> Callback {
    // SAFETY: the routines pass a fifth argument (the return slot) in r8;
    // the SysV ABI lets a function with four parameters ignore it, and one
    // with five read it.
    unsafe { std::mem::transmute::<Callback5, Callback>(f) }
}
const LIST_ENTRY: Callback = as_callback(list_entry);
const LIST_EXIT: Callback = as_callback(list_exit);
