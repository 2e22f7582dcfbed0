//! The runtime's state: the core, the modules with their sites and pools,
//! and the one function that applies the core's changes to memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use fntrace_arch::{BreakpointPatcher, Code, Shape, SlotLayout};
use fntrace_core::{Change, Core, OpsId, Role, Target, MAX_OPS};
use fntrace_filter::Filter;
use fntrace_sites::SiteKind;

use crate::error::{Error, Result};
use crate::index::{self, SiteWords};
use crate::mirror::Mirror;
use crate::modules::Loaded;
use crate::ops::{RawOps, FL_IPMODIFY, FL_SAVE_REGS, LIST_OPS};
use crate::pool::Pool;
use crate::routines::{routine, Variant};
use crate::text::{self, Batch, BatchStats, Poke, Writer};

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
    /// (address, bytes) of the sites whose original bytes were not their
    /// canonical NOP, in address order (`originals.rs`); kept only in an
    /// attached runtime, the one that can detach.
    pub originals: Vec<(usize, Code)>,
    pools: Vec<Pool>,
    /// Slots by ops and routine: a few per ops, searched in order.
    slots: Vec<(SlotKey, usize)>,
    /// Per-site slots of the tracer's fast path, by site index (kept; 0:
    /// none yet; empty until the first).
    site_slots: Vec<usize>,
    /// The mirror of its punned sites (`mirror.rs`), if any.
    mirror: Option<Mirror>,
}

/// What a shared slot is for: the ops (its address) and the routine.
type SlotKey = (usize, Variant);

impl ModState {
    /// A module with no pool yet.
    pub fn new(
        loaded: Loaded,
        sites: Vec<Site>,
        fid_base: u32,
        originals: Vec<(usize, Code)>,
        mirror: Option<Mirror>,
    ) -> ModState {
        let words = SiteWords::leak(sites.iter().map(|s| s.fid).collect());
        ModState {
            loaded,
            sites,
            words,
            fid_base,
            originals,
            pools: Vec::new(),
            slots: Vec::new(),
            site_slots: Vec::new(),
            mirror,
        }
    }

    /// Where the call of `site` goes for trampoline `slot`: the slot, or
    /// for a punned site its mirror slot, which is made to jump on to it.
    fn call_target(&self, site: &Site, slot: usize) -> Result<usize, String> {
        let Shape::Punned { .. } = site.shape else {
            return Ok(slot);
        };
        let ret = site.addr + site.cur.len();
        match &self.mirror {
            Some(m) if m.set(ret, slot) => Ok(m.slot_of(ret)),
            _ => Err(format!("site {:#x}: no mirror slot", site.addr)),
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

    /// The shared slot of `key` (made on first use).
    fn slot(&mut self, layout: &SlotLayout, key: SlotKey) -> Result<usize, String> {
        if let Some(&(_, slot)) = self.slots.iter().find(|(k, _)| *k == key) {
            return Ok(slot);
        }
        let slot = self.new_slot(layout, key.0, routine(key.1))?;
        self.slots.push((key, slot));
        Ok(slot)
    }

    /// The slot of site `i` with its own data word: the tracer's fast path
    /// reads the function id from it.
    fn site_slot(
        &mut self,
        layout: &SlotLayout,
        i: usize,
        data: usize,
        target: usize,
    ) -> Result<usize, String> {
        if let Some(&slot) = self.site_slots.get(i).filter(|&&s| s != 0) {
            return Ok(slot);
        }
        let slot = self.new_slot(layout, data, target)?;
        if self.site_slots.len() <= i {
            self.site_slots.resize(self.sites.len().max(i + 1), 0);
        }
        self.site_slots[i] = slot;
        Ok(slot)
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
    /// Runs of one-byte NOPs taken in while threads ran: punned, not
    /// merged into one NOP (`mirror.rs`).
    pub punned: usize,
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
    pub patcher: &'static dyn BreakpointPatcher,
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

    /// Gives back every slot of `ops`.
    pub fn release_slots(&mut self, ops: &'static RawOps) {
        let ptr = ops as *const RawOps as usize;
        for module in self.mods.iter_mut().flatten() {
            let mut k = 0;
            while k < module.slots.len() {
                if module.slots[k].0 .0 != ptr {
                    k += 1;
                    continue;
                }
                let ((_, variant), slot) = module.slots.swap_remove(k);
                if let Some(pool) = module.pools.iter_mut().find(|p| slot >= p.base && slot < p.end()) {
                    pool.release(slot, routine(variant));
                }
            }
        }
    }

    /// Applies the core's changes in one batch per module and commits them.
    pub fn apply(&mut self, mut changes: Vec<Change>) -> Result<()> {
        // The core lists changes module by module; keep each module's order.
        if changes.windows(2).any(|w| w[0].module > w[1].module) {
            changes.sort_by_key(|c| c.module);
        }
        let mut refused: Vec<String> = Vec::new();
        for run in changes.chunk_by(|a, b| a.module == b.module) {
            self.apply_module(run, &mut refused);
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

    /// Applies the changes of one module (`changes`, all of it) in one
    /// batch and commits them; says why in `refused` for those refused.
    fn apply_module(&mut self, changes: &[Change], refused: &mut Vec<String>) {
        let Some(m) = changes.first().map(|c| c.module) else {
            return;
        };
        let Some(module) = self.mods[m].as_mut() else {
            return;
        };
        let patcher = self.patcher;
        let ranges = text::ranges(&module.loaded);
        let mut batch = Batch::new(&ranges, self.writer, changes.len());
        let mut pokes = 0;
        for (c, change) in changes.iter().enumerate() {
            module.words.wanted[change.site].store(change.wanted, Ordering::Release);
            if change.from == change.to {
                self.core.commit(change, true);
                continue;
            }
            let site = module.sites[change.site];
            let target = match change.to {
                Target::Nop => Ok(None),
                Target::Ops(id) => match self.by_id[id as usize] {
                    Some(ops) => match crate::tracer::fast_slot(ops, &site) {
                        Some((data, target)) => module.site_slot(&self.layout, change.site, data, target),
                        None => {
                            let variant = Variant {
                                role: site.role,
                                regs: regs_of(ops),
                            };
                            module.slot(&self.layout, (ops as *const RawOps as usize, variant))
                        }
                    }
                    .map(Some),
                    None => Err(format!("ops {id} has no callbacks")),
                },
                Target::List { regs } => {
                    let variant = Variant {
                        role: site.role,
                        regs,
                    };
                    module
                        .slot(&self.layout, (&LIST_OPS as *const RawOps as usize, variant))
                        .map(Some)
                }
            };
            let len = site.cur.len();
            let addr = site.addr as u64;
            let target = target.and_then(|t| t.map(|slot| module.call_target(&site, slot)).transpose());
            let added = target.and_then(|t| {
                let new = match t {
                    None => patcher.make_nop(site.shape, len),
                    Some(t) => patcher.make_call(site.shape, addr, len, t as u64),
                }
                .map_err(|e| format!("site {:#x}: {e}", site.addr))?;
                let poke = Poke {
                    addr: site.addr,
                    old: site.cur,
                    new,
                    resume: patcher.resume(site.shape, addr, len, t.map(|t| t as u64)),
                };
                pokes += 1;
                batch.add(c, &poke).map(|()| new)
            });
            // Committed now, while the site's records are in cache, and
            // taken back below if the batch cannot write it.
            match added {
                Ok(new) => {
                    module.sites[change.site].cur = new;
                    self.core.commit(change, true);
                }
                Err(e) => {
                    self.core.commit(change, false);
                    refused.push(e);
                }
            }
        }
        module.pools.iter_mut().for_each(Pool::close);
        if pokes == 0 {
            return;
        }
        for r in batch.write(&mut self.stats.batch) {
            let change = &changes[r.key];
            module.sites[change.site].cur = r.now;
            self.core.commit(change, false);
            refused.push(r.reason);
        }
        self.stats.batches += 1;
    }
}
