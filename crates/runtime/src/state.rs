//! The runtime's state: the core, the modules with their sites and pools,
//! and the one function that applies the core's changes to memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use fntrace_arch::{BreakpointPatcher, Code, NativePatcher, Shape, SlotLayout};
use fntrace_core::{Change, Core, OpsId, SiteRecord, Target, MAX_OPS};
use fntrace_filter::Filter;
use fntrace_sites::SiteKind;

use crate::error::{Error, Result};
use crate::index::{self, SiteWords};
use crate::mirror::Mirror;
use crate::modules::Loaded;
use crate::ops::{RawOps, SlotSite, LIST_OPS};
use crate::pool::Pool;
use crate::routines::{routine, Variant};
use crate::text::{self, Batch, BatchStats, Poke, Writer};

/// The runtime's part of a site's record (the core's [`SiteRecord`] holds
/// it as `data`, beside who wants the site and what is in effect): one
/// record per site.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    /// First byte, runtime address.
    pub addr: usize,
    /// How it is switched.
    pub shape: Shape,
    /// The kind of instrumentation.
    pub kind: SiteKind,
    /// The bytes there now.
    pub cur: Code,
    /// Its function's id ([`NO_FID`] if none).
    pub fid: u32,
    /// Its own trampoline slot, if a client asked for one (an ops's
    /// per-site slot: `ops::SiteSlot`); 0: none yet.
    pub slot: usize,
}

/// A site's record: the core's decisions and the runtime's [`Site`].
pub type Record = SiteRecord<Site>;

/// The function id of a site outside every function.
pub const NO_FID: u32 = fntrace_format::event::MAX_FID;

/// A function of a loaded module, by function id.
#[derive(Debug, Clone)]
pub struct FunctionRecord {
    /// The module's path.
    pub module: std::sync::Arc<str>,
    /// Runtime address.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
    /// Symbol name (shared with the core's module).
    pub name: std::sync::Arc<str>,
}

/// A loaded module and what the runtime made for it.
#[derive(Debug)]
pub struct ModState {
    /// Where it is.
    pub loaded: Loaded,
    /// Words shared with lock-free readers, derived from the records.
    pub words: &'static SiteWords,
    /// The id of its first function.
    pub fid_base: u32,
    /// The bytes the compiler left at the sites where they are not the
    /// canonical NOP (`-pg`, `-mfentry`, XRay sleds), by site index,
    /// ascending: given back at a detach (`originals.rs`). Most sites of
    /// `-fpatchable-function-entry` builds need none, so the records stay
    /// small (the kernel keeps none: it knows a site was `call mcount`).
    pub originals: Vec<(u32, Code)>,
    pools: Vec<Pool>,
    /// Slots by ops and routine: a few per ops, searched in order.
    slots: Vec<(SlotKey, usize)>,
    /// The mirror of its punned sites (`mirror.rs`), if any.
    mirror: Option<Mirror>,
}

/// What a shared slot is for: the ops (its address) and the routine.
type SlotKey = (usize, Variant);

impl ModState {
    /// A module with no pool yet.
    pub fn new(
        loaded: Loaded,
        records: &[Record],
        fid_base: u32,
        originals: Vec<(u32, Code)>,
        mirror: Option<Mirror>,
    ) -> ModState {
        let words = SiteWords::leak(records.iter().map(|r| r.data.fid).collect());
        ModState {
            loaded,
            words,
            fid_base,
            originals,
            pools: Vec::new(),
            slots: Vec::new(),
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
    /// The decisions, and the record of every site.
    pub core: Core<Site>,
    /// Modules by core id.
    pub mods: Vec<Option<ModState>>,
    /// The arch verbs.
    pub patcher: &'static NativePatcher,
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

impl State {
    /// A state with nothing taken in yet, patching through `patcher`;
    /// `live`: other threads may run the code it writes.
    pub fn new(patcher: &'static NativePatcher, sync: crate::sys::SyncMethod, live: bool) -> State {
        State {
            core: Core::default(),
            mods: Vec::new(),
            patcher,
            layout: patcher.slot_layout(),
            writer: Writer {
                live,
                sync,
                scratch: crate::sys::scratch_page(),
                patcher,
            },
            stats: Stats::default(),
            handles: HashMap::new(),
            by_id: [None; MAX_OPS],
            functions: Vec::new(),
        }
    }

    /// Republishes the lock-free index of every site.
    pub fn publish_index(&self) {
        let mut entries = Vec::new();
        for (m, records) in self.core.modules() {
            let Some(module) = self.mods.get(m).and_then(Option::as_ref) else {
                continue;
            };
            for (i, record) in records.sites.iter().enumerate() {
                let site = &record.data;
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
    /// batch, then commits each once with its outcome (the kernel's
    /// `ftrace_replace_code`, then `ftrace_update_record`); says why in
    /// `refused` for those refused.
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
        // The changes refused, in order: (index, why, the bytes found there
        // if known); the others are applied once the batch is written. The
        // bytes each writes go into its record's data as it is added: no
        // per-change result is kept (100,000 of them were fresh pages and
        // a second pass on the patching path).
        let mut refusals: Vec<(usize, String, Option<Code>)> = Vec::new();
        let mut writes = 0;
        for (c, change) in changes.iter().enumerate() {
            // The list walker must see a site's new set before the site
            // calls the list (a refused change publishes its old set back).
            module.words.wanted[change.site].store(change.wanted, Ordering::Release);
            if change.from == change.to {
                continue;
            }
            let Some((role, site)) = self.core.site_mut(m, change.site) else {
                continue;
            };
            let target = match change.to {
                Target::Nop => Ok(None),
                Target::Ops(id) => match self.by_id[id as usize] {
                    Some(ops) => {
                        let wanted = SlotSite {
                            role,
                            shape: site.shape,
                            fid: site.fid,
                        };
                        match ops.site_slot(&wanted) {
                            Some(_) if site.slot != 0 => Ok(site.slot),
                            Some((data, routine)) => module
                                .new_slot(&self.layout, data, routine)
                                .inspect(|&slot| site.slot = slot),
                            None => {
                                let variant = Variant {
                                    role,
                                    regs: ops.wants_regs(),
                                };
                                module.slot(&self.layout, (ops as *const RawOps as usize, variant))
                            }
                        }
                        .map(Some)
                    }
                    None => Err(format!("ops {id} has no callbacks")),
                },
                Target::List { regs } => {
                    let variant = Variant { role, regs };
                    module
                        .slot(&self.layout, (&LIST_OPS as *const RawOps as usize, variant))
                        .map(Some)
                }
            };
            let len = site.cur.len();
            let addr = site.addr as u64;
            let target = target.and_then(|t| t.map(|slot| module.call_target(site, slot)).transpose());
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
                batch.add(c, &poke).map(|()| new)
            });
            match added {
                Ok(new) => {
                    site.cur = new;
                    writes += 1;
                }
                Err(why) => {
                    // Refused before the write (not the bytes expected, no
                    // slot...): the record learns what is there.
                    let inside = ranges
                        .iter()
                        .any(|r| site.addr >= r.start && site.addr + len <= r.end);
                    // SAFETY: the bytes lie in an executable segment of a
                    // loaded module (checked above); code is written only
                    // under the state's lock, which we hold.
                    let now = inside.then(|| unsafe { text::read(site.addr, len) });
                    refusals.push((c, why, now));
                }
            }
        }
        module.pools.iter_mut().for_each(Pool::close);
        if writes > 0 {
            let before = refusals.len();
            for r in batch.write(&mut self.stats.batch) {
                refusals.push((r.key, r.reason, Some(r.now)));
            }
            if refusals.len() > before {
                refusals.sort_unstable_by_key(|r| r.0);
            }
            self.stats.batches += 1;
        }
        // Commit: each change once, with what the batch did.
        let mut next = refusals.into_iter().peekable();
        for (c, change) in changes.iter().enumerate() {
            let Some((_, why, now)) = next.next_if(|r| r.0 == c) else {
                self.core.commit(change, true);
                continue;
            };
            if let (Some(now), Some(d)) = (now, self.core.site_data_mut(m, change.site)) {
                d.cur = now;
            }
            self.core.commit(change, false);
            let published = self.core.module(m).map_or(0, |r| r.sites[change.site].published);
            module.words.wanted[change.site].store(published, Ordering::Release);
            refused.push(why);
        }
    }
}
