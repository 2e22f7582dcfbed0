//! What the tracer knows per function id, read lock-free on every traced
//! call: whether the function has exit sites (then its return is not
//! hijacked), whether it is a `--graph-function`, and its triggers. A new
//! table is published (and the old one kept) when a library comes in.

use std::sync::atomic::{AtomicPtr, Ordering};

use fntrace_core::Role;
use fntrace_filter::demangle;
use fntrace_filter::{Filter, Names};

use std::sync::Arc;

use fntrace_format::args::ArgSpec;

use super::args::Specs;
use crate::index;
use crate::state::State;

/// The function has exit sites: its exits come from them.
pub const HAS_EXIT: u16 = 1;
/// A `--graph-function`.
pub const GRAPH: u16 = 2;
/// Trigger `trace_on`.
pub const TRACE_ON: u16 = 4;
/// Trigger `trace_off`.
pub const TRACE_OFF: u16 = 8;
/// Trigger `depth=N`.
pub const DEPTH: u16 = 16;
/// A `--notrace` function (hidden with its callees).
pub const NOTRACE: u16 = 32;
/// A C++ function (mangled name): compiled with unwind cleanups, so a
/// forced unwind (`pthread_exit`) runs its exit like an exception does.
pub const CXX: u16 = 64;
/// A function no compiler prepared (a bare site): its callers may keep
/// values in any register across its calls (gcc's `-fipa-ra`), so its
/// return trampoline keeps them all.
pub const PLAIN: u16 = 128;

/// Arguments to record (`-A`): its spec is [`spec`].
pub const ARGS: u16 = 256;
/// A return value to record (`-R`): its spec is [`spec`].
pub const RETVAL: u16 = 512;

/// An id no function has (a site outside any symbol): the engine's.
pub use crate::state::NO_FID;

/// The table.
#[derive(Debug, Default)]
pub struct Table {
    /// Flags by function id.
    pub flags: Vec<u16>,
    /// By function id, its value spec (`-A`, `-R`, `-a`); empty when no
    /// spec was given.
    pub spec: Vec<Option<Arc<ArgSpec>>>,
    /// By function id, the tag of its return value where the fast return
    /// path records it (`args::fast_ret_tag`), else 0; empty when no spec
    /// was given.
    pub ret_tag: Vec<u8>,
    /// `depth=N` by function id.
    pub depth: Vec<u16>,
    /// Each module's first function id and an address of its code (its
    /// lowest), by first function id: where a function lives, for the
    /// library-call guard's ranges (`libcall::skips_tail_call`).
    pub homes: Vec<(u32, usize)>,
}

static TABLE: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());

/// The table in force, if one was published.
#[inline]
fn table() -> Option<&'static Table> {
    let p = TABLE.load(Ordering::Acquire);
    // SAFETY: published tables are leaked, never freed: a non-null pointer
    // stays valid for ever.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The flags of `fid` (0 if unknown).
#[inline]
pub fn flags(fid: u32) -> u16 {
    table()
        .and_then(|t| t.flags.get(fid as usize).copied())
        .unwrap_or(0)
}

/// `fid`'s value spec, if it has one.
pub fn spec(fid: u32) -> Option<&'static ArgSpec> {
    table()?.spec.get(fid as usize)?.as_deref()
}

/// The tag of `fid`'s return value where the fast return path records it
/// (0: it does not).
#[inline]
pub fn ret_tag(fid: u32) -> u8 {
    table()
        .and_then(|t| t.ret_tag.get(fid as usize).copied())
        .unwrap_or(0)
}

/// An address in the code of the module of function `fid`.
pub fn home(fid: u32) -> Option<usize> {
    let t = table()?;
    let at = t.homes.partition_point(|&(first, _)| first <= fid);
    at.checked_sub(1).map(|i| t.homes[i].1)
}

/// The `depth=N` trigger of `fid`.
pub fn depth(fid: u32) -> u16 {
    table()
        .and_then(|t| t.depth.get(fid as usize).copied())
        .unwrap_or(0)
}

/// The function id of the site whose callback `ip` this is.
#[inline]
pub fn of_ip(ip: usize) -> u32 {
    index::lookup(ip).map_or(NO_FID, |e| e.words.fid[e.site as usize])
}

/// A trigger parsed from `FUNC@ACTION[,ACTION]`.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// Which functions.
    pub filter: Filter,
    /// `TRACE_ON`, `TRACE_OFF`, `DEPTH` bits.
    pub flags: u16,
    /// For `depth=N`.
    pub depth: u16,
}

/// Parses the triggers of `FNTRACE_TRIGGERS` (`fntrace_format::settings`
/// split them).
pub fn parse_triggers(items: &[String]) -> Result<Vec<Trigger>, String> {
    let mut out = Vec::new();
    for item in items {
        let (func, actions) = item
            .split_once('@')
            .ok_or_else(|| format!("trigger '{item}': expected FUNC@ACTION"))?;
        let filter = Filter::parse(&[func]).map_err(|e| format!("trigger '{item}': {e}"))?;
        let mut t = Trigger {
            filter,
            flags: 0,
            depth: 0,
        };
        for action in actions.split(',').map(str::trim) {
            match action {
                "trace_on" => t.flags |= TRACE_ON,
                "trace_off" => t.flags |= TRACE_OFF,
                a if a.starts_with("depth=") => {
                    t.depth = a[6..]
                        .parse()
                        .map_err(|_| format!("trigger '{item}': bad depth '{}'", &a[6..]))?;
                    t.flags |= DEPTH;
                }
                a => return Err(format!("trigger '{item}': unknown action '{a}'")),
            }
        }
        out.push(t);
    }
    Ok(out)
}

/// Rebuilds and publishes the table from the state's modules.
pub fn publish(state: &State, graph: &Filter, notrace: &Filter, triggers: &[Trigger], args: &Specs) {
    let n = state.functions.len();
    let mut table = Table {
        flags: vec![0; n],
        spec: if args.is_empty() {
            Vec::new()
        } else {
            vec![None; n]
        },
        ret_tag: if args.is_empty() { Vec::new() } else { vec![0; n] },
        depth: vec![0; n],
        homes: Vec::new(),
    };
    for (m, module) in state.mods.iter().enumerate() {
        let Some(module) = module else { continue };
        let Some(core) = state.core.module(m) else {
            continue;
        };
        if let Some((lo, _)) = module.loaded.code_span() {
            table.homes.push((module.fid_base, lo));
        }
        for record in &core.sites {
            let fid = record.data.fid as usize;
            if record.role == Role::Exit && fid < n {
                table.flags[fid] |= HAS_EXIT;
            }
            if record.data.kind == fntrace_sites::SiteKind::Bare && fid < n {
                table.flags[fid] |= PLAIN;
            }
        }
        for (i, symbol) in core.functions.iter().enumerate() {
            let fid = module.fid_base as usize + i;
            if fid < n && symbol.starts_with("_Z") {
                table.flags[fid] |= CXX;
            }
        }
        if graph.is_empty() && notrace.is_empty() && triggers.is_empty() && args.is_empty() {
            continue;
        }
        let first = module.fid_base as usize;
        for (i, symbol) in core.functions.iter().enumerate() {
            let fid = first + i;
            if fid >= n {
                break;
            }
            let demangled = demangle::demangle(symbol);
            let base = demangle::demangle_without_params(symbol);
            let names = Names {
                symbol,
                demangled: &demangled,
                base: base.as_deref(),
                module: &core.name,
            };
            if !graph.is_empty() && graph.selects(&names) {
                table.flags[fid] |= GRAPH;
            }
            if !notrace.is_empty() && notrace.selects(&names) {
                table.flags[fid] |= NOTRACE;
            }
            if let Some(spec) = args.of(fid as u32, &names) {
                if !spec.args.is_empty() {
                    table.flags[fid] |= ARGS;
                }
                if spec.retval.is_some() {
                    table.flags[fid] |= RETVAL;
                    // Not for a function no compiler prepared: its return
                    // trampoline keeps every register, and has no fast
                    // path for values.
                    if args.fast_returns && table.flags[fid] & PLAIN == 0 {
                        table.ret_tag[fid] = super::args::fast_ret_tag(&spec).unwrap_or(0);
                    }
                }
                table.spec[fid] = Some(spec);
            }
            for t in triggers {
                if t.filter.selects(&names) {
                    table.flags[fid] |= t.flags;
                    if t.flags & DEPTH != 0 {
                        table.depth[fid] = t.depth;
                    }
                }
            }
        }
    }
    table.homes.sort_unstable();
    let p = Box::leak(Box::new(table));
    TABLE.store(p, Ordering::Release);
}
