//! The scenario every target and site form goes through: the sites found
//! by discovery, kept in `fntrace-core`'s site records, whose decisions
//! (register, re-filter, unregister two ops) are carried out by the arch
//! layer's plans write by write — init, enable (through veneers where a
//! call cannot reach), regs ↔ no-regs, the other ops' trampoline, redirect
//! and back, disable, restore — with every test function run after every
//! single write and checked.
//!
//! What the core's changes need — the trampolines, a veneer where a call
//! cannot reach, a direct-call stub — is placed by the arch layer's
//! [`Placer`], the library code the runtime uses too; the test's part is
//! the memory ([`AreaSpace`]: fixed areas the harness maps) and the script.

use std::collections::HashMap;

use fntrace_arch::{
    CodeKind, Family, Load, NoRoom, Patcher, Placer, Plan, PlanError, PlanSite, Request, Space, State,
    TrampolineSpec, Want,
};
use fntrace_core::{Change, Core, Module, ModuleId, Ops, OpsFlags, OpsId, Role, SiteRecord, Target as Goal};
use fntrace_filter::Filter;

use crate::build::{emulate, Program, Target};
use crate::expect::{Expect, Model, Tramp};

/// Where the test places generated code.
#[derive(Debug, Clone, Copy)]
pub struct Areas {
    /// The trampolines (two, `0x10000` apart).
    pub tramp: u64,
    /// Veneers for sites in the near code.
    pub near_veneers: u64,
    /// Veneers for sites in the far module.
    pub far_veneers: u64,
    /// Direct-call stubs.
    pub stubs: u64,
}

/// Trampolines are placed this far apart, from [`Areas::tramp`].
const TRAMP_STRIDE: u64 = 0x10000;

/// The test's [`Areas`] as the placer's memory: trampolines one after the
/// other from `tramp`, veneers in the near or the far area by where their
/// site is, stubs from `stubs`.
#[derive(Debug)]
pub struct AreaSpace {
    next_tramp: u64,
    next_near: u64,
    next_far: u64,
    next_stub: u64,
    module_at: u64,
}

impl AreaSpace {
    /// Nothing placed yet; sites from `module_at` on are the far module's.
    pub fn new(areas: Areas, module_at: u64) -> AreaSpace {
        AreaSpace {
            next_tramp: areas.tramp,
            next_near: areas.near_veneers,
            next_far: areas.far_veneers,
            next_stub: areas.stubs,
            module_at,
        }
    }
}

impl Space for AreaSpace {
    fn place(&mut self, r: &Request<'_>) -> Result<u64, NoRoom> {
        let next = match r.kind {
            CodeKind::Trampoline => {
                if r.len as u64 > TRAMP_STRIDE {
                    return Err(NoRoom(format!("a trampoline of {} bytes", r.len)));
                }
                let at = self.next_tramp.next_multiple_of(r.align);
                self.next_tramp = at + TRAMP_STRIDE;
                return Ok(at);
            }
            CodeKind::Veneer { .. } if r.near >= self.module_at => &mut self.next_far,
            CodeKind::Veneer { .. } => &mut self.next_near,
            CodeKind::Stub { .. } => &mut self.next_stub,
        };
        let at = next.next_multiple_of(r.align);
        *next = at + (r.len as u64).next_multiple_of(16);
        Ok(at)
    }
}

/// The functions run after each write, with their argument.
pub const RUNS: &[(&str, i64)] = &[
    ("leaf", 5),
    ("mid", 4),
    ("calls_many", 3),
    ("frame", 2),
    ("plain", 6),
    ("mod_leaf", 5),
    ("mod_mid", 5),
];

/// The functions with a site, in the order they are patched.
pub const SITES: &[&str] = &[
    "leaf",
    "mid",
    "many",
    "calls_many",
    "frame",
    "leaf_v2",
    "mod_leaf",
    "mod_mid",
];

/// The functions traced once enabled (`frame` and `leaf_v2` never are).
const TRACED: &[&str] = &["leaf", "mid", "many", "calls_many", "mod_leaf", "mod_mid"];

/// A site as the scenario keeps it.
#[derive(Debug, Clone)]
pub struct TestSite {
    /// Its function.
    pub function: String,
    /// Address.
    pub addr: u64,
    /// The compiler's bytes.
    pub original: Vec<u8>,
    /// An entry (`-fpatchable-function-entry`) site.
    pub entry: bool,
}

impl TestSite {
    /// The arch layer's view.
    pub fn plan_site(&self) -> PlanSite<'_> {
        PlanSite {
            addr: self.addr,
            original: &self.original,
            entry: self.entry,
        }
    }
}

/// The sites of the test functions, from fntrace's discovery.
pub fn find_sites(program: &Program) -> Vec<TestSite> {
    let binary = fntrace_sites::discover(&program.data).expect("discovery");
    let mut out = Vec::new();
    for &name in SITES {
        let sites: Vec<_> = binary
            .sites
            .iter()
            .filter(|s| binary.function_of(s).is_some_and(|f| &*f.name == name))
            .collect();
        assert_eq!(sites.len(), 1, "{name}: one site expected, found {sites:?}");
        let s = sites[0];
        out.push(TestSite {
            function: name.to_string(),
            addr: s.address,
            original: s.bytes.to_vec(),
            entry: s.kind == fntrace_sites::SiteKind::Patchable,
        });
    }
    let plain = binary
        .sites
        .iter()
        .filter(|s| binary.function_of(s).is_some_and(|f| &*f.name == "plain"))
        .count();
    assert_eq!(plain, 0, "the no_instrument_function has no site");
    out
}

/// What the scenario did, for the test's own assertions.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Writes made.
    pub writes: usize,
    /// Runs checked.
    pub runs: usize,
    /// Sites that needed a veneer.
    pub veneered: Vec<String>,
    /// Whether redirects were exercised.
    pub redirected: bool,
}

/// The script being written, with the model of what each run may show.
struct Driver<'a> {
    patcher: &'a dyn Patcher,
    sites: Vec<TestSite>,
    script: String,
    expect: Expect,
    model: Model<'a>,
    outcome: Outcome,
    /// The arch layer's placement of trampolines, veneers and stubs.
    placer: Placer<'a>,
    /// The memory it places them in.
    space: AreaSpace,
    /// The generic core, with the program as its one module.
    core: Core,
    module: ModuleId,
    /// Each registered ops' trampoline.
    ops_tramp: HashMap<OpsId, u64>,
}

impl<'a> Driver<'a> {
    fn index(&self, name: &str) -> usize {
        self.sites.iter().position(|s| s.function == name).unwrap()
    }

    /// Switches one site, write by write, running everything after each.
    fn switch(&mut self, site: usize, to: State) {
        let s = &self.sites[site];
        let from = self.model.state(site);
        let writes = self
            .patcher
            .plan(&s.plan_site(), from, to)
            .unwrap_or_else(|e| panic!("{}: plan {from:?} -> {to:?}: {e}", s.function));
        self.write(site, from, to, &writes);
    }

    /// Takes one site where `want` says, through the placer: the code it
    /// needs loaded first, then its plan write by write.
    fn want(&mut self, site: usize, want: Want) {
        let s = &self.sites[site];
        let from = self.model.state(site);
        let applied = self
            .placer
            .change(&mut self.space, &s.plan_site(), from, want)
            .unwrap_or_else(|e| panic!("{}: {from:?} -> {want:?}: {e}", s.function));
        if applied.veneer.is_some() && !self.outcome.veneered.contains(&s.function) {
            self.outcome.veneered.push(s.function.clone());
        }
        for load in &applied.loads {
            self.load(load);
        }
        self.write(site, from, applied.state, &applied.plan);
    }

    /// Puts placed code into the script (and veneers into the model).
    fn load(&mut self, load: &Load) {
        self.script += &format!("load {:#x} {}\n", load.addr, hexs(&load.bytes));
        if let CodeKind::Veneer { to } = load.kind {
            assert_eq!(load.bytes.len(), self.patcher.veneer_len());
            self.model.veneers.insert(load.addr, to);
        }
    }

    /// Makes `site`'s writes, running everything after each.
    fn write(&mut self, site: usize, from: State, to: State, writes: &Plan) {
        let s = &self.sites[site];
        self.script += &format!(
            "note {} {from:?} -> {to:?}: {} writes\n",
            s.function,
            writes.len()
        );
        self.model.begin(site, to);
        for (i, w) in writes.iter().enumerate() {
            assert_eq!(w.bytes.len(), 4, "one instruction per write");
            assert!(
                w.addr >= s.addr && w.addr + 4 <= s.addr + s.original.len() as u64,
                "writes stay within the site"
            );
            if i + 1 == writes.len() {
                self.model.end(site);
            }
            self.script += &format!("write {:#x} {}\n", w.addr, hexs(&w.bytes));
            self.model.runs(&mut self.script, &mut self.expect);
        }
        self.model.end(site);
        self.outcome.writes += writes.len();
    }

    /// Carries out the core's changes, one plan each, and commits them.
    fn apply(&mut self, changes: Vec<Change>) {
        for change in changes {
            assert_eq!(change.module, self.module);
            let want = match change.to {
                Goal::Nop => Want::Off,
                Goal::Ops(id) => Want::Call {
                    trampoline: self.ops_tramp[&id],
                    regs: self.core.ops(id).unwrap().flags.regs(),
                },
                Goal::List { .. } => panic!("the scenario's ops select disjoint functions"),
            };
            self.want(change.site, want);
            self.core.commit(&change, true);
        }
    }

    /// Registers an ops whose trampoline is `tramp`.
    fn register(&mut self, names: &[&str], save_regs: bool, tramp: u64) -> OpsId {
        let ops = Ops {
            flags: OpsFlags {
                save_regs,
                entry: true,
                ..OpsFlags::default()
            },
            filter: Filter::parse(names).unwrap(),
            notrace: Filter::default(),
        };
        let (id, changes) = self.core.register(ops).unwrap();
        self.ops_tramp.insert(id, tramp);
        self.apply(changes);
        id
    }

    /// Makes function `name` call trampoline `tramp` (through a veneer if
    /// need be), with registers or not: the arch layer's modify, outside
    /// the core.
    fn call(&mut self, name: &str, tramp: u64, regs: bool) {
        let site = self.index(name);
        self.want(
            site,
            Want::Call {
                trampoline: tramp,
                regs,
            },
        );
    }
}

/// Runs the scenario; panics (fails the test) on the first run whose
/// outcome the model does not allow.
pub fn run(
    target: &Target,
    program: &Program,
    redirected: &Program,
    patcher: &dyn Patcher,
    areas: Areas,
) -> Outcome {
    let sites = find_sites(program);
    let family = if sites[0].entry {
        Family::Entry
    } else {
        Family::Mcount
    };
    // On MIPS entry sites the site selects regs (`li t0`), not the address.
    let mips = target.triple.starts_with("mips");
    let site_selects_regs = mips && family == Family::Entry;
    let mut model = Model::new(program, &sites, patcher, site_selects_regs);
    model.args_at_site = mips || family == Family::Entry;
    let truth = results(target, redirected);
    let mut script = String::new();

    // The generated code: two trampolines (two ops), one with registers,
    // placed by the arch layer in the areas the harness maps.
    for at in [areas.tramp, areas.near_veneers, areas.far_veneers, areas.stubs] {
        script += &format!("map {at:#x} 0x20000\n");
    }
    let mut placer = Placer::new(patcher);
    let mut space = AreaSpace::new(areas, target.module_at);
    let mut tramps = Vec::new();
    for (cb, regs) in [(1, false), (2, true)] {
        let spec = TrampolineSpec {
            family,
            callback: program.addr(&format!("fntrace_emu_cb{cb}")),
            regs,
        };
        let (at, load) = placer
            .trampoline(&mut space, &spec, sites[0].addr)
            .expect("trampoline");
        let load = load.expect("a new trampoline");
        script += &format!("load {at:#x} {}\n", hexs(&load.bytes));
        model.tramps.insert(at, Tramp { cb, regs });
        tramps.push(at);
    }
    let (tramp1_at, tramp2_at) = (tramps[0], tramps[1]);
    assert_eq!((tramp1_at, tramp2_at), (areas.tramp, areas.tramp + TRAMP_STRIDE));
    for s in &sites {
        script += &format!("unprotect {:#x} {}\n", s.addr, s.original.len());
    }
    let mut expect = Expect::default();
    script += "note baseline\n";
    model.runs(&mut script, &mut expect);
    let role = if family == Family::Entry {
        Role::Entry
    } else {
        Role::Mcount
    };
    let records = (0..sites.len())
        .map(|i| SiteRecord::new(Some(i as u32), role))
        .collect();
    let mut core = Core::new();
    let (module, changes) = core.add_module(Module::new(
        "prog",
        SITES.iter().map(|s| s.to_string()).collect(),
        records,
    ));
    assert!(changes.is_empty());
    let mut d = Driver {
        patcher,
        core,
        module,
        ops_tramp: HashMap::new(),
        sites,
        script,
        expect,
        model,
        outcome: Outcome::default(),
        placer,
        space,
    };

    // 1. Init: every site off.
    for i in 0..d.sites.len() {
        d.want(i, Want::Off);
    }
    // 2. Ops A, no regs, traces TRACED: the core decides, plans act.
    let a = d.register(TRACED, false, tramp1_at);
    // 3. The arch layer's modify: registers for `leaf` and `mod_leaf`
    //    (on MIPS entry sites one `li t0` write), and back for `mod_leaf`.
    let regs_tramp = if site_selects_regs { tramp1_at } else { tramp2_at };
    d.call("leaf", regs_tramp, true);
    d.call("mod_leaf", regs_tramp, true);
    d.call("mod_leaf", tramp1_at, false);
    // 4. `mid` moves to ops B, which wants registers: A lets it go, B
    //    takes it through its own trampoline (003).
    let without_mid: Vec<&str> = TRACED.iter().copied().filter(|&n| n != "mid").collect();
    let changes = d
        .core
        .set_filter(a, Filter::parse(&without_mid).unwrap(), Filter::default())
        .unwrap();
    d.apply(changes);
    let b = d.register(&["mid"], true, tramp2_at);
    // 5. Redirect `leaf` to `leaf_v2`, where the site can, and back.
    //    The placer gives the stub the site reaches, or the replacement
    //    itself where the site jumps anywhere.
    let leaf = d.index("leaf");
    let replacement = program.addr("leaf_v2");
    let prepared = d
        .placer
        .prepare(
            &mut d.space,
            &d.sites[leaf].plan_site(),
            Want::Redirect { replacement },
        )
        .expect("direct stub");
    for load in &prepared.loads {
        assert_eq!(load.addr, areas.stubs);
        d.load(load);
    }
    let redirect = prepared.state;
    match patcher.plan(&d.sites[leaf].plan_site(), State::Off, redirect) {
        Ok(_) => {
            d.outcome.redirected = true;
            let back = d.model.state(leaf);
            for state in [redirect, back, State::Off, redirect, State::Off] {
                d.switch(leaf, state);
            }
        }
        Err(PlanError::Unsupported(_)) => {}
        Err(e) => panic!("redirect: {e}"),
    }
    // 6. Both ops unregister: everything off.
    for id in [b, a] {
        let changes = d.core.unregister(id).unwrap();
        d.apply(changes);
    }
    // 7. The compiler's bytes back.
    for i in 0..d.sites.len() {
        d.want(i, Want::Original);
    }
    for s in &d.sites {
        d.script += &format!("dump {:#x} {}\n", s.addr, s.original.len());
    }

    let output = emulate(target, program, &d.script);
    d.outcome.runs = d.expect.check(&output, &d.model, &truth);
    for s in &d.sites {
        let line = format!("B {:#x} {}", s.addr, hexs(&s.original));
        assert!(
            output.contains(&line),
            "{}: bytes restored exactly ({line})",
            s.function
        );
    }
    d.outcome
}

/// What each test function returns in `program`, untouched: for the
/// build where `leaf` is `leaf_v2`, the truth a redirect is checked against.
fn results(target: &Target, program: &Program) -> HashMap<String, i64> {
    let script: String = RUNS
        .iter()
        .map(|(name, arg)| format!("run {:#x} {arg}\n", program.addr(name)))
        .collect();
    let output = emulate(target, program, &script);
    let results: HashMap<String, i64> = output
        .lines()
        .filter(|l| l.starts_with("R "))
        .zip(RUNS)
        .map(|(line, (name, _))| (name.to_string(), line.split(' ').nth(3).unwrap().parse().unwrap()))
        .collect();
    assert_eq!(results.len(), RUNS.len());
    results
}

/// Bytes as hex digits.
pub fn hexs(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
