//! What the core keeps: ops, modules, and one record per site.

use std::sync::Arc;

use fntrace_filter::Filter;

/// Most ops registered at once (a site's "wanted by" set is one word).
pub const MAX_OPS: usize = 64;

/// Index of an ops: its bit in a site's wanted-by mask.
pub type OpsId = u8;

/// Index of a module in the core.
pub type ModuleId = usize;

/// What an ops asks for (the kernel's `FTRACE_OPS_FL_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpsFlags {
    /// The callback gets the full register frame (`FTRACE_OPS_FL_SAVE_REGS`).
    pub save_regs: bool,
    /// The callback may change where the function continues: at most one
    /// such ops per function (`FTRACE_OPS_FL_IPMODIFY`). Implies registers.
    pub ipmodify: bool,
    /// The ops has an entry callback: it wants entry sites.
    pub entry: bool,
    /// The ops has an exit callback: it wants exit sites.
    pub exit: bool,
    /// The ops wants library calls: in an opt-in module, the functions
    /// other modules import that its filter selects by name, each behind
    /// its guard ([`Module::opt_in`]).
    pub libcalls: bool,
}

impl OpsFlags {
    /// Whether the ops needs the trampoline that saves every register: the
    /// one place this is decided (the core's `decide`, the runtime's
    /// `RawOps::wants_regs` and the emulated scenarios all ask it).
    #[inline]
    pub fn regs(&self) -> bool {
        self.save_regs || self.ipmodify
    }
}

/// A client of the core, as the core sees it.
#[derive(Debug, Clone)]
pub struct Ops {
    /// Its flags.
    pub flags: OpsFlags,
    /// The functions it wants (empty: all).
    pub filter: Filter,
    /// The functions it never wants.
    pub notrace: Filter,
}

/// Where a site is, for what it can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// At the function entry, before the prologue: the registers hold the
    /// arguments, and the function can be redirected.
    Entry,
    /// After the prologue (`mcount`): the arguments may be gone, no redirect.
    Mcount,
    /// At a function exit.
    Exit,
}

/// What a site should call, or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Target {
    /// Nothing: the site is a NOP.
    #[default]
    Nop,
    /// The trampoline of one ops, which calls its callback directly.
    Ops(OpsId),
    /// The list trampoline, which calls every ops that wants the site;
    /// `regs` if one of them wants the register frame.
    List {
        /// Save every register.
        regs: bool,
    },
}

/// One site (the kernel's `dyn_ftrace`): what the core decides (who wants
/// it, what is in effect) and, in `data`, what the runtime that acts on it
/// keeps (its address, form, bytes, trampoline slot): one record per site,
/// whatever the layer. The core never reads `data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteRecord<D = ()> {
    /// Index of the function in the module, if the site has one.
    pub function: Option<u32>,
    /// Where the site is.
    pub role: Role,
    /// The ops that want it: bit `i` for ops `i` (the kernel's ref count is
    /// its number of bits).
    pub wanted: u64,
    /// What the site calls now.
    pub in_effect: Target,
    /// The wanted set last committed: what the list walker sees.
    pub published: u64,
    /// A patch of this site failed: it is left alone from now on.
    pub failed: bool,
    /// Whether its guard is in effect (a site of an opt-in module).
    pub guarded: bool,
    /// The runtime's part of the record.
    pub data: D,
}

impl SiteRecord {
    /// A site not yet wanted by anyone, in effect a NOP.
    pub fn new(function: Option<u32>, role: Role) -> SiteRecord {
        SiteRecord::with(function, role, ())
    }
}

impl<D> SiteRecord<D> {
    /// A site not yet wanted by anyone, in effect a NOP, with the
    /// runtime's `data`.
    pub fn with(function: Option<u32>, role: Role, data: D) -> SiteRecord<D> {
        SiteRecord {
            function,
            role,
            wanted: 0,
            in_effect: Target::Nop,
            published: 0,
            failed: false,
            guarded: false,
            data,
        }
    }

    /// The number of ops that want the site.
    pub fn ref_count(&self) -> u32 {
        self.wanted.count_ones()
    }
}

/// A module (the executable or a library) and its sites.
#[derive(Debug, Clone)]
pub struct Module<D = ()> {
    /// The file name (`libm.so.6`), for `:mod:` filters.
    pub name: String,
    /// Symbol names of its functions (shared with whoever else keeps them:
    /// the runtime's function table).
    pub functions: Vec<Arc<str>>,
    /// Its sites, in the runtime's order.
    pub sites: Vec<SiteRecord<D>>,
    /// A library whose functions no compiler prepared: a filter selects
    /// them only by a pattern that names the module (`*:mod:libz`), and an
    /// ops that wants library calls selects the ones other modules import
    /// ([`Module::imported`]) by name, guarded so that only the calls the
    /// runtime's libcall mode allows reach it.
    pub opt_in: bool,
    /// Per function: another module calls it through an import (empty: none).
    pub imported: Vec<bool>,
    /// Per site of an opt-in module (empty otherwise): the ops that want it
    /// without its guard, by a pattern naming the module. A site is guarded
    /// when none of the ops that want it is among them.
    pub unguarded: Vec<u64>,
    /// Demangled names (and names without parameters), made when a filter
    /// first needs them (empty until then: a filter that selects
    /// everything never does, and 100,000 empty entries are 1,200 pages).
    pub(crate) demangled: Vec<Option<(String, Option<String>)>>,
}

impl<D> Module<D> {
    /// A module with these functions and sites.
    pub fn new<F: Into<Arc<str>>>(name: &str, functions: Vec<F>, sites: Vec<SiteRecord<D>>) -> Module<D> {
        Module {
            name: name.to_string(),
            opt_in: false,
            imported: Vec::new(),
            unguarded: Vec::new(),
            demangled: Vec::new(),
            functions: functions.into_iter().map(Into::into).collect(),
            sites,
        }
    }
}

/// A site whose target, or set of ops, must change (`from == to` when only
/// the set changes: a list site gaining or losing one of several ops).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The module.
    pub module: ModuleId,
    /// The site's index in the module.
    pub site: usize,
    /// What it calls now.
    pub from: Target,
    /// What it must call.
    pub to: Target,
    /// The ops that want it once the change is made.
    pub wanted: u64,
    /// Whether its guard is on once the change is made.
    pub guarded: bool,
}
