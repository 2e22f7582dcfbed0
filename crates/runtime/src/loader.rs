//! Taking a module in (the kernel's `ftrace_init` / `ftrace_module_init`):
//! discover its sites from its file, check them against memory, turn every
//! one into the canonical NOP of its length, and hand the module to the core
//! so that the filters in force apply to it.
//!
//! While other threads may run the module's code (an attach, a `dlopen` in
//! a multi-threaded process), a site that is a run of gcc's one-byte NOPs
//! is not made one NOP: a thread may be stopped, or interrupted by a
//! signal, between two of them, and would resume inside the new
//! instruction. Such a site is *punned* instead (`mirror.rs`): no byte of
//! it ever stops being an instruction boundary.

use std::sync::atomic::{AtomicBool, Ordering};

use fntrace_arch::{BreakpointPatcher, Code, Shape};
use fntrace_core::{Module, Role};
use fntrace_sites::SiteKind;

use crate::file::ModuleFile;
use crate::mirror::Mirror;
use crate::modules::{self, Loaded};
use crate::state::{FunctionRecord, ModState, Record, Site, State, NO_FID};
use crate::text::{self, Poke};

/// How a kind of site is switched and where it is.
pub fn shape_of(kind: SiteKind) -> (Shape, Role) {
    match kind {
        SiteKind::Fentry | SiteKind::Patchable | SiteKind::XrayEntry => (Shape::Inline, Role::Entry),
        SiteKind::Mcount => (Shape::Inline, Role::Mcount),
        SiteKind::XrayTail | SiteKind::Return => (Shape::Inline, Role::Exit),
        SiteKind::XrayExit => (Shape::ReturnSled, Role::Exit),
        // Not decoded yet: its form is known once it is first selected.
        SiteKind::Bare => (
            Shape::Bare {
                boundaries: 0,
                trap: false,
            },
            Role::Entry,
        ),
    }
}

/// Whether libraries' debug files are read (a pattern names a module).
static LIBRARY_NAMES: AtomicBool = AtomicBool::new(false);

/// Asks for the libraries' debug files from now on (`on`): the settings'
/// patterns name a module.
pub fn want_library_names(on: bool) {
    if on {
        LIBRARY_NAMES.store(true, Ordering::Relaxed);
    }
}

/// Whether the runtime leaves a module alone: itself, the vDSO, the
/// dynamic linker.
pub(crate) fn ignored(loaded: &Loaded) -> bool {
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
    if let Err(e) = crate::libcall::mark(state) {
        eprintln!("fntrace: {e}");
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
        state.publish_standing();
    }
}

fn skip(state: &mut State, reason: &str) {
    *state.stats.skipped.entry(reason.to_string()).or_default() += 1;
}

/// Sites converted per batch at start-up: the pokes of one batch are kept
/// at once, and a few hundred kilobytes reused beat fresh megabytes (each
/// new page is a fault). Live batches stay whole: each costs three syncs.
const BATCH: usize = 8192;

/// Takes in one module.
pub fn load(state: &mut State, loaded: Loaded, live: bool) {
    let Ok(file) = ModuleFile::open(&loaded.path) else {
        skip(state, "module file unreadable");
        return;
    };
    // Functions no compiler prepared are taken in everywhere: a library's
    // are traced by a filter that names it, or as library calls.
    // A library's debug file names its static functions, which only a
    // pattern naming the library selects; library calls take their names
    // from the imports (`libcall.rs`).
    let options = fntrace_sites::Options {
        bare: true,
        debug_file: loaded.main || LIBRARY_NAMES.load(Ordering::Relaxed),
    };
    let imports = fntrace_sites::function_imports(file.bytes())
        .unwrap_or_default()
        .into_iter()
        .map(std::sync::Arc::from)
        .collect();
    let path = std::path::Path::new(&loaded.path);
    let mut binary = match fntrace_sites::discover_file_with(path, file.bytes(), &options) {
        Ok(binary) => binary,
        Err(_) => {
            skip(state, "module not understood");
            return;
        }
    };
    drop(file);
    if binary.sites.is_empty() {
        return;
    }
    let mirror = if live {
        mirror_for(&loaded, &binary.sites)
    } else {
        None
    };
    let fid_base = state.functions.len() as u32;
    let disp = mirror.as_ref().map(|m| m.disp);
    let (records, originals) = convert(state, &loaded, binary.sites, fid_base, live, disp);
    if records.is_empty() {
        return;
    }
    state.stats.modules += 1;
    let path: std::sync::Arc<str> = loaded.path.as_str().into();
    let bias = loaded.bias as u64;
    // A library's functions that the modules of the library-call mode
    // import, by the name they are imported by.
    let opt_in = !loaded.main && records.iter().all(|r| r.data.kind == SiteKind::Bare);
    let mut imported = Vec::new();
    if opt_in {
        let targets = crate::libcall::targets(state);
        let found: Vec<(usize, std::sync::Arc<str>)> = binary
            .functions
            .iter()
            .enumerate()
            .filter_map(|(i, f)| Some((i, targets.get(&(bias.wrapping_add(f.address) as usize))?.clone())))
            .collect();
        let names: Vec<std::sync::Arc<str>> = binary.functions.iter().map(|f| f.name.clone()).collect();
        let functions = &binary.functions;
        for (f, name) in crate::libcall::renames(&names, |i| functions[i].ifunc, &found) {
            binary.functions[f].name = name;
        }
        imported = vec![false; binary.functions.len()];
        for (f, _) in &found {
            imported[*f] = true;
        }
    }
    // IFUNC resolvers, by function index (`libcall::renames`).
    let ifuncs: Vec<u32> = binary
        .functions
        .iter()
        .enumerate()
        .filter(|(_, f)| f.ifunc)
        .map(|(i, _)| i as u32)
        .collect();
    // Each name kept once (as discovery allocated it), shared by the core
    // and the function table.
    let mut names: Vec<std::sync::Arc<str>> = Vec::with_capacity(binary.functions.len());
    let mut records_of_functions: Vec<FunctionRecord> = binary
        .functions
        .into_iter()
        .map(|f| {
            let name = f.name;
            names.push(name.clone());
            FunctionRecord {
                module: path.clone(),
                address: bias.wrapping_add(f.address),
                size: f.size,
                name,
            }
        })
        .collect();
    records_of_functions.shrink_to_fit();
    if state.functions.is_empty() {
        state.functions = records_of_functions;
    } else {
        state.functions.extend(records_of_functions);
    }
    let mut module = ModState::new(loaded, &records, fid_base, originals, mirror);
    module.imports = imports;
    module.ifuncs = ifuncs;
    let mut core_module = Module::new(module.loaded.name(), names, records);
    core_module.opt_in = opt_in;
    core_module.imported = imported;
    let (id, changes) = state.core.add_module(core_module);
    if state.mods.len() <= id {
        state.mods.resize_with(id + 1, || None);
    }
    state.mods[id] = Some(module);
    state.publish_index();
    crate::notify::modules_added(state);
    if let Err(e) = state.apply(changes) {
        eprintln!("fntrace: {e}");
    }
}

/// Whether a site is a run of one-byte NOPs (gcc's patchable entries):
/// several instructions, which a live conversion must not merge.
fn one_byte_nops(site: &fntrace_sites::Site) -> bool {
    let bytes = &site.bytes[(site.prefix as usize).min(site.bytes.len())..];
    site.kind == SiteKind::Patchable && bytes.len() > 1 && bytes.iter().all(|&b| b == 0x90)
}

/// The mirror of the module's runs of one-byte NOPs, taken in live; `None`
/// if it has none, or there is no room for one (those sites are then left
/// alone, and counted).
fn mirror_for(loaded: &Loaded, found: &[fntrace_sites::Site]) -> Option<Mirror> {
    let mut rets: Vec<usize> = found
        .iter()
        .filter(|s| one_byte_nops(s))
        .map(|s| loaded.bias.wrapping_add(s.address as usize + s.bytes.len()))
        .collect();
    rets.sort_unstable();
    rets.dedup();
    if rets.is_empty() {
        return None;
    }
    Mirror::map(rets).ok()
}

/// Checks every discovered site against memory and turns it into the
/// canonical NOP of its length (its punned form with `disp`, for a run of
/// one-byte NOPs taken in live); returns the records of the sites kept,
/// and the original bytes of those that were not canonical NOPs (by index
/// in the records).
fn convert(
    state: &mut State,
    loaded: &Loaded,
    found: Vec<fntrace_sites::Site>,
    fid_base: u32,
    live: bool,
    disp: Option<i32>,
) -> (Vec<Record>, Vec<(u32, Code)>) {
    state.stats.sites += found.len();
    let batch = if live { found.len() } else { BATCH };
    let mut pokes = Vec::with_capacity(found.len().min(batch));
    let ranges = text::ranges(loaded);
    let mut writer = state.writer;
    writer.live = live;
    // Indices in `records` of those that could not be written.
    let mut failed = Vec::new();
    let (mut canonical, mut segment, mut kept, mut bare) = (0, 0, 0, 0);
    let mut originals: Vec<(u32, Code)> = Vec::new();
    let mut records: Vec<Record> = found
        .into_iter()
        .filter_map(|found| {
            let shape = match (live && one_byte_nops(&found), disp) {
                (false, _) => shape_of(found.kind).0,
                (true, Some(disp)) => Shape::Punned { disp },
                (true, None) => {
                    skip(
                        state,
                        "one-byte NOPs in a running program, and no room for their mirror",
                    );
                    return None;
                }
            };
            let (record, poke) = check(state, loaded, &found, shape, fid_base, &mut segment)?;
            let Some(poke) = poke else {
                // A bare site: nothing written until it is selected.
                bare += 1;
                kept += 1;
                return Some(record);
            };
            state.stats.punned += usize::from(matches!(shape, Shape::Punned { .. }));
            if poke.old == poke.new {
                canonical += 1;
            } else {
                originals.push((kept as u32, poke.old));
            }
            pokes.push(poke);
            kept += 1;
            if pokes.len() == batch {
                write(state, &mut pokes, &ranges, writer, kept, &mut failed);
            }
            Some(record)
        })
        .collect();
    write(state, &mut pokes, &ranges, writer, kept, &mut failed);
    drop_failed(&mut records, &failed);
    renumber(&mut originals, &failed);
    records.shrink_to_fit();
    originals.shrink_to_fit();
    state.stats.canonical += canonical;
    state.stats.bare += bare;
    state.stats.converted += records.len().saturating_sub(canonical + bare);
    (records, originals)
}

/// Drops the originals of the sites at the indices `failed` (ascending)
/// and gives the others their index once those sites are removed.
fn renumber(originals: &mut Vec<(u32, Code)>, failed: &[usize]) {
    if failed.is_empty() {
        return;
    }
    let mut gone = 0;
    originals.retain_mut(|(i, _)| {
        while failed.get(gone).is_some_and(|&f| f < *i as usize) {
            gone += 1;
        }
        if failed.get(gone) == Some(&(*i as usize)) {
            return false;
        }
        *i -= gone as u32;
        true
    });
}

/// A discovered site checked against memory: its record (the site already
/// canonical) and the poke that makes it so (none for a bare site, which
/// stays as it is until selected); `None`, with the
/// reason counted, for a site left alone. `segment`: where the site before
/// was in `loaded.exec` (sites come in address order).
fn check(
    state: &mut State,
    loaded: &Loaded,
    site: &fntrace_sites::Site,
    shape: Shape,
    fid_base: u32,
    segment: &mut usize,
) -> Option<(Record, Option<Poke>)> {
    let role = shape_of(site.kind).1;
    let prefix = site.prefix as usize;
    let addr = loaded.bias.wrapping_add(site.address as usize + prefix);
    let bytes = &site.bytes[prefix.min(site.bytes.len())..];
    let len = bytes.len();
    let bare = site.kind == SiteKind::Bare;
    let nop = match state.patcher.make_nop(shape, len) {
        Ok(nop) => nop,
        Err(_) if bare => Code::EMPTY,
        Err(_) => {
            skip(state, "no patchable form of this length");
            return None;
        }
    };
    if !bare && !state.patcher.call_fits(shape, len) {
        skip(state, "too short for a call after the entry");
        return None;
    }
    let inside = |&(s, e, _): &(usize, usize, i32)| addr >= s && addr + len <= e;
    if !loaded.exec.get(*segment).is_some_and(inside) {
        let Some(i) = loaded.exec.iter().position(inside) else {
            skip(state, "outside the module's code");
            return None;
        };
        *segment = i;
    }
    // SAFETY: the range lies in an executable segment of a loaded module.
    let now = unsafe { text::read(addr, len) };
    // Byte by byte: a few bytes, where a `memcmp` call costs more.
    if !now.as_slice().iter().eq(bytes) {
        skip(state, "code in memory differs from the file");
        return None;
    }
    let function = site.function.map(|f| f as u32);
    let data = Site {
        addr,
        shape,
        kind: site.kind,
        cur: if bare { now } else { nop },
        fid: function.map_or(NO_FID, |f| fid_base + f),
        slot: 0,
    };
    let record = Record::with(function, role, data);
    if bare {
        return Some((record, None));
    }
    let poke = Poke {
        addr,
        old: now,
        new: nop,
        resume: state.patcher.resume(shape, addr as u64, len, None),
        starts: 0,
    };
    Some((record, Some(poke)))
}

/// Removes the items at the indices `failed` (ascending).
fn drop_failed<T>(items: &mut Vec<T>, failed: &[usize]) {
    if failed.is_empty() {
        return;
    }
    let (mut i, mut next) = (0, failed.iter().peekable());
    items.retain(|_| {
        let gone = next.next_if_eq(&&i).is_some();
        i += 1;
        !gone
    });
}

/// Writes a batch of `pokes`, the last of the `done` sites so far; notes
/// the sites that could not be written in `failed`.
fn write(
    state: &mut State,
    pokes: &mut Vec<Poke>,
    ranges: &[text::Range],
    writer: text::Writer,
    done: usize,
    failed: &mut Vec<usize>,
) {
    if pokes.is_empty() {
        return;
    }
    let first = done - pokes.len();
    let results = text::apply(pokes, ranges, writer, &mut state.stats.batch);
    for (i, result) in results.iter().enumerate() {
        if result.is_err() {
            skip(state, "code could not be written");
            failed.push(first + i);
        }
    }
    pokes.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn originals_follow_their_sites_when_failed_sites_are_dropped() {
        let code = |b: u8| Code::new(&[b; 5]).expect("5 bytes");
        // Sites 0..8; those with originals: 1, 3, 4, 7; sites 3 and 5 failed.
        let mut originals = vec![(1, code(1)), (3, code(3)), (4, code(4)), (7, code(7))];
        let mut sites: Vec<u32> = (0..8).collect();
        let failed = [3, 5];
        drop_failed(&mut sites, &failed);
        renumber(&mut originals, &failed);
        // Each original is at the index its site now has, with its bytes.
        let found: Vec<(u32, u8)> = originals
            .iter()
            .map(|&(i, c)| (sites[i as usize], c.as_slice()[0]))
            .collect();
        assert_eq!(found, vec![(1, 1), (4, 4), (7, 7)]);
    }
}
