//! The runtime's state: the core, the modules with their sites and pools,
//! and the one function that applies the core's changes to memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use fntrace_arch::{BreakpointPatcher, Code, NativePatcher, Resume, Shape, SlotLayout};
use fntrace_core::{Change, Core, OpsId, SiteRecord, Target, MAX_OPS};
use fntrace_filter::Filter;
use fntrace_sites::SiteKind;

use crate::bare::{BareSites, Extent, Rec};
use crate::error::{Error, Result};
use crate::index::{self, SiteWords};
use crate::mirror::Mirror;
use crate::modules::Loaded;
use crate::ops::{RawOps, SlotSite, LIST_OPS};
use crate::pool::Pool;
use crate::routines::{bare_routine, routine, Variant};
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
    /// Its bare sites that were ever selected, with their detours.
    pub bare: BareSites,
    /// The functions it calls in other modules by name (`libcall.rs`).
    pub imports: Vec<std::sync::Arc<str>>,
    /// Its IFUNC resolvers, by function index (`libcall::renames`).
    pub ifuncs: Vec<u32>,
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
            bare: BareSites::default(),
            imports: Vec::new(),
            ifuncs: Vec::new(),
        }
    }

    /// Where the call of `site` goes for trampoline `slot`: the slot; for
    /// a punned site its mirror slot, which is made to jump on to it (a
    /// bare site's target is its detour already: [`ModState::bare_target`]).
    fn call_target(&self, site: &Site, slot: usize) -> Result<usize, String> {
        if let Shape::Bare { .. } = site.shape {
            return Ok(slot);
        }
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
    /// The detour of bare site `i`, or why it has none.
    fn ready(&self, i: usize, site: &Site) -> Result<&crate::bare::Ready, String> {
        match self.bare.get(i) {
            Some(Rec::Ready(ready)) => Ok(ready),
            Some(Rec::Refused(why)) => Err(format!("site {:#x}: {why}", site.addr)),
            None => Err(format!("site {:#x}: not decoded", site.addr)),
        }
    }

    /// The detour of bare site `i`, its words set to `words` (the routine
    /// it calls, the ops, the routine's data).
    fn bare_target(&self, i: usize, site: &Site, words: [usize; 3]) -> Result<usize, String> {
        let ready = self.ready(i, site)?;
        ready.set_target(words);
        Ok(ready.landing)
    }

    /// The `ip` callbacks of site `i` get, if it has one yet.
    pub fn site_ip(&self, patcher: &NativePatcher, i: usize, site: &Site) -> Option<usize> {
        match site.shape {
            // Not `ready`, which words an error: this runs for every site
            // at every publication.
            Shape::Bare { .. } => match self.bare.get(i) {
                Some(Rec::Ready(ready)) => Some(ready.call_return),
                _ => None,
            },
            shape => Some(patcher.return_address(shape, site.addr as u64, site.cur.len()) as usize),
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
    /// Bare sites (functions no compiler prepared) taken in.
    pub bare: usize,
    /// Bare sites given a detour reached by a jump.
    pub bare_jump: usize,
    /// Bare sites given a detour reached by a trap (`int3` per call).
    pub bare_trap: usize,
    /// Bare sites selected but not patchable, by reason.
    pub bare_refused: BTreeMap<String, usize>,
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
    /// Imports resolved for library calls.
    pub resolved: crate::libcall::Resolved,
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
            resolved: Default::default(),
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
                let Some(ip) = module.site_ip(self.patcher, i, &record.data) else {
                    continue;
                };
                entries.push(index::Entry {
                    ip,
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
        if self.prepare_bare(m, changes) > 0 {
            // The new detours' `ip`s and their boundaries' entries must be
            // known before any thread can reach them.
            self.publish_index();
            self.publish_standing();
        }
        // The guards of a library's sites: callers skipped when wanted as
        // library calls only, and otherwise.
        let guards = self
            .core
            .module(m)
            .is_some_and(|x| x.opt_in)
            .then(|| [false, true].map(|g| crate::libcall::ranges(self, m, g)));
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
            let Some((role, site)) = self.core.site_mut(m, change.site) else {
                continue;
            };
            if let (Some(guards), true) = (&guards, change.to != Target::Nop) {
                if let Ok(ready) = module.ready(change.site, site) {
                    ready.set_guard(guards[change.guarded as usize]);
                }
            }
            if change.from == change.to {
                continue;
            }
            let bare = matches!(site.shape, Shape::Bare { .. });
            let target = match change.to {
                Target::Nop => Ok(None),
                // A bare site calls its routine without a slot: its detour's
                // words are set to the routine, the ops and the routine's
                // data, and its target is the detour.
                Target::Ops(id) if bare => match self.by_id[id as usize] {
                    Some(ops) => {
                        let wanted = SlotSite {
                            role,
                            shape: site.shape,
                            fid: site.fid,
                        };
                        let (data, routine) = ops.site_slot(&wanted).unwrap_or((0, bare_routine()));
                        let ops = ops as *const RawOps as usize;
                        module
                            .bare_target(change.site, site, [routine, ops, data])
                            .map(Some)
                    }
                    None => Err(format!("ops {id} has no callbacks")),
                },
                Target::List { .. } if bare => {
                    let ops = &LIST_OPS as *const RawOps as usize;
                    module
                        .bare_target(change.site, site, [bare_routine(), ops, 0])
                        .map(Some)
                }
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
                let poke = match site.shape {
                    Shape::Bare { boundaries, trap } => {
                        let ready = module.ready(change.site, site)?;
                        Poke {
                            addr: site.addr,
                            old: site.cur,
                            new: patcher
                                .make_bare(site.shape, addr, &ready.original, t.map(|t| t as u64))
                                .map_err(|e| format!("site {:#x}: {e}", site.addr))?,
                            // On: into the detour; off: its copy, untraced.
                            resume: Resume::At(t.map_or(ready.call_return, |_| ready.landing) as u64),
                            starts: if trap { 0 } else { boundaries },
                        }
                    }
                    shape => Poke {
                        addr: site.addr,
                        old: site.cur,
                        new: match t {
                            None => patcher.make_nop(shape, len),
                            Some(t) => patcher.make_call(shape, addr, len, t as u64),
                        }
                        .map_err(|e| format!("site {:#x}: {e}", site.addr))?,
                        resume: patcher.resume(shape, addr, len, t.map(|t| t as u64)),
                        starts: 0,
                    },
                };
                batch.add(c, &poke).map(|()| poke.new)
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
            // A bare site that cannot be patched is not an error: its
            // function is listed with the reason (`list --sites`), and
            // counted where the user looks.
            if let Some(Rec::Refused(reason)) = module.bare.get(change.site) {
                *self.stats.bare_refused.entry(reason.clone()).or_default() += 1;
                continue;
            }
            refused.push(why);
        }
    }
}

impl State {
    /// Gives the bare sites that `changes` (of module `m`) turn on for the
    /// first time their detours; returns how many were made.
    fn prepare_bare(&mut self, m: usize, changes: &[Change]) -> usize {
        let opt_in = self.core.module(m).is_some_and(|x| x.opt_in);
        let Some(module) = self.mods[m].as_mut() else {
            return 0;
        };
        for change in changes {
            if change.to == Target::Nop || change.from != Target::Nop {
                continue;
            }
            let Some((_, site)) = self.core.site_mut(m, change.site) else {
                continue;
            };
            if !matches!(site.shape, Shape::Bare { .. }) || module.bare.get(change.site).is_some() {
                continue;
            }
            let Some(extent) = extent(&self.functions, site.fid, &module.loaded) else {
                continue;
            };
            match module
                .bare
                .prepare(&module.loaded, change.site, site.addr, site.cur, extent, opt_in)
            {
                Rec::Ready(ready) => {
                    site.shape = ready.shape;
                    match ready.shape {
                        Shape::Bare { trap: true, .. } => {
                            self.stats.bare_trap += 1;
                            crate::bare::TRAPS.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => self.stats.bare_jump += 1,
                    }
                }
                Rec::Refused(_) => {
                    crate::bare::REFUSED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        module.bare.close();
        module.bare.take_new()
    }

    /// Republishes the standing trap table: the interior boundaries of
    /// every bare site with a jump, the first byte of every trap site.
    pub fn publish_standing(&self) {
        let mut entries = Vec::new();
        for module in self.mods.iter().flatten() {
            for (_, ready) in module.bare.ready() {
                match ready.shape {
                    // The trap is the site: it sends every call into the
                    // detour.
                    Shape::Bare { trap: true, .. } => {
                        entries.push((ready.entry, Resume::At(ready.landing as u64)))
                    }
                    _ => entries.extend(ready.interior.iter().map(|&(b, c)| (b, Resume::At(c as u64)))),
                }
            }
        }
        entries.sort_unstable_by_key(|e| e.0);
        crate::trap::publish_standing(crate::trap::Table { entries });
    }
}

/// Where the function `fid` is, and how far its bytes may be read.
fn extent(functions: &[FunctionRecord], fid: u32, loaded: &crate::modules::Loaded) -> Option<Extent> {
    let f = functions.get(fid as usize)?;
    let address = f.address as usize;
    let segment_end = loaded
        .exec
        .iter()
        .find(|&&(s, e, _)| address >= s && address < e)?
        .1;
    let next = functions
        .get(fid as usize + 1)
        .filter(|n| std::sync::Arc::ptr_eq(&n.module, &f.module) && n.address as usize > address)
        .map_or(segment_end, |n| n.address as usize);
    let size = f.size as usize;
    // A little of what follows, for the padding a short function's jump
    // may run into; never past the next function.
    let limit = next.min(segment_end).min(address + size + 64);
    Some(Extent { address, size, limit })
}
