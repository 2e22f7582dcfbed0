//! The runtime's state: the core, the modules with their sites and pools,
//! and the one function that applies the core's changes to memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use fntrace_arch::{Code, Patcher, Shape, SlotLayout};
use fntrace_core::{Change, Core, OpsId, Role, Target, MAX_OPS};
use fntrace_sites::filter::Filter;
use fntrace_sites::SiteKind;

use crate::error::{Error, Result};
use crate::index::{self, SiteWords};
use crate::modules::Loaded;
use crate::ops::{RawOps, FL_IPMODIFY, FL_SAVE_REGS, LIST_OPS};
use crate::pool::Pool;
use crate::routines::{routine, Variant};
use crate::text::{self, BatchStats, Poke, Writer};

/// A site as the runtime knows it.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    /// First byte, runtime address.
    pub addr: usize,
    /// How it is switched.
    pub shape: Shape,
    /// Entry, mcount or exit.
    pub role: Role,
    /// The kind of instrumentation.
    pub kind: SiteKind,
    /// The bytes there now.
    pub cur: Code,
    /// Its function's id (`tracer::fids::NO_FID` if none).
    pub fid: u32,
}

/// A function of a loaded module, by function id.
#[derive(Debug, Clone)]
pub struct FunctionRecord {
    /// The module's path.
    pub module: std::sync::Arc<str>,
    /// Runtime address.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
    /// Symbol name.
    pub name: String,
}

/// A loaded module and what the runtime made for it.
#[derive(Debug)]
pub struct ModState {
    /// Where it is.
    pub loaded: Loaded,
    /// Its sites (same order as the core's records).
    pub sites: Vec<Site>,
    /// Words shared with lock-free readers.
    pub words: &'static SiteWords,
    /// The id of its first function.
    pub fid_base: u32,
    pools: Vec<Pool>,
    slots: HashMap<(usize, Variant), usize>,
    /// Per-site slots of the tracer's fast path, by site index (kept).
    site_slots: HashMap<usize, usize>,
}

impl ModState {
    /// A module with no pool yet.
    pub fn new(loaded: Loaded, sites: Vec<Site>, fid_base: u32) -> ModState {
        let words = SiteWords::leak(sites.iter().map(|s| s.fid).collect());
        ModState {
            loaded,
            sites,
            words,
            fid_base,
            pools: Vec::new(),
            slots: HashMap::new(),
            site_slots: HashMap::new(),
        }
    }
}

impl ModState {
    /// A slot with this data word and routine, from a pool near the module
    /// (a new pool if the others are full).
    fn new_slot(&mut self, layout: &SlotLayout, data: usize, target: usize) -> Result<usize, String> {
        if let Some(slot) = self.pools.iter_mut().find_map(|p| p.alloc(layout, data, target)) {
            return Ok(slot);
        }
        let (lo, hi) = self.loaded.code_span().ok_or("module without code")?;
        let mut pool = Pool::near(lo, hi).map_err(|e| e.to_string())?;
        let slot = pool.alloc(layout, data, target);
        self.pools.push(pool);
        slot.ok_or_else(|| "cannot write a trampoline slot".to_string())
    }
}

/// What the runtime did, for `fntrace_stats` and `FNTRACE_VERBOSE`.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Modules with sites.
    pub modules: usize,
    /// Sites found.
    pub sites: usize,
    /// Sites turned into the canonical NOP at load.
    pub converted: usize,
    /// Sites that already were the canonical NOP.
    pub canonical: usize,
    /// Sites left alone, by reason.
    pub skipped: BTreeMap<String, usize>,
    /// Patch batches applied.
    pub batches: usize,
    /// Totals over all batches.
    pub batch: BatchStats,
    /// Site patches refused.
    pub refused: usize,
}

/// A user's ops, as registered or not.
#[derive(Debug)]
pub struct Handle {
    /// The ops.
    pub raw: &'static RawOps,
    /// The functions it wants.
    pub filter: Filter,
    /// The functions it never wants.
    pub notrace: Filter,
    /// Its id while registered.
    pub id: Option<OpsId>,
}

/// Everything the runtime owns.
pub struct State {
    /// The decisions.
    pub core: Core,
    /// Modules by core id.
    pub mods: Vec<Option<ModState>>,
    /// The arch verbs.
    pub patcher: &'static dyn Patcher,
    /// The trampoline slot layout.
    pub layout: SlotLayout,
    /// How to write code.
    pub writer: Writer,
    /// What was done.
    pub stats: Stats,
    /// User ops by address.
    pub handles: HashMap<usize, Handle>,
    /// Registered ops by id.
    pub by_id: [Option<&'static RawOps>; MAX_OPS],
    /// Every function of every module taken in, by function id.
    pub functions: Vec<FunctionRecord>,
}

fn regs_of(ops: &RawOps) -> bool {
    ops.flags & (FL_SAVE_REGS | FL_IPMODIFY) != 0
}

impl State {
    /// Republishes the lock-free index of every site.
    pub fn publish_index(&self) {
        let mut entries = Vec::new();
        for (m, module) in self.mods.iter().enumerate() {
            let Some(module) = module else { continue };
            for (i, site) in module.sites.iter().enumerate() {
                let len = site.cur.len();
                entries.push(index::Entry {
                    ip: self.patcher.return_address(site.shape, site.addr as u64, len) as usize,
                    module: m as u32,
                    site: i as u32,
                    words: module.words,
                });
            }
        }
        index::publish(entries);
    }

    /// The trampoline slot of `ops` for `variant` near module `m`.
    fn slot(&mut self, m: usize, ops: &'static RawOps, variant: Variant) -> Result<usize, String> {
        let layout = &self.layout;
        let module = self.mods[m].as_mut().ok_or("module gone")?;
        let key = (ops as *const RawOps as usize, variant);
        if let Some(&slot) = module.slots.get(&key) {
            return Ok(slot);
        }
        let slot = module.new_slot(layout, key.0, routine(variant))?;
        module.slots.insert(key, slot);
        Ok(slot)
    }

    /// The slot of site `i` of module `m` with its own data word: the
    /// tracer's fast path reads the function id from it.
    fn site_slot(&mut self, m: usize, i: usize, data: usize, target: usize) -> Result<usize, String> {
        let layout = &self.layout;
        let module = self.mods[m].as_mut().ok_or("module gone")?;
        if let Some(&slot) = module.site_slots.get(&i) {
            return Ok(slot);
        }
        let slot = module.new_slot(layout, data, target)?;
        module.site_slots.insert(i, slot);
        Ok(slot)
    }

    /// Gives back every slot of `ops`.
    pub fn release_slots(&mut self, ops: &'static RawOps) {
        let ptr = ops as *const RawOps as usize;
        for module in self.mods.iter_mut().flatten() {
            let keys: Vec<_> = module.slots.keys().filter(|k| k.0 == ptr).copied().collect();
            for key in keys {
                let slot = module.slots.remove(&key).expect("listed");
                if let Some(pool) = module.pools.iter_mut().find(|p| slot >= p.base && slot < p.end()) {
                    pool.release(slot, routine(key.1));
                }
            }
        }
    }

    /// Applies the core's changes in one batch per module and commits them.
    pub fn apply(&mut self, changes: Vec<Change>) -> Result<()> {
        let mut refused: Vec<String> = Vec::new();
        let mut by_module: BTreeMap<usize, Vec<(Change, Poke)>> = BTreeMap::new();
        for change in changes {
            let Some(module) = self.mods[change.module].as_ref() else {
                continue;
            };
            module.words.wanted[change.site].store(change.wanted, Ordering::Release);
            if change.from == change.to {
                self.core.commit(&change, true);
                continue;
            }
            let site = module.sites[change.site];
            let target = match change.to {
                Target::Nop => Ok(None),
                Target::Ops(id) => {
                    match self.by_id[id as usize].map(|o| (o, crate::tracer::fast_slot(o, &site))) {
                        Some((_, Some((data, target)))) => {
                            self.site_slot(change.module, change.site, data, target).map(Some)
                        }
                        Some((ops, None)) => {
                            let variant = Variant {
                                role: site.role,
                                regs: regs_of(ops),
                            };
                            self.slot(change.module, ops, variant).map(Some)
                        }
                        None => Err(format!("ops {id} has no callbacks")),
                    }
                }
                Target::List { regs } => self
                    .slot(
                        change.module,
                        &LIST_OPS,
                        Variant {
                            role: site.role,
                            regs,
                        },
                    )
                    .map(Some),
            };
            let len = site.cur.len();
            let new = target.and_then(|t| {
                let code = match t {
                    None => self.patcher.make_nop(site.shape, len),
                    Some(t) => self
                        .patcher
                        .make_call(site.shape, site.addr as u64, len, t as u64),
                };
                code.map(|c| (c, t)).map_err(|e| e.to_string())
            });
            match new {
                Ok((new, t)) => {
                    let resume = self
                        .patcher
                        .resume(site.shape, site.addr as u64, len, t.map(|t| t as u64));
                    let poke = Poke {
                        addr: site.addr,
                        old: site.cur,
                        new,
                        resume,
                    };
                    by_module.entry(change.module).or_default().push((change, poke));
                }
                Err(e) => {
                    self.core.commit(&change, false);
                    refused.push(format!("site {:#x}: {e}", site.addr));
                }
            }
        }
        for (m, work) in by_module {
            let module = self.mods[m].as_mut().expect("module of a change");
            let pokes: Vec<Poke> = work.iter().map(|w| w.1).collect();
            let results = text::apply(
                &pokes,
                &text::ranges(&module.loaded),
                self.writer,
                &mut self.stats.batch,
            );
            self.stats.batches += 1;
            for ((change, poke), result) in work.iter().zip(results) {
                match result {
                    Ok(()) => {
                        module.sites[change.site].cur = poke.new;
                        self.core.commit(change, true);
                    }
                    Err(e) => {
                        self.core.commit(change, false);
                        refused.push(e);
                    }
                }
            }
        }
        self.stats.refused += refused.len();
        match refused.first() {
            None => Ok(()),
            Some(first) => Err(Error::Refused {
                count: refused.len(),
                first: first.clone(),
            }),
        }
    }
}
