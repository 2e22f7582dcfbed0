//! The scenario every target and site form goes through: the sites found
//! by discovery, kept in `fntrace-core`'s site records, whose decisions
//! (register, re-filter, unregister two ops) are carried out by the arch
//! layer's plans write by write — init, enable (through veneers where a
//! call cannot reach), regs ↔ no-regs, the other ops' trampoline, redirect
//! and back, disable, restore — with every test function run after every
//! single write and checked.

use std::collections::HashMap;

use fntrace_arch::{Family, Patcher, PlanError, PlanSite, State, TrampolineSpec};
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
    target: &'a Target,
    patcher: &'a dyn Patcher,
    sites: Vec<TestSite>,
    script: String,
    expect: Expect,
    model: Model<'a>,
    outcome: Outcome,
    /// Veneers made: (in the far module, trampoline) → address.
    veneers: HashMap<(bool, u64), u64>,
    /// Where the next veneer goes: near, far.
    next_veneer: (u64, u64),
    /// The generic core, with the program as its one module.
    core: Core,
    module: ModuleId,
    /// Each registered ops' trampoline.
    ops_tramp: HashMap<OpsId, u64>,
}

impl Driver<'_> {
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

    /// The destination of a call to trampoline `tramp` from `site`: the
    /// trampoline, or a veneer near the site when the call cannot reach.
    fn dest(&mut self, site: usize, tramp: u64) -> u64 {
        let s = &self.sites[site];
        if self.patcher.reaches(&s.plan_site(), tramp) {
            return tramp;
        }
        let far = s.addr >= self.target.module_at;
        let at = match self.veneers.get(&(far, tramp)) {
            Some(&at) => at,
            None => {
                let slot = if far {
                    &mut self.next_veneer.1
                } else {
                    &mut self.next_veneer.0
                };
                let at = *slot;
                *slot += self.patcher.veneer_len().next_multiple_of(16) as u64;
                let code = self.patcher.veneer(at, tramp).expect("veneer");
                assert_eq!(code.len(), self.patcher.veneer_len());
                self.script += &format!("load {at:#x} {}\n", hexs(&code));
                self.model.veneers.insert(at, tramp);
                self.veneers.insert((far, tramp), at);
                at
            }
        };
        assert!(
            self.patcher.reaches(&s.plan_site(), at),
            "{}: the veneer at {at:#x} is out of reach",
            s.function
        );
        if !self.outcome.veneered.contains(&s.function) {
            self.outcome.veneered.push(s.function.clone());
        }
        at
    }

    /// Carries out the core's changes, one plan each, and commits them.
    fn apply(&mut self, changes: Vec<Change>) {
        for change in changes {
            assert_eq!(change.module, self.module);
            let state = match change.to {
                Goal::Nop => State::Off,
                Goal::Ops(id) => {
                    let regs = self.core.ops(id).unwrap().flags.regs();
                    let target = self.dest(change.site, self.ops_tramp[&id]);
                    State::Call { target, regs }
                }
                Goal::List { .. } => panic!("the scenario's ops select disjoint functions"),
            };
            self.switch(change.site, state);
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
        let target = self.dest(site, tramp);
        self.switch(site, State::Call { target, regs });
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

    // The generated code: two trampolines (two ops), one with registers.
    let tramp2_at = areas.tramp + 0x10000;
    for at in [areas.tramp, areas.near_veneers, areas.far_veneers, areas.stubs] {
        script += &format!("map {at:#x} 0x20000\n");
    }
    for (at, cb, regs) in [(areas.tramp, 1, false), (tramp2_at, 2, true)] {
        let spec = TrampolineSpec {
            family,
            callback: program.addr(&format!("fntrace_emu_cb{cb}")),
            regs,
        };
        assert_eq!(at % patcher.trampoline_align(family), 0);
        let code = patcher.trampoline(at, &spec).expect("trampoline");
        script += &format!("load {at:#x} {}\n", hexs(&code));
        model.tramps.insert(at, Tramp { cb, regs });
    }
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
        target,
        patcher,
        core,
        module,
        ops_tramp: HashMap::new(),
        sites,
        script,
        expect,
        model,
        outcome: Outcome::default(),
        veneers: HashMap::new(),
        next_veneer: (areas.near_veneers, areas.far_veneers),
    };

    // 1. Init: every site off.
    for i in 0..d.sites.len() {
        d.switch(i, State::Off);
    }
    // 2. Ops A, no regs, traces TRACED: the core decides, plans act.
    let a = d.register(TRACED, false, areas.tramp);
    // 3. The arch layer's modify: registers for `leaf` and `mod_leaf`
    //    (on MIPS entry sites one `li t0` write), and back for `mod_leaf`.
    let regs_tramp = if site_selects_regs { areas.tramp } else { tramp2_at };
    d.call("leaf", regs_tramp, true);
    d.call("mod_leaf", regs_tramp, true);
    d.call("mod_leaf", areas.tramp, false);
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
    let leaf = d.index("leaf");
    let replacement = program.addr("leaf_v2");
    let to = match patcher
        .direct_stub(areas.stubs, replacement)
        .expect("direct stub")
    {
        Some(code) => {
            d.script += &format!("load {:#x} {}\n", areas.stubs, hexs(&code));
            areas.stubs
        }
        None => replacement,
    };
    let redirect = State::Redirect { to };
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
        d.switch(i, State::Original);
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
