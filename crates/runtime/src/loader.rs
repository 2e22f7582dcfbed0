//! Taking a module in (the kernel's `ftrace_init` / `ftrace_module_init`):
//! discover its sites from its file, check them against memory, turn every
//! one into the canonical NOP of its length, and hand the module to the core
//! so that the filters in force apply to it.

use fntrace_arch::Shape;
use fntrace_core::{Module, Role, SiteRecord};
use fntrace_sites::SiteKind;

use crate::modules::{self, Loaded};
use crate::state::{FunctionRecord, ModState, Site, State};
use crate::text::{self, Poke};
use crate::tracer::fids::NO_FID;

/// How a kind of site is switched and where it is.
pub fn shape_of(kind: SiteKind) -> (Shape, Role) {
    match kind {
        SiteKind::Fentry | SiteKind::Patchable | SiteKind::XrayEntry => (Shape::Inline, Role::Entry),
        SiteKind::Mcount => (Shape::Inline, Role::Mcount),
        SiteKind::XrayTail | SiteKind::Return => (Shape::Inline, Role::Exit),
        SiteKind::XrayExit => (Shape::ReturnSled, Role::Exit),
    }
}

/// Whether the runtime leaves a module alone: itself, the vDSO, the
/// dynamic linker.
fn ignored(loaded: &Loaded) -> bool {
    let name = loaded.name();
    loaded.contains(ignored as *const () as usize)
        || name.starts_with("linux-vdso")
        || name.starts_with("ld-linux")
}

/// Takes in every loaded module the state does not know yet; returns how
/// many were new. `live`: other threads may run their code.
pub fn load_new(state: &mut State, live: bool) {
    let known: Vec<(String, usize)> = state
        .mods
        .iter()
        .flatten()
        .map(|m| (m.loaded.path.clone(), m.loaded.bias))
        .collect();
    for loaded in modules::loaded() {
        if ignored(&loaded) || known.iter().any(|(p, b)| *p == loaded.path && *b == loaded.bias) {
            continue;
        }
        load(state, loaded, live);
    }
}

/// Forgets the modules that are no longer loaded (after `dlclose`).
pub fn unload_gone(state: &mut State) {
    let now = modules::loaded();
    let mut changed = false;
    for id in 0..state.mods.len() {
        let gone = state.mods[id].as_ref().is_some_and(|m| {
            !now.iter()
                .any(|l| l.path == m.loaded.path && l.bias == m.loaded.bias)
        });
        if gone {
            state.mods[id] = None;
            state.core.remove_module(id);
            changed = true;
        }
    }
    if changed {
        state.publish_index();
    }
}

fn skip(state: &mut State, reason: &str) {
    *state.stats.skipped.entry(reason.to_string()).or_default() += 1;
}

/// Takes in one module.
pub fn load(state: &mut State, loaded: Loaded, live: bool) {
    let Ok(data) = std::fs::read(&loaded.path) else {
        skip(state, "module file unreadable");
        return;
    };
    let binary = match fntrace_sites::discover(&data) {
        Ok(binary) => binary,
        Err(_) => {
            skip(state, "module not understood");
            return;
        }
    };
    drop(data);
    if binary.sites.is_empty() {
        return;
    }
    let mut sites = Vec::new();
    let mut records = Vec::new();
    let fid_base = state.functions.len() as u32;
    let mut pokes = Vec::new();
    for site in &binary.sites {
        let (shape, role) = shape_of(site.kind);
        let prefix = site.prefix as usize;
        let addr = loaded.bias.wrapping_add(site.address as usize + prefix);
        let bytes = &site.bytes[prefix.min(site.bytes.len())..];
        let len = bytes.len();
        let Ok(nop) = state.patcher.make_nop(shape, len) else {
            skip(state, "no patchable form of this length");
            continue;
        };
        if !state.patcher.call_fits(shape, len) {
            skip(state, "too short for a call after the entry");
            continue;
        }
        if !loaded.exec.iter().any(|&(s, e, _)| addr >= s && addr + len <= e) {
            skip(state, "outside the module's code");
            continue;
        }
        // SAFETY: the range lies in an executable segment of a loaded module.
        let now = unsafe { text::read(addr, len) };
        if now.as_slice() != bytes {
            skip(state, "code in memory differs from the file");
            continue;
        }
        let resume = state.patcher.resume(shape, addr as u64, len, None);
        pokes.push(Poke {
            addr,
            old: now,
            new: nop,
            resume,
        });
        sites.push(Site {
            addr,
            shape,
            role,
            kind: site.kind,
            cur: now,
            fid: site.function.map_or(NO_FID, |f| fid_base + f as u32),
        });
        records.push(SiteRecord::new(site.function.map(|f| f as u32), role));
    }
    state.stats.sites += binary.sites.len();
    let canonical = pokes.iter().filter(|p| p.old == p.new).count();
    let mut writer = state.writer;
    writer.live = live;
    let results = text::apply(&pokes, &text::ranges(&loaded), writer, &mut state.stats.batch);
    let mut kept_sites = Vec::new();
    let mut kept_records = Vec::new();
    for (((site, record), poke), result) in sites.into_iter().zip(records).zip(&pokes).zip(results) {
        if result.is_ok() {
            kept_sites.push(Site {
                cur: poke.new,
                ..site
            });
            kept_records.push(record);
        } else {
            skip(state, "code could not be written");
        }
    }
    state.stats.canonical += canonical;
    state.stats.converted += kept_sites.len().saturating_sub(canonical);
    if kept_sites.is_empty() {
        return;
    }
    state.stats.modules += 1;
    let functions = binary.functions.iter().map(|f| f.name.clone()).collect();
    let path: std::sync::Arc<str> = loaded.path.as_str().into();
    state
        .functions
        .extend(binary.functions.iter().map(|f| FunctionRecord {
            module: path.clone(),
            address: (loaded.bias as u64).wrapping_add(f.address),
            size: f.size,
            name: f.name.clone(),
        }));
    let module = ModState::new(loaded, kept_sites, fid_base);
    let (id, changes) = state
        .core
        .add_module(Module::new(module.loaded.name(), functions, kept_records));
    if state.mods.len() <= id {
        state.mods.resize_with(id + 1, || None);
    }
    state.mods[id] = Some(module);
    state.publish_index();
    crate::tracer::on_modules(state);
    if let Err(e) = state.apply(changes) {
        eprintln!("fntrace: {e}");
    }
}
