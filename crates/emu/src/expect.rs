//! What each run may show, from a model of every site's state: which
//! callbacks fire (with which `ip`, parent and register frame) and what
//! the function returns. A site in the middle of a plan may behave as
//! before it, as after it, or as off — never anything else: that is the
//! seeds' claim that every intermediate state is safe.

use std::collections::HashMap;

use fntrace_arch::{Patcher, State};

use crate::build::Program;
use crate::scenario::{TestSite, RUNS};

/// A generated trampoline: which callback it calls, with registers or not.
#[derive(Debug, Clone, Copy)]
pub struct Tramp {
    /// The callback (1 or 2).
    pub cb: u8,
    /// It hands over the register frame.
    pub regs: bool,
}

/// For each function run: the functions executed (with a site or not) and
/// their callers, the test program's structure (`harness/*.c`).
const CALLS: &[(&str, &[(&str, &str)])] = &[
    ("leaf", &[("leaf", "run")]),
    ("mid", &[("mid", "run"), ("leaf", "mid"), ("leaf", "mid")]),
    ("calls_many", &[("calls_many", "run"), ("many", "calls_many")]),
    ("frame", &[("frame", "run")]),
    ("plain", &[("leaf", "plain")]),
    ("mod_leaf", &[("mod_leaf", "run")]),
    (
        "mod_mid",
        &[("mod_mid", "run"), ("mod_leaf", "mod_mid"), ("leaf", "mod_mid")],
    ),
];

/// A callback call: callback, ip, the caller's function, registers given.
type HitKey = (u8, u64, String, bool);

/// The model of every site's state.
pub struct Model<'a> {
    program: &'a Program,
    sites: Vec<TestSite>,
    states: Vec<State>,
    pending: Option<(usize, State, State)>,
    ips: Vec<u64>,
    site_selects_regs: bool,
    /// The register frame holds the function's arguments at the site
    /// (entry sites, and MIPS `-pg`; AArch64 `-pg` has moved x0 by then).
    pub args_at_site: bool,
    /// Trampolines by address.
    pub tramps: HashMap<u64, Tramp>,
    /// Veneers by address, and the trampoline each reaches.
    pub veneers: HashMap<u64, u64>,
}

impl<'a> Model<'a> {
    /// All sites as the compiler left them.
    pub fn new(
        program: &'a Program,
        sites: &[TestSite],
        patcher: &dyn Patcher,
        site_selects_regs: bool,
    ) -> Model<'a> {
        Model {
            program,
            sites: sites.to_vec(),
            states: vec![State::Original; sites.len()],
            pending: None,
            ips: sites
                .iter()
                .map(|s| patcher.return_address(&s.plan_site()).expect("return address"))
                .collect(),
            site_selects_regs,
            args_at_site: true,
            tramps: HashMap::new(),
            veneers: HashMap::new(),
        }
    }

    /// The state of a site (the new one once its plan has begun).
    pub fn state(&self, site: usize) -> State {
        match self.pending {
            Some((s, _, new)) if s == site => new,
            _ => self.states[site],
        }
    }

    /// A plan for `site` begins: until [`Model::end`], it may behave as
    /// before, after, or off.
    pub fn begin(&mut self, site: usize, to: State) {
        self.pending = Some((site, self.states[site], to));
    }

    /// The plan's last write is made.
    pub fn end(&mut self, site: usize) {
        if let Some((s, _, new)) = self.pending {
            if s == site {
                self.states[site] = new;
                self.pending = None;
            }
        }
    }

    /// Appends a run of every test function to `script`, with what each
    /// may show to `expect`.
    pub fn runs(&self, script: &mut String, expect: &mut Expect) {
        for &(name, arg) in RUNS {
            script.push_str(&format!("run {:#x} {arg}\n", self.program.addr(name)));
            let mut variants = Vec::new();
            let choices: Vec<Option<State>> = match self.pending {
                Some((_, old, new)) => vec![Some(old), Some(new), Some(State::Off)],
                None => vec![None],
            };
            for choice in choices {
                variants.push(self.variant(name, choice));
            }
            expect.runs.push(Run {
                name,
                arg,
                variants,
                baseline: expect.runs.len() < RUNS.len(),
            });
        }
    }

    fn site_state(&self, site: usize, choice: Option<State>) -> State {
        match (self.pending, choice) {
            (Some((s, _, _)), Some(state)) if s == site => state,
            _ => self.states[site],
        }
    }

    fn variant(&self, run: &str, choice: Option<State>) -> Variant {
        let site_of = |f: &str| self.sites.iter().position(|s| s.function == f);
        let leaf = site_of("leaf").unwrap();
        let redirected = matches!(self.site_state(leaf, choice), State::Redirect { .. });
        let mut hits = Vec::new();
        let calls = CALLS.iter().find(|(r, _)| *r == run).unwrap().1;
        for &(callee, caller) in calls {
            let callee = if callee == "leaf" && redirected {
                "leaf_v2"
            } else {
                callee
            };
            let Some(site) = site_of(callee) else { continue };
            if let State::Call { target, regs } = self.site_state(site, choice) {
                let tramp = self.veneers.get(&target).copied().unwrap_or(target);
                let t = self
                    .tramps
                    .get(&tramp)
                    .unwrap_or_else(|| panic!("{callee}: calls {target:#x}, no trampoline"));
                let regs = if self.site_selects_regs { regs } else { t.regs };
                hits.push((t.cb, self.ips[site], caller.to_string(), regs));
            }
        }
        hits.sort();
        Variant { hits, redirected }
    }
}

#[derive(Debug)]
struct Variant {
    hits: Vec<HitKey>,
    redirected: bool,
}

#[derive(Debug)]
struct Run {
    name: &'static str,
    arg: i64,
    variants: Vec<Variant>,
    baseline: bool,
}

/// What every run of the script may show, in order.
#[derive(Debug, Default)]
pub struct Expect {
    runs: Vec<Run>,
}

impl Expect {
    /// Checks the harness's output; returns the number of runs checked.
    /// `redirected` holds each function's result when `leaf` is `leaf_v2`.
    pub fn check(&self, output: &str, model: &Model<'_>, redirected: &HashMap<String, i64>) -> usize {
        let mut baseline: HashMap<&str, i64> = HashMap::new();
        let mut context: Vec<&str> = Vec::new();
        let mut n = 0;
        for line in output.lines() {
            if !line.starts_with("R ") {
                context.push(line);
                continue;
            }
            let run = self
                .runs
                .get(n)
                .unwrap_or_else(|| panic!("more runs than the script has: {line}"));
            n += 1;
            let fail = |why: String| -> ! {
                let from = context.len().saturating_sub(6);
                panic!(
                    "{why}\nrun: {line}\nafter:\n{}\nallowed: {:#?}",
                    context[from..].join("\n"),
                    run.variants
                )
            };
            let f: Vec<&str> = line.split(' ').collect();
            let result: i64 = f[3].parse().unwrap();
            if f[4] != "1" {
                fail(format!("{}: the stack pointer changed across the call", run.name));
            }
            let mut hits: Vec<HitKey> = Vec::new();
            let mut top_a0 = None;
            for h in &f[6..] {
                let p: Vec<&str> = h.split(':').collect();
                let ip = u64::from_str_radix(p[1].trim_start_matches("0x"), 16).unwrap();
                let parent = u64::from_str_radix(p[2].trim_start_matches("0x"), 16).unwrap();
                let caller = model.program.function_at(parent).unwrap_or("?").to_string();
                if caller == "run" && p[3] != "-" {
                    top_a0 = Some(p[3].parse::<i64>().unwrap());
                }
                hits.push((p[0].parse().unwrap(), ip, caller, p[3] != "-"));
            }
            hits.sort();
            if run.baseline {
                if !hits.is_empty() {
                    fail("callbacks before any patch".into());
                }
                baseline.insert(run.name, result);
                continue;
            }
            // The variants these callbacks fit; the result must be one of theirs.
            let fitting: Vec<&Variant> = run.variants.iter().filter(|v| v.hits == hits).collect();
            if fitting.is_empty() {
                fail(format!(
                    "{}: callbacks not as the sites' states allow: {hits:?}",
                    run.name
                ));
            }
            let results: Vec<i64> = fitting
                .iter()
                .map(|v| {
                    if v.redirected {
                        redirected[run.name]
                    } else {
                        baseline[run.name]
                    }
                })
                .collect();
            if !results.contains(&result) {
                fail(format!(
                    "{}({}) returned {result}, expected one of {results:?}",
                    run.name, run.arg
                ));
            }
            if let (Some(a0), true) = (top_a0, model.args_at_site) {
                if a0 != run.arg {
                    fail(format!(
                        "{}: the register frame has a0 = {a0}, the argument was {}",
                        run.name, run.arg
                    ));
                }
            }
        }
        assert_eq!(n, self.runs.len(), "every run reported");
        n
    }
}
