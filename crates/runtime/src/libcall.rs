//! Library calls (`docs/RUNTIME.md`, "Library calls"): the program's calls
//! into shared libraries no compiler prepared, traced at the callee.
//!
//! Such a library is an opt-in module of the core: its functions are
//! selected by a pattern that names it (`*:mod:libz`), or, for an ops that
//! wants library calls, as the functions other modules import. Which
//! modules' imports count is the mode: the program's (the default, as in
//! uftrace), or every module's (`--nest-libcall`). An import is resolved
//! as the dynamic linker resolves it for a global lookup (`dlsym`, which
//! also runs IFUNC resolvers), so PLT, `-z now`, `-fno-plt` and Rust's
//! GOT calls are one case: the function at that address.
//!
//! Every detour in such a module starts with a guard that skips the call
//! to the tracer when the caller's return address lies in range A or B and
//! not in T, the return trampolines
//! ([`fntrace_arch::x86_64::bare::guarded_detour`]). A site wanted only as
//! a library call gets the ranges of the mode: outside the program, or,
//! nested, the callee's own module and the runtime. A site some ops wants
//! plainly traces every caller but the runtime itself. A tail call by a
//! traced function (through T) is asked again by the tracer with the tail
//! caller's module ([`skips_tail_call`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use fntrace_format::settings::Libcall;

use crate::state::State;

/// The mode, as [`Libcall::ALL`]'s index.
static MODE: AtomicU8 = AtomicU8::new(1);

/// Imports that are never traced as library calls (uftrace skips the
/// same): the start of the run, which would be every trace's root, its
/// end, and the profiling hooks.
const SKIP: &[&str] = &[
    "__libc_start_main",
    "__cxa_finalize",
    "mcount",
    "_mcount",
    "__fentry__",
    "__cyg_profile_func_enter",
    "__cyg_profile_func_exit",
];

/// The library-call mode.
pub fn mode() -> Libcall {
    Libcall::ALL[MODE.load(Ordering::Relaxed) as usize]
}

/// Sets the mode and marks the imports it makes count.
pub fn set_mode(state: &mut State, mode: Libcall) -> crate::Result<()> {
    let index = Libcall::ALL.iter().position(|&m| m == mode).unwrap_or(1);
    MODE.store(index as u8, Ordering::Relaxed);
    mark(state)
}

/// Import addresses by name, resolved once each (`None`: not found).
#[derive(Debug, Default)]
pub struct Resolved {
    by_name: HashMap<Arc<str>, Option<usize>>,
}

impl Resolved {
    fn get(&mut self, name: &Arc<str>) -> Option<usize> {
        *self
            .by_name
            .entry(name.clone())
            .or_insert_with(|| crate::sys::lookup_global(name))
    }
}

/// The functions the modules of the mode import, by address, with the
/// name each is imported by.
pub fn targets(state: &mut State) -> HashMap<usize, Arc<str>> {
    let mode = mode();
    let mut out: HashMap<usize, Arc<str>> = HashMap::new();
    if mode == Libcall::None {
        return out;
    }
    let mut resolved = std::mem::take(&mut state.resolved);
    let modules = state
        .mods
        .iter()
        .flatten()
        .map(|m| (&m.imports[..], m.loaded.main));
    for (imports, main) in modules {
        if !main && mode != Libcall::Nested {
            continue;
        }
        for name in imports.iter().filter(|n| !SKIP.contains(&&***n)) {
            if let Some(addr) = resolved.get(name) {
                out.entry(addr).or_insert_with(|| name.clone());
            }
        }
    }
    state.resolved = resolved;
    out
}

/// The new names of a library's functions (`names`, by index) after the
/// imports that reach them (`imports`: function index and import name):
/// `malloc`, not glibc's `__libc_malloc` at the same address; `memcpy`,
/// not `libc.so.6+0x…`. The import's function is the name's default
/// definition (the one a global lookup finds), so another function of that
/// name is the IFUNC resolver that chose it (`strlen` for `__strlen_avx2`),
/// which becomes `strlen.ifunc` (never traced: it runs once, in the dynamic
/// linker), or an older version of it, kept for old programs (glibc's
/// compat symbols, `memcpy@GLIBC_2.2.5`, which `.dynsym` names `memcpy`
/// too), which becomes `memcpy.compat`.
pub fn renames(
    names: &[Arc<str>],
    is_ifunc: impl Fn(usize) -> bool,
    imports: &[(usize, Arc<str>)],
) -> Vec<(usize, Arc<str>)> {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        by_name.entry(name).or_default().push(i);
    }
    let mut out = Vec::new();
    for (f, name) in imports {
        for &other in by_name.get(&**name).into_iter().flatten().filter(|&&o| o != *f) {
            let suffix = if is_ifunc(other) { "ifunc" } else { "compat" };
            out.push((other, format!("{name}.{suffix}").into()));
        }
        if names.get(*f).is_some_and(|n| n != name) {
            out.push((*f, name.clone()));
        }
    }
    out
}

/// Marks, in every opt-in module, the functions that the modules of the
/// mode import, and applies what the registered ops then want. Each takes
/// the import's name ([`renames`]).
pub fn mark(state: &mut State) -> crate::Result<()> {
    let mode = mode();
    if mode == Libcall::None {
        return Ok(());
    }
    let targets = targets(state);
    let mut changes = Vec::new();
    for id in 0..state.mods.len() {
        let Some(module) = state.core.module(id).filter(|m| m.opt_in) else {
            continue;
        };
        let Some(base) = state.mods[id].as_ref().map(|m| m.fid_base as usize) else {
            continue;
        };
        let count = module.functions.len();
        let marked = |f: usize| module.imported.get(f).copied().unwrap_or(false);
        let found: Vec<(usize, Arc<str>)> = (0..count)
            .filter(|&f| !marked(f))
            .filter_map(|f| {
                let record = state.functions.get(base + f)?;
                let name = targets.get(&(record.address as usize))?;
                Some((f, name.clone()))
            })
            .collect();
        if found.is_empty() {
            continue;
        }
        // The names the callers use (`renames`).
        let ifuncs = &state.mods[id].as_ref().map_or(&[][..], |m| &m.ifuncs[..]);
        let renamed = renames(&module.functions, |f| ifuncs.contains(&(f as u32)), &found);
        for (f, name) in renamed {
            state.functions[base + f].name = name.clone();
            state.core.rename(id, f, name);
        }
        let fs: Vec<usize> = found.iter().map(|(f, _)| *f).collect();
        changes.extend(state.core.mark_imported(id, &fs));
    }
    state.apply(changes)
}

/// Where the clients' return trampolines are, `[start, end)`: a return
/// address there is a hijacked slot, the function that holds it tail-called
/// here, and the call is its caller's (never skipped by the guard).
static RETURNS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// Tells the guards where the return trampolines are (a client that
/// hijacks returns calls this before it registers).
pub fn set_return_trampolines((start, end): (usize, usize)) {
    RETURNS[0].store(start, Ordering::Relaxed);
    RETURNS[1].store(end, Ordering::Relaxed);
}

/// The ranges of the guard of a site in module `m`: `(start, length)` each
/// of A, B and T (`fntrace_arch::x86_64::bare::guarded_detour`): callers
/// in A or B are skipped unless in T. `guarded`: the site is wanted as a
/// library call only.
pub fn ranges(state: &State, m: usize, guarded: bool) -> [(usize, usize); 3] {
    let runtime = runtime_span();
    let span = |(lo, hi): (usize, usize)| (lo, hi.saturating_sub(lo));
    let returns = span((
        RETURNS[0].load(Ordering::Relaxed),
        RETURNS[1].load(Ordering::Relaxed),
    ));
    if !guarded {
        return [span(runtime), (0, 0), returns];
    }
    let modules = || state.mods.iter().flatten();
    match mode() {
        Libcall::Nested => {
            let callee = state.mods.get(m).and_then(Option::as_ref);
            let own = callee.and_then(|c| c.loaded.code_span()).unwrap_or((0, 0));
            [span(own), span(runtime), returns]
        }
        // Outside the program: from its end, around, to its start.
        _ => match modules()
            .find(|x| x.loaded.main)
            .and_then(|p| p.loaded.code_span())
        {
            Some((lo, hi)) => [(hi, (hi - lo).wrapping_neg()), (0, 0), returns],
            // No program known: nobody is traced.
            None => [(0, usize::MAX), (0, 0), returns],
        },
    }
}

/// Whether the call whose callback `ip` this is, a tail call by a traced
/// function whose code is in the module at address `home` (its return
/// hijacked, so the guard let it through as range T), is one the site's
/// guard skips: the guard's ranges A and B, asked with the tail caller's
/// address. False for a site without a guard (its ranges are empty) and
/// for any site that is not a bare site's detour.
pub fn skips_tail_call(ip: usize, home: usize) -> bool {
    let Some(call) = ip.checked_sub(6) else {
        return false;
    };
    // SAFETY: `ip` is where a traced call's site returns to: code mapped
    // for as long as the process runs (a detour's, never freed, or the
    // function's own); the six bytes before it are that site's call.
    let bytes: [u8; 6] = unsafe { std::ptr::read_unaligned(call as *const [u8; 6]) };
    if bytes[..2] != [0xff, 0x15] {
        return false;
    }
    let disp = i32::from_le_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
    let word = ip.wrapping_add_signed(disp as isize);
    let at = word + fntrace_arch::x86_64::bare::GUARD_WORDS as usize;
    // SAFETY: `call [rip+disp]` at the end of a bare site's detour: `word`
    // is its `W`, in a group of words that lives forever (`detour.rs`),
    // read whole; the guard's ranges follow it.
    let range = |k: usize| unsafe {
        (
            std::ptr::read_volatile((at + 16 * k) as *const usize),
            std::ptr::read_volatile((at + 16 * k + 8) as *const usize),
        )
    };
    (0..2)
        .map(range)
        .any(|(start, length)| home.wrapping_sub(start) < length)
}

/// The runtime's own code: never a traced caller.
fn runtime_span() -> (usize, usize) {
    static SPAN: OnceLock<(usize, usize)> = OnceLock::new();
    *SPAN.get_or_init(|| {
        let here = runtime_span as *const () as usize;
        crate::modules::loaded()
            .into_iter()
            .find(|m| m.contains(here))
            .and_then(|m| m.code_span())
            .unwrap_or((here, here + 1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<Arc<str>> {
        list.iter().map(|&n| Arc::from(n)).collect()
    }

    #[test]
    fn the_import_names_its_function_and_others_of_that_name_step_aside() {
        // 0 __libc_malloc (malloc's address), 1 strlen (IFUNC resolver),
        // 2 libc.so.6+0x1000 (__strlen_avx2), 3 memcpy (a compat version),
        // 4 libc.so.6+0x2000 (the default memcpy), 5 puts (as imported).
        let all = names(&[
            "__libc_malloc",
            "strlen",
            "libc.so.6+0x1000",
            "memcpy",
            "libc.so.6+0x2000",
            "puts",
        ]);
        let imports = [
            (0, Arc::from("malloc")),
            (2, Arc::from("strlen")),
            (4, Arc::from("memcpy")),
            (5, Arc::from("puts")),
        ];
        let mut got = renames(&all, |f| f == 1, &imports);
        got.sort();
        let want: Vec<(usize, Arc<str>)> = vec![
            (0, "malloc".into()),
            (1, "strlen.ifunc".into()),
            (2, "strlen".into()),
            (3, "memcpy.compat".into()),
            (4, "memcpy".into()),
        ];
        assert_eq!(got, want);
    }
}
