//! A function pattern that matches no patchable function is refused
//! before anything runs, as a typo would otherwise record nothing (the
//! rule itself: `fntrace_filter::first_unmatched`). `record` and
//! `live` check their patterns against the program and, when the program
//! alone does not match them, the libraries it loads at start, found as
//! the dynamic loader finds them (`fntrace_sites::libraries`); `attach`
//! against the modules the process has mapped. Libraries whose headers
//! show no sites (libc) cost a few small reads; only those that may have
//! sites are read and discovered. `list` and `replay` check against what
//! they show; `ctl` is checked by the runtime, which knows its functions.

use std::collections::BTreeSet;
use std::path::Path;

use fntrace_filter::{demangle, first_unmatched, Filter, Names};
use fntrace_inject::InjectError;
use fntrace_sites::libraries::{libraries, Search};
use fntrace_sites::{Binary, Dynamic, SiteKind};

use crate::cmd::record::Options;
use crate::launch;

/// A module with patchable sites.
pub struct Module {
    /// The names a `:mod:` pattern may give it: its file name, and its
    /// soname when the file name is another (a link resolved).
    names: Vec<String>,
    /// Its sites and functions.
    binary: Binary,
    /// A library no compiler prepared: a pattern selects its functions only
    /// by naming the module (`*:mod:libz`), as the runtime's core does.
    opt_in: bool,
    /// The functions it calls in libraries, by name, when library calls are
    /// traced: a plain pattern that matches one selects that library call.
    calls: Vec<String>,
}

impl Module {
    /// `binary`, the file at `path`, known to the loader as `soname`.
    fn new(path: &Path, soname: Option<&str>, binary: Binary) -> Module {
        let mut names = vec![crate::output::file_name(path)];
        if let Some(soname) = soname.filter(|s| *s != names[0]) {
            names.push(soname.to_string());
        }
        let opt_in = false;
        Module {
            names,
            binary,
            opt_in,
            calls: Vec::new(),
        }
    }

    /// The program at `path`, whose sites are `binary` and whose library
    /// calls, if they are traced, are `calls` ([`calls_in`]).
    pub fn of_file(path: &Path, binary: Binary, calls: Vec<String>) -> Module {
        let mut module = Module::new(path, None, binary);
        module.calls = calls;
        module
    }

    /// Whether `filter` selects one of its patchable functions.
    fn selects_any(&self, filter: &Filter) -> bool {
        let binary = &self.binary;
        binary
            .sites
            .iter()
            .filter_map(|s| binary.function_of(s))
            .any(|f| {
                let demangled = f.demangled();
                let base = demangle::demangle_without_params(&f.name);
                self.names.iter().any(|module| {
                    let names = Names {
                        symbol: &f.name,
                        demangled: &demangled,
                        base: base.as_deref(),
                        module,
                    };
                    filter.selects(&names) && (!self.opt_in || filter.names_module(&names))
                })
            })
            || self.calls.iter().any(|name| {
                filter.selects(&Names {
                    symbol: name,
                    demangled: name,
                    base: None,
                    module: "",
                })
            })
    }
}

/// The function patterns of `options`, each list with the option that
/// gave it (`-T` by the functions of its triggers).
pub fn patterns(options: &Options) -> Vec<(&'static str, Vec<String>)> {
    let triggers = options
        .triggers
        .iter()
        .filter_map(|t| Some(t.rsplit_once('@')?.0.to_string()))
        .collect();
    let args = options
        .args
        .iter()
        .filter_map(|t| Some(t.split_once('@')?.0.to_string()))
        .collect();
    vec![
        ("-F", options.filter.clone()),
        ("-P", options.patch.clone()),
        ("-N", options.notrace.clone()),
        ("--graph-function", options.graph_functions.clone()),
        ("-T", triggers),
        ("-A/-R", args),
    ]
}

/// The first pattern of `options` (with its option) that matches no
/// patchable function of `modules`.
pub fn first(options: &Options, modules: &[Module]) -> Option<(&'static str, String)> {
    patterns(options).into_iter().find_map(|(option, patterns)| {
        let pattern = first_unmatched(&patterns, |f| modules.iter().any(|m| m.selects_any(f)))?;
        Some((option, pattern.to_string()))
    })
}

/// The functions the ELF file `data` calls in libraries, by name, if
/// `libcalls` (library calls are traced); else none.
pub fn calls_in(data: &[u8], libcalls: bool) -> Vec<String> {
    libcalls
        .then(|| fntrace_sites::function_imports(data).ok())
        .flatten()
        .unwrap_or_default()
}

/// Whether a pattern of `options` names a module (`PATTERN:mod:MODULE`):
/// only then are the libraries no compiler prepared read whole.
pub fn names_modules(options: &Options) -> bool {
    patterns(options)
        .iter()
        .flat_map(|(_, p)| p)
        .any(|p| p.contains(":mod:"))
}

/// The libraries with patchable sites that the ELF file `program` loads
/// when it starts, with the environment fntrace passes it; `bare`: with
/// those no compiler prepared (every x86-64 library), read whole.
pub fn libraries_of(program: &Path, bare: bool) -> Vec<Module> {
    let Some(dynamic) = dynamic(program) else {
        return Vec::new();
    };
    let search = Search::new(
        std::env::var_os("LD_LIBRARY_PATH").as_deref(),
        std::env::var_os("LD_PRELOAD").as_deref(),
    );
    libraries(program, &dynamic, &search)
        .into_iter()
        .filter(|l| bare || l.dynamic.may_have_sites)
        .filter_map(|l| {
            let (binary, _) = discover(&l.path, bare, false)?;
            let mut module = Module::new(&l.path, l.dynamic.soname.as_deref(), binary);
            module.opt_in = module.binary.sites.iter().all(|s| s.kind == SiteKind::Bare);
            Some(module)
        })
        .collect()
}

/// The modules with patchable sites that process `pid` has mapped: its
/// executable (discovered whole, as `record` does its program, with its
/// library calls if `libcalls`) and the libraries whose headers show they
/// may have sites (all, read whole, if `bare`); not the loader nor the
/// runtime.
pub fn modules_of_process(pid: i32, bare: bool, libcalls: bool) -> Result<Vec<Module>, InjectError> {
    let maps = fntrace_inject::maps(pid)?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let mut seen = BTreeSet::new();
    let mut modules = Vec::new();
    for mapping in maps.iter().filter(|m| m.exec && m.path.starts_with('/')) {
        if !seen.insert(mapping.id) {
            continue;
        }
        let file = mapping.path.rsplit('/').next().unwrap_or(&mapping.path);
        if file.starts_with("ld-linux") || file == launch::RUNTIME {
            continue;
        }
        let path = fntrace_inject::target_file(pid, &mapping.path);
        let Some(dynamic) = dynamic(&path) else {
            continue;
        };
        let is_exe = exe.as_deref() == Some(Path::new(&mapping.path));
        if !(is_exe || bare || dynamic.may_have_sites) {
            continue;
        }
        if let Some((binary, calls)) = discover(&path, is_exe || bare, is_exe && libcalls) {
            let mut module = Module::new(Path::new(&mapping.path), dynamic.soname.as_deref(), binary);
            if is_exe {
                module.calls = calls;
            } else {
                module.opt_in = module.binary.sites.iter().all(|s| s.kind == SiteKind::Bare);
            }
            modules.push(module);
        }
    }
    Ok(modules)
}

/// How the ELF file at `path` is linked.
fn dynamic(path: &Path) -> Option<Dynamic> {
    Dynamic::read(&std::fs::File::open(path).ok()?).ok()
}

/// The sites of the file at `path`, if it has any, and its library calls
/// if `libcalls` ([`calls_in`]), from one read; `bare`: with the functions
/// no compiler prepared.
fn discover(path: &Path, bare: bool, libcalls: bool) -> Option<(Binary, Vec<String>)> {
    let data = crate::output::read_input(path).ok()?;
    let options = fntrace_sites::Options {
        bare,
        ..fntrace_sites::Options::default()
    };
    let binary = fntrace_sites::discover_file_with(path, &data, &options)
        .ok()
        .filter(|b| !b.sites.is_empty())?;
    Some((binary, calls_in(&data, libcalls)))
}
