//! The in-process API (Rust): register ops with a filter and callbacks,
//! change filters, list sites with their state — the analogue of the
//! kernel's `register_ftrace_function`, `ftrace_set_filter` and
//! `enabled_functions`. The C API (`fntrace.h`) wraps this.

use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard, OnceLock};

use fntrace_core::{Ops as CoreOps, Target};
use fntrace_filter::{first_unmatched, Filter};

use crate::error::{Error, Result};
use crate::index;
use crate::ops::{self, Callback, RawOps, SiteSlot};
use crate::state::{Handle, State, Stats};

static STATE: Mutex<Option<State>> = Mutex::new(None);
static INACTIVE: OnceLock<String> = OnceLock::new();

/// Locks the state (a panic elsewhere does not make it unusable: every
/// change to it is committed site by site).
pub(crate) fn lock() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on the state, if the runtime is active.
pub(crate) fn with_state<R>(f: impl FnOnce(&mut State) -> Result<R>) -> Result<R> {
    let mut guard = lock();
    match guard.as_mut() {
        Some(state) => f(state),
        None => Err(Error::NotActive(
            INACTIVE.get().cloned().unwrap_or_else(|| "not set up yet".into()),
        )),
    }
}

/// Records why the runtime is not active.
pub(crate) fn set_inactive(reason: String) {
    let _ = INACTIVE.set(reason);
}

/// Whitespace- or comma-separated filter patterns (as the settings'
/// lists are written: `fntrace_format::settings::patterns`).
fn patterns(text: &str) -> Vec<&str> {
    fntrace_format::settings::patterns(text).collect()
}

/// Parses whitespace- or comma-separated filter patterns.
pub fn parse_filter(text: &str) -> Result<Filter> {
    Ok(Filter::parse(&patterns(text))?)
}

/// The first of `patterns` that selects no function with a site in the
/// modules taken in, as a typo would (`first_unmatched`: a `!` pattern by
/// what it removes).
pub fn unmatched<S: AsRef<str>>(patterns: &[S]) -> Result<Option<String>> {
    Filter::parse(patterns)?;
    with_state(|state| {
        let first = first_unmatched(patterns, |filter| state.core.selects_any(filter));
        Ok(first.map(str::to_string))
    })
}

/// A client: callbacks, flags, a filter. Cheap to copy; lives forever.
#[derive(Debug, Clone, Copy)]
pub struct Ops(&'static RawOps);

impl Ops {
    /// A new ops, not registered, selecting every function.
    pub fn new(entry: Option<Callback>, exit: Option<Callback>, data: *mut c_void, flags: u32) -> Ops {
        Ops(RawOps::leak(entry, exit, data, flags, None))
    }

    /// A new ops, not registered, selecting every function, whose sites
    /// get trampoline slots of their own where `site_slot` says so (a
    /// client with fast paths: [`SiteSlot`]).
    pub fn with_site_slots(
        entry: Option<Callback>,
        exit: Option<Callback>,
        data: *mut c_void,
        flags: u32,
        site_slot: SiteSlot,
    ) -> Ops {
        Ops(RawOps::leak(entry, exit, data, flags, Some(site_slot)))
    }

    /// The ops behind a raw pointer given to a callback or the C API.
    ///
    /// Returns `None` unless `raw` was made by [`Ops::new`].
    pub fn from_raw(raw: *const RawOps) -> Option<Ops> {
        with_state(|state| Ok(state.handles.get(&(raw as usize)).map(|h| Ops(h.raw))))
            .ok()
            .flatten()
    }

    /// The raw ops (what callbacks receive).
    pub fn as_raw(&self) -> *mut RawOps {
        self.0 as *const RawOps as *mut RawOps
    }

    /// Whether its callbacks get the register frame ([`RawOps::wants_regs`]).
    pub fn wants_regs(&self) -> bool {
        self.0.wants_regs()
    }

    fn key(&self) -> usize {
        self.as_raw() as usize
    }

    /// The state's handle of this ops, made on first use.
    fn handle<'s>(&self, state: &'s mut State) -> &'s mut Handle {
        state.handles.entry(self.key()).or_insert_with(|| Handle {
            raw: self.0,
            filter: Filter::default(),
            notrace: Filter::default(),
            id: None,
        })
    }

    fn core_ops(&self, handle: &Handle) -> CoreOps {
        CoreOps {
            flags: self.0.core_flags(),
            filter: handle.filter.clone(),
            notrace: handle.notrace.clone(),
        }
    }

    /// Sets the functions the ops wants (`filter`, empty: all) and those it
    /// never wants (`notrace`), in ftrace's syntax; applied at once if the
    /// ops is registered.
    pub fn set_filter(&self, filter: &str, notrace: &str) -> Result<()> {
        self.set_patterns(&patterns(filter), &patterns(notrace))
    }

    /// [`set_filter`](Ops::set_filter) with lists of patterns.
    pub fn set_patterns<S: AsRef<str>>(&self, filter: &[S], notrace: &[S]) -> Result<()> {
        let (filter, notrace) = (Filter::parse(filter)?, Filter::parse(notrace)?);
        with_state(|state| {
            let handle = self.handle(state);
            let Some(id) = handle.id else {
                handle.filter = filter;
                handle.notrace = notrace;
                return Ok(());
            };
            let changes = state.core.set_filter(id, filter.clone(), notrace.clone())?;
            let handle = state.handles.get_mut(&self.key()).expect("present");
            handle.filter = filter;
            handle.notrace = notrace;
            state.apply(changes)
        })
    }

    /// Registers the ops: every site it wants calls it from now on.
    pub fn register(&self) -> Result<()> {
        with_state(|state| {
            let handle = self.handle(state);
            if handle.id.is_some() {
                return Err(Error::AlreadyRegistered);
            }
            let core_ops = self.core_ops(handle);
            let (id, changes) = state.core.register(core_ops)?;
            state.by_id[id as usize] = Some(self.0);
            ops::publish(id, Some(self.0));
            state.handles.get_mut(&self.key()).expect("present").id = Some(id);
            state.apply(changes)
        })
    }

    /// Unregisters the ops: when this returns, no site calls it any more
    /// (a thread that entered its trampoline before may still finish a call).
    pub fn unregister(&self) -> Result<()> {
        with_state(|state| {
            let id = state
                .handles
                .get(&self.key())
                .and_then(|h| h.id)
                .ok_or(Error::NotRegistered)?;
            let changes = state.core.unregister(id)?;
            let result = state.apply(changes);
            ops::publish(id, None);
            state.by_id[id as usize] = None;
            state.release_slots(self.0);
            if let Some(handle) = state.handles.get_mut(&self.key()) {
                handle.id = None;
            }
            result
        })
    }

    /// Whether the ops is registered.
    pub fn is_registered(&self) -> bool {
        with_state(|state| Ok(state.handles.get(&self.key()).is_some_and(|h| h.id.is_some())))
            .unwrap_or(false)
    }
}

/// One site and its state (a line of the kernel's `enabled_functions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteInfo {
    /// First byte of the site.
    pub address: usize,
    /// The `ip` callbacks get for it.
    pub ip: usize,
    /// The function's symbol name (empty if unknown).
    pub function: String,
    /// The module's file name.
    pub module: String,
    /// The kind of site (`fentry`, `mcount`, ...).
    pub kind: &'static str,
    /// An exit site (it calls exit callbacks).
    pub exit: bool,
    /// How many ops want it.
    pub ref_count: u32,
    /// What it calls now: `nop`, `ops` or `list`.
    pub state: &'static str,
    /// Whether its trampoline saves every register.
    pub regs: bool,
}

fn info(state: &State, m: usize, i: usize) -> Option<SiteInfo> {
    let core = state.core.module(m)?;
    let record = core.sites.get(i)?;
    let site = &record.data;
    let (what, regs) = match record.in_effect {
        Target::Nop => ("nop", false),
        Target::Ops(id) => ("ops", state.by_id[id as usize].is_some_and(RawOps::wants_regs)),
        Target::List { regs } => ("list", regs),
    };
    Some(SiteInfo {
        address: site.addr,
        ip: state
            .mods
            .get(m)
            .and_then(Option::as_ref)
            .and_then(|module| module.site_ip(state.patcher, i, site))
            .unwrap_or(0),
        function: record
            .function
            .and_then(|f| core.functions.get(f as usize))
            .map(|name| name.to_string())
            .unwrap_or_default(),
        module: core.name.clone(),
        kind: site.kind.as_str(),
        exit: record.role == fntrace_core::Role::Exit,
        ref_count: record.ref_count(),
        state: what,
        regs,
    })
}

/// Every site of every module.
pub fn sites() -> Result<Vec<SiteInfo>> {
    with_state(|state| {
        let mut out = Vec::new();
        for (m, module) in state.core.modules() {
            out.extend((0..module.sites.len()).filter_map(|i| info(state, m, i)));
        }
        Ok(out)
    })
}

/// The site whose callback `ip` this is.
pub fn lookup(ip: usize) -> Option<SiteInfo> {
    let entry = index::lookup(ip)?;
    with_state(|state| Ok(info(state, entry.module as usize, entry.site as usize)))
        .ok()
        .flatten()
}

/// What the runtime did so far.
pub fn stats() -> Result<Stats> {
    with_state(|state| Ok(state.stats.clone()))
}
