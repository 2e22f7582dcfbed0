//! The core: ops and modules in, changes out. It decides; the runtime acts
//! on the changes, then reports each one's outcome once with
//! [`Core::commit`] (the kernel's `ftrace_replace_code`, then
//! `ftrace_update_record`). The site records carry the runtime's data
//! (`D`), which only the runtime reads and writes ([`Core::data_mut`]).

use std::sync::Arc;

use fntrace_filter::{Filter, Names};

use crate::decide::{bits, decide};
use crate::model::{Change, Module, ModuleId, Ops, OpsFlags, OpsId, Role, Target, MAX_OPS};

/// Why the core refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// All ops slots are taken.
    #[error("too many ops registered at once (at most {MAX_OPS})")]
    TooManyOps,
    /// The ops is not registered.
    #[error("ops {0} is not registered")]
    NotRegistered(OpsId),
    /// Another ops already modifies the ip of a function this one selects.
    #[error("function '{function}' is already redirected by another ops (IPMODIFY is exclusive)")]
    Busy {
        /// The function.
        function: String,
    },
}

/// Every ops and every module, and what each site should call.
#[derive(Debug)]
pub struct Core<D = ()> {
    ops: Vec<Option<Ops>>,
    flags: Box<[OpsFlags; MAX_OPS]>,
    modules: Vec<Option<Module<D>>>,
}

impl<D> Default for Core<D> {
    fn default() -> Core<D> {
        Core::new()
    }
}

impl<D> Core<D> {
    /// An empty core.
    pub fn new() -> Core<D> {
        Core {
            ops: vec![None; MAX_OPS],
            flags: Box::new([OpsFlags::default(); MAX_OPS]),
            modules: Vec::new(),
        }
    }

    /// The registered ops `id`.
    pub fn ops(&self, id: OpsId) -> Option<&Ops> {
        self.ops.get(id as usize)?.as_ref()
    }

    /// The module `id`, if loaded.
    pub fn module(&self, id: ModuleId) -> Option<&Module<D>> {
        self.modules.get(id)?.as_ref()
    }

    /// The runtime's data of every site of module `id`, to change (the
    /// core's own fields stay the core's).
    pub fn data_mut(&mut self, id: ModuleId) -> impl Iterator<Item = &mut D> {
        self.modules
            .get_mut(id)
            .and_then(Option::as_mut)
            .into_iter()
            .flat_map(|m| m.sites.iter_mut().map(|s| &mut s.data))
    }

    /// The runtime's data of site `site` of module `id`, to change.
    pub fn site_data_mut(&mut self, id: ModuleId, site: usize) -> Option<&mut D> {
        Some(&mut self.modules.get_mut(id)?.as_mut()?.sites.get_mut(site)?.data)
    }

    /// The role of site `site` of module `id` and its runtime's data, to
    /// change (one lookup where the runtime needs both).
    pub fn site_mut(&mut self, id: ModuleId, site: usize) -> Option<(Role, &mut D)> {
        let record = self.modules.get_mut(id)?.as_mut()?.sites.get_mut(site)?;
        Some((record.role, &mut record.data))
    }

    /// Every loaded module with its id.
    pub fn modules(&self) -> impl Iterator<Item = (ModuleId, &Module<D>)> {
        self.modules
            .iter()
            .enumerate()
            .filter_map(|(i, m)| Some((i, m.as_ref()?)))
    }

    /// Whether `filter` selects a function that has a site, in any module
    /// (a filter that selects none would trace nothing).
    pub fn selects_any(&mut self, filter: &Filter) -> bool {
        self.modules.iter_mut().flatten().any(|m| {
            let mut functions: Vec<usize> = m
                .sites
                .iter()
                .filter_map(|s| s.function)
                .map(|f| f as usize)
                .collect();
            functions.sort_unstable();
            functions.dedup();
            let ops = Ops {
                flags: OpsFlags::default(),
                filter: filter.clone(),
                notrace: Filter::default(),
            };
            functions
                .into_iter()
                .any(|f| choose(&ops, true, m, f) != Choice::No)
        })
    }

    /// Adds a module whose sites are all NOPs now; returns its id and the
    /// changes that the registered ops want on it.
    pub fn add_module(&mut self, module: Module<D>) -> (ModuleId, Vec<Change>) {
        let id = self.modules.len();
        self.modules.push(Some(module));
        let registered: Vec<OpsId> = self.registered().collect();
        for ops in registered {
            self.select(id, ops, true);
        }
        (id, self.changes(Some(id)))
    }

    /// Marks functions of an opt-in module as imported by another module
    /// (loaded after it); returns the changes the registered ops want.
    pub fn mark_imported(&mut self, id: ModuleId, functions: &[usize]) -> Vec<Change> {
        let Some(Some(m)) = self.modules.get_mut(id) else {
            return Vec::new();
        };
        let mut new = false;
        for &f in functions.iter().filter(|&&f| f < m.functions.len()) {
            if m.imported.len() < m.functions.len() {
                m.imported.resize(m.functions.len(), false);
            }
            new |= !std::mem::replace(&mut m.imported[f], true);
        }
        if !new {
            return Vec::new();
        }
        let registered: Vec<OpsId> = self.registered().collect();
        for ops in registered {
            self.select(id, ops, true);
        }
        self.changes(Some(id))
    }

    /// Gives function `f` of module `id` another name (one discovery could
    /// not find, known otherwise: an import's).
    pub fn rename(&mut self, id: ModuleId, f: usize, name: Arc<str>) {
        if let Some(Some(m)) = self.modules.get_mut(id) {
            if let Some(slot) = m.functions.get_mut(f) {
                *slot = name;
                if let Some(cached) = m.demangled.get_mut(f) {
                    *cached = None;
                }
            }
        }
    }

    /// Forgets a module (unloaded: its code is gone, nothing to patch).
    pub fn remove_module(&mut self, id: ModuleId) -> Option<Module<D>> {
        self.modules.get_mut(id)?.take()
    }

    /// Registers an ops; returns its id and the changes to make.
    pub fn register(&mut self, ops: Ops) -> Result<(OpsId, Vec<Change>), CoreError> {
        let id = self
            .ops
            .iter()
            .position(Option::is_none)
            .ok_or(CoreError::TooManyOps)? as OpsId;
        self.flags[id as usize] = ops.flags;
        self.ops[id as usize] = Some(ops);
        if let Err(e) = self.check_ipmodify(id) {
            self.ops[id as usize] = None;
            return Err(e);
        }
        for module in 0..self.modules.len() {
            self.select(module, id, true);
        }
        Ok((id, self.changes(None)))
    }

    /// Unregisters an ops; returns the changes to make.
    pub fn unregister(&mut self, id: OpsId) -> Result<Vec<Change>, CoreError> {
        self.ops(id).ok_or(CoreError::NotRegistered(id))?;
        for module in 0..self.modules.len() {
            self.select(module, id, false);
        }
        self.ops[id as usize] = None;
        Ok(self.changes(None))
    }

    /// Replaces the filter and notrace set of an ops; returns the changes.
    pub fn set_filter(
        &mut self,
        id: OpsId,
        filter: Filter,
        notrace: Filter,
    ) -> Result<Vec<Change>, CoreError> {
        let ops = self.ops[id as usize]
            .as_mut()
            .ok_or(CoreError::NotRegistered(id))?;
        let old = std::mem::replace(
            ops,
            Ops {
                filter,
                notrace,
                flags: ops.flags,
            },
        );
        if let Err(e) = self.check_ipmodify(id) {
            self.ops[id as usize] = Some(old);
            return Err(e);
        }
        for module in 0..self.modules.len() {
            self.select(module, id, true);
        }
        Ok(self.changes(None))
    }

    /// Records the outcome of a change, once, after the runtime wrote it
    /// (or failed to): an applied one is in effect, with its wanted set
    /// published; a failed one marks its site failed, never to be touched
    /// again (ftrace_bug), with `change.from` still in effect.
    #[inline]
    pub fn commit(&mut self, change: &Change, applied: bool) {
        if let Some(Some(module)) = self.modules.get_mut(change.module) {
            if let Some(site) = module.sites.get_mut(change.site) {
                if applied {
                    site.in_effect = change.to;
                    site.published = change.wanted;
                    site.guarded = change.guarded;
                } else {
                    site.in_effect = change.from;
                    site.failed = true;
                }
            }
        }
    }

    fn registered(&self) -> impl Iterator<Item = OpsId> + '_ {
        self.ops
            .iter()
            .enumerate()
            .filter(|(_, o)| o.is_some())
            .map(|(i, _)| i as OpsId)
    }

    /// Sets (or, with `want` false, clears) ops `id`'s bit on the sites of
    /// `module` according to its filter.
    fn select(&mut self, module: ModuleId, id: OpsId, want: bool) {
        let Some(Some(m)) = self.modules.get_mut(module) else {
            return;
        };
        let bit = 1u64 << id;
        let ops = self.ops[id as usize].as_ref();
        let everything =
            !m.opt_in && ops.is_some_and(|o| want && o.filter.selects_everything() && o.notrace.is_empty());
        let flags = self.flags[id as usize];
        let chosen: Vec<Choice> = match ops {
            Some(ops) if want && !everything => (0..m.functions.len())
                .map(|f| choose(ops, flags.libcalls, m, f))
                .collect(),
            _ => Vec::new(),
        };
        // IPMODIFY is exclusive: never share a function with another one.
        let exclusive: u64 = if flags.ipmodify {
            (0..MAX_OPS)
                .filter(|&o| o != id as usize && self.flags[o].ipmodify && self.ops[o].is_some())
                .fold(0, |mask, o| mask | 1 << o)
        } else {
            0
        };
        if m.opt_in && m.unguarded.len() != m.sites.len() {
            m.unguarded.resize(m.sites.len(), 0);
        }
        for (i, site) in m.sites.iter_mut().enumerate() {
            let role_ok = match site.role {
                Role::Entry | Role::Mcount => flags.entry,
                Role::Exit => flags.exit,
            };
            let choice = if everything {
                Choice::Plain
            } else {
                site.function
                    .and_then(|f| chosen.get(f as usize).copied())
                    .unwrap_or(Choice::No)
            };
            let on = want && role_ok && site.wanted & exclusive == 0 && choice != Choice::No;
            if on {
                site.wanted |= bit;
            } else {
                site.wanted &= !bit;
            }
            if let Some(unguarded) = m.unguarded.get_mut(i) {
                if on && choice == Choice::Plain {
                    *unguarded |= bit;
                } else {
                    *unguarded &= !bit;
                }
            }
        }
    }

    /// The changes needed to bring sites (of one module, or all) to what
    /// their wanted sets decide, and to publish changed wanted sets.
    fn changes(&self, only: Option<ModuleId>) -> Vec<Change> {
        // At most one per site: reserved (untouched pages cost nothing), so
        // 100,000 changes are never copied to grow.
        let sites = self
            .modules()
            .filter(|(id, _)| only.is_none_or(|o| o == *id))
            .map(|(_, m)| m.sites.len())
            .sum();
        let mut out = Vec::with_capacity(sites);
        for (id, module) in self.modules() {
            if only.is_some_and(|o| o != id) {
                continue;
            }
            for (i, site) in module.sites.iter().enumerate() {
                let to = decide(site.wanted, &self.flags);
                let unguarded = module.unguarded.get(i).copied().unwrap_or(0);
                let guarded = module.opt_in && site.wanted != 0 && site.wanted & unguarded == 0;
                let moved = to != site.in_effect || site.wanted != site.published;
                if (moved || (to != Target::Nop && guarded != site.guarded)) && !site.failed {
                    out.push(Change {
                        module: id,
                        site: i,
                        from: site.in_effect,
                        to,
                        wanted: site.wanted,
                        guarded,
                    });
                }
            }
        }
        out
    }

    /// Refuses an IPMODIFY ops that selects a function another IPMODIFY ops
    /// already has.
    fn check_ipmodify(&mut self, id: OpsId) -> Result<(), CoreError> {
        if !self.flags[id as usize].ipmodify {
            return Ok(());
        }
        let others: u64 = self
            .registered()
            .filter(|&o| o != id && self.flags[o as usize].ipmodify)
            .fold(0, |mask, o| mask | 1 << o);
        let ops = self.ops[id as usize].clone().expect("registered");
        let flags = self.flags[id as usize];
        for m in self.modules.iter_mut().flatten() {
            for i in 0..m.sites.len() {
                let (function, wanted) = (m.sites[i].function, m.sites[i].wanted);
                let Some(f) = function else { continue };
                if wanted & others != 0 && choose(&ops, flags.libcalls, m, f as usize) != Choice::No {
                    return Err(CoreError::Busy {
                        function: m.functions[f as usize].to_string(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// How an ops selects a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// Not at all.
    No,
    /// As any function: every call traced.
    Plain,
    /// As a library call (an opt-in module's imported function): behind
    /// its guard.
    Libcall,
}

/// How `ops` selects function `f` of module `m`; `libcalls`: whether it
/// wants library calls. In an opt-in module only a pattern that names the
/// module selects plainly.
fn choose<D>(ops: &Ops, libcalls: bool, m: &mut Module<D>, f: usize) -> Choice {
    if !m.opt_in {
        if ops.filter.selects_everything() && ops.notrace.is_empty() {
            return Choice::Plain;
        }
        return match with_names(m, f, |names| selected(ops, names)) {
            true => Choice::Plain,
            false => Choice::No,
        };
    }
    let imported = libcalls && m.imported.get(f).copied().unwrap_or(false);
    with_names(m, f, |names| {
        if !selected(ops, names) {
            Choice::No
        } else if ops.filter.names_module(names) {
            Choice::Plain
        } else if imported {
            Choice::Libcall
        } else {
            Choice::No
        }
    })
}

/// Whether `ops`'s filter and notrace set select a function by its names.
fn selected(ops: &Ops, names: &Names<'_>) -> bool {
    ops.filter.selects(names) && (ops.notrace.is_empty() || !ops.notrace.selects(names))
}

/// `body` given the names of function `f` of module `m` (demangling its
/// name the first time a filter needs it).
fn with_names<D, R>(m: &mut Module<D>, f: usize, body: impl FnOnce(&Names<'_>) -> R) -> R {
    if m.demangled.len() < m.functions.len() {
        m.demangled.resize(m.functions.len(), None);
    }
    let symbol = &m.functions[f];
    let (demangled, base) = m.demangled[f].get_or_insert_with(|| {
        (
            fntrace_filter::demangle::demangle(symbol),
            fntrace_filter::demangle::demangle_without_params(symbol),
        )
    });
    body(&Names {
        symbol,
        demangled,
        base: base.as_deref(),
        module: &m.name,
    })
}

/// Iterates the ops ids in a wanted mask.
pub fn wanted_ops(mask: u64) -> impl Iterator<Item = OpsId> {
    bits(mask).map(|i| i as OpsId)
}
