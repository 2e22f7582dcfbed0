//! The core's bookkeeping: registrations, filters and modules in, the
//! minimal set of changes out.

use fntrace_filter::Filter;

use crate::*;

fn filter(patterns: &[&str]) -> Filter {
    Filter::parse(patterns).unwrap()
}

fn ops(patterns: &[&str]) -> Ops {
    Ops {
        flags: OpsFlags {
            entry: true,
            ..OpsFlags::default()
        },
        filter: filter(patterns),
        notrace: Filter::default(),
    }
}

/// `main`, `foo`, `bar`, `_ZN2ns3bazEi` (ns::baz(int)), each with an entry
/// site; `foo` also has an exit site; one site belongs to no function.
fn module(name: &str) -> Module {
    let functions = ["main", "foo", "bar", "_ZN2ns3bazEi"].map(String::from).to_vec();
    let sites = vec![
        SiteRecord::new(Some(0), Role::Entry),
        SiteRecord::new(Some(1), Role::Entry),
        SiteRecord::new(Some(1), Role::Exit),
        SiteRecord::new(Some(2), Role::Mcount),
        SiteRecord::new(Some(3), Role::Entry),
        SiteRecord::new(None, Role::Entry),
    ];
    Module::new(name, functions, sites)
}

fn apply(core: &mut Core, changes: &[Change]) {
    for change in changes {
        core.commit(change, true);
    }
}

fn targets(core: &Core, module: ModuleId) -> Vec<Target> {
    core.module(module)
        .unwrap()
        .sites
        .iter()
        .map(|s| s.in_effect)
        .collect()
}

use Target::{List, Nop};

#[test]
fn register_and_unregister_touch_only_selected_sites() {
    let mut core = Core::new();
    let (m, changes) = core.add_module(module("prog"));
    assert!(changes.is_empty());
    let (a, changes) = core.register(ops(&["foo", "ns::baz"])).unwrap();
    assert_eq!(changes.iter().map(|c| c.site).collect::<Vec<_>>(), vec![1, 4]);
    apply(&mut core, &changes);
    assert_eq!(
        targets(&core, m),
        vec![Nop, Target::Ops(a), Nop, Nop, Target::Ops(a), Nop]
    );
    let changes = core.unregister(a).unwrap();
    assert_eq!(changes.len(), 2);
    assert!(changes.iter().all(|c| c.to == Nop && c.wanted == 0));
    apply(&mut core, &changes);
    assert_eq!(targets(&core, m), vec![Nop; 6]);
    assert_eq!(core.unregister(a), Err(CoreError::NotRegistered(a)));
}

#[test]
fn two_ops_on_one_site_use_the_list_and_go_back_to_the_survivor() {
    let mut core = Core::new();
    let (m, _) = core.add_module(module("prog"));
    let (a, c) = core.register(ops(&["foo"])).unwrap();
    apply(&mut core, &c);
    let mut with_regs = ops(&["f*"]);
    with_regs.flags.save_regs = true;
    let (b, c) = core.register(with_regs).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].from, Target::Ops(a));
    assert_eq!(c[0].to, List { regs: true });
    assert_eq!(c[0].wanted, 1 << a | 1 << b);
    apply(&mut core, &c);
    assert_eq!(core.module(m).unwrap().sites[1].ref_count(), 2);
    let c = core.unregister(a).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].to, Target::Ops(b));
}

#[test]
fn empty_filter_selects_everything_notrace_removes() {
    let mut core = Core::new();
    let (m, _) = core.add_module(module("prog"));
    let mut all = ops(&[]);
    all.notrace = filter(&["ma*"]);
    let (a, c) = core.register(all).unwrap();
    apply(&mut core, &c);
    let t = Target::Ops(a);
    // Entry and mcount sites of foo, bar, baz; not main (notrace), not the
    // exit site (no exit callback), and not the unnamed site (notrace set).
    assert_eq!(targets(&core, m), vec![Nop, t, Nop, t, t, Nop]);
    let (b, c) = core.register(ops(&[])).unwrap();
    apply(&mut core, &c);
    assert_eq!(core.module(m).unwrap().sites[5].in_effect, Target::Ops(b));
}

#[test]
fn exit_sites_go_to_ops_with_an_exit_callback() {
    let mut core = Core::new();
    let (m, _) = core.add_module(module("prog"));
    let mut exits = ops(&["foo"]);
    exits.flags = OpsFlags {
        exit: true,
        ..OpsFlags::default()
    };
    let (a, c) = core.register(exits).unwrap();
    apply(&mut core, &c);
    assert_eq!(targets(&core, m)[1..3], [Nop, Target::Ops(a)]);
}

#[test]
fn set_filter_applies_the_difference() {
    let mut core = Core::new();
    core.add_module(module("prog"));
    let (a, c) = core.register(ops(&["foo", "bar"])).unwrap();
    apply(&mut core, &c);
    let c = core
        .set_filter(a, filter(&["bar", "main"]), Filter::default())
        .unwrap();
    let mut moved: Vec<_> = c.iter().map(|c| (c.site, c.to)).collect();
    moved.sort_by_key(|x| x.0);
    assert_eq!(moved, vec![(0, Target::Ops(a)), (1, Nop)]);
}

#[test]
fn modules_loaded_later_get_the_filters_in_force() {
    let mut core = Core::new();
    let (a, _) = core.register(ops(&["foo:mod:libfoo"])).unwrap();
    let (m1, c) = core.add_module(module("prog"));
    assert!(c.is_empty());
    let (m2, c) = core.add_module(module("libfoo.so.1"));
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].module, c[0].site, c[0].to), (m2, 1, Target::Ops(a)));
    apply(&mut core, &c);
    core.remove_module(m2);
    assert!(core.module(m2).is_none());
    assert_eq!(core.unregister(a).unwrap(), vec![]);
    assert_eq!(targets(&core, m1), vec![Nop; 6]);
}

#[test]
fn ipmodify_is_exclusive_per_function() {
    let mut core = Core::new();
    core.add_module(module("prog"));
    let mut redirect = ops(&["foo"]);
    redirect.flags.ipmodify = true;
    let (a, c) = core.register(redirect.clone()).unwrap();
    apply(&mut core, &c);
    assert_eq!(
        core.register(redirect.clone()).unwrap_err(),
        CoreError::Busy {
            function: "foo".into()
        }
    );
    let mut other = redirect;
    other.filter = filter(&["bar"]);
    let (b, _) = core.register(other).unwrap();
    assert_eq!(
        core.set_filter(b, filter(&["f*"]), Filter::default())
            .unwrap_err(),
        CoreError::Busy {
            function: "foo".into()
        }
    );
    assert!(core.ops(b).unwrap().filter.selects(&fntrace_filter::Names {
        symbol: "bar",
        demangled: "bar",
        base: None,
        module: "prog",
    }));
    core.unregister(a).unwrap();
}

#[test]
fn failed_sites_are_left_alone() {
    let mut core = Core::new();
    core.add_module(module("prog"));
    let (a, c) = core.register(ops(&["foo"])).unwrap();
    core.commit(&c[0], false);
    assert_eq!(core.unregister(a).unwrap(), vec![]);
    let (_, c) = core.register(ops(&["foo"])).unwrap();
    assert!(c.is_empty());
}

#[test]
fn a_change_committed_then_failed_leaves_what_was_in_effect() {
    let mut core = Core::new();
    let m = core.add_module(module("prog")).0;
    let (a, c) = core.register(ops(&["foo"])).unwrap();
    core.commit(&c[0], true);
    assert_eq!(core.module(m).unwrap().sites[c[0].site].in_effect, Target::Ops(a));
    core.commit(&c[0], false);
    let site = core.module(m).unwrap().sites[c[0].site];
    assert_eq!((site.in_effect, site.failed), (Target::Nop, true));
    assert_eq!(core.unregister(a).unwrap(), vec![]);
}

#[test]
fn at_most_max_ops() {
    let mut core: Core = Core::new();
    for _ in 0..MAX_OPS {
        core.register(ops(&["foo"])).unwrap();
    }
    assert_eq!(core.register(ops(&["foo"])).unwrap_err(), CoreError::TooManyOps);
}

#[test]
fn a_third_ops_on_a_list_site_changes_its_wanted_set_not_its_target() {
    let mut core = Core::new();
    core.add_module(module("prog"));
    let (a, c) = core.register(ops(&["foo"])).unwrap();
    apply(&mut core, &c);
    let (b, c) = core.register(ops(&["foo"])).unwrap();
    apply(&mut core, &c);
    // The list trampoline stays, but the list walker must now call c too.
    let (third, c) = core.register(ops(&["foo"])).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].site, c[0].from, c[0].to),
        (1, List { regs: false }, List { regs: false })
    );
    assert_eq!(c[0].wanted, 1 << a | 1 << b | 1 << third);
    apply(&mut core, &c);
    let c = core.unregister(b).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].wanted, 1 << a | 1 << third);
    apply(&mut core, &c);
    // Nothing left to publish once committed.
    assert_eq!(
        core.set_filter(a, filter(&["foo"]), Filter::default()).unwrap(),
        vec![]
    );
}

#[test]
fn selects_any_asks_of_functions_with_sites() {
    let mut core = Core::new();
    assert!(!core.selects_any(&filter(&["main"])));
    core.add_module(module("prog"));
    let lib = module("libx.so.1");
    let mut functions = lib.functions.clone();
    functions.push("lonely".into()); // no site
    core.add_module(Module::new("libx.so.1", functions, lib.sites.clone()));
    assert!(core.selects_any(&filter(&["main"])));
    assert!(core.selects_any(&filter(&["ns::baz"])));
    assert!(core.selects_any(&filter(&["ba?:mod:libx"])));
    assert!(!core.selects_any(&filter(&["mian"])));
    assert!(!core.selects_any(&filter(&["lonely"])));
    assert!(!core.selects_any(&filter(&["main:mod:liby"])));
}

/// `libc.so.6`, opt-in: `printf`, `malloc`, `qsort` (imported by the
/// program) and `_IO_internal` (not), one entry site each.
fn library() -> Module {
    let functions = ["printf", "malloc", "qsort", "_IO_internal"]
        .map(String::from)
        .to_vec();
    let sites = (0..4).map(|f| SiteRecord::new(Some(f), Role::Entry)).collect();
    let mut m = Module::new("libc.so.6", functions, sites);
    m.opt_in = true;
    m.imported = vec![true, true, true, false];
    m
}

fn libcall_ops(patterns: &[&str], notrace: &[&str]) -> Ops {
    let mut o = ops(patterns);
    o.flags.libcalls = true;
    o.notrace = filter(notrace);
    o
}

/// (wanted, guarded) per site once the changes are applied.
fn guards(core: &Core, module: ModuleId) -> Vec<(bool, bool)> {
    core.module(module)
        .unwrap()
        .sites
        .iter()
        .map(|s| (s.wanted != 0, s.guarded))
        .collect()
}

#[test]
fn an_opt_in_library_is_selected_by_its_module_or_as_library_calls() {
    let mut core = Core::new();
    let (lib, _) = core.add_module(library());
    // No filter, no library calls: nothing in the library.
    let (a, changes) = core.register(ops(&[])).unwrap();
    assert!(changes.is_empty());
    core.unregister(a).unwrap();
    // Library calls: the imported functions, guarded; `_IO_internal` not.
    let (a, changes) = core.register(libcall_ops(&[], &["malloc"])).unwrap();
    apply(&mut core, &changes);
    assert_eq!(
        guards(&core, lib),
        [(true, true), (false, false), (true, true), (false, false)]
    );
    // A name selects the library call of that name only.
    let changes = core.set_filter(a, filter(&["qsort"]), Filter::default()).unwrap();
    apply(&mut core, &changes);
    assert_eq!(
        guards(&core, lib),
        [(false, false), (false, false), (true, true), (false, false)]
    );
    // `:mod:` selects plainly, internal functions too; the guard comes off
    // the imported one without a change of target.
    let changes = core
        .set_filter(a, filter(&["*:mod:libc"]), Filter::default())
        .unwrap();
    assert!(changes
        .iter()
        .any(|c| c.site == 2 && c.from == c.to && !c.guarded));
    apply(&mut core, &changes);
    assert_eq!(guards(&core, lib), [(true, false); 4]);
    // A second ops wanting qsort as a library call: still unguarded (one
    // ops wants every call).
    let (b, changes) = core.register(libcall_ops(&["qsort"], &[])).unwrap();
    apply(&mut core, &changes);
    assert_eq!(guards(&core, lib)[2], (true, false));
    core.unregister(a).map(|c| apply(&mut core, &c)).unwrap();
    assert_eq!(
        guards(&core, lib),
        [(false, false), (false, false), (true, true), (false, false)]
    );
    core.unregister(b).map(|c| apply(&mut core, &c)).unwrap();
    // A pattern for another module selects nothing here.
    let (_, changes) = core.register(libcall_ops(&["*:mod:prog"], &[])).unwrap();
    assert!(changes.is_empty());
}

#[test]
fn imports_marked_later_select_their_functions() {
    let mut core = Core::new();
    let mut m = library();
    m.imported.clear();
    let (lib, _) = core.add_module(m);
    let (_, changes) = core.register(libcall_ops(&[], &[])).unwrap();
    assert!(changes.is_empty());
    let changes = core.mark_imported(lib, &[3]);
    assert_eq!(changes.len(), 1);
    assert!(changes[0].guarded && changes[0].site == 3);
    apply(&mut core, &changes);
    assert!(core.mark_imported(lib, &[3]).is_empty());
    assert!(core.selects_any(&filter(&["_IO_internal"])));
    assert!(!core.selects_any(&filter(&["printf"])));
    assert!(core.selects_any(&filter(&["printf:mod:libc"])));
}
