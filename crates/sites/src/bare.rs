//! Sites for the functions no compiler prepared (`docs/SITES.md`,
//! "Functions no compiler prepared"): in an x86-64 executable or shared
//! library without a single compiler entry site, each function gets a
//! [`SiteKind::Bare`] site at its first instruction after `endbr64`,
//! holding the bytes there (up to 5). Nothing is decoded here: whether
//! and how those bytes can be moved is the patcher's question, asked
//! when a function is selected.
//!
//! Functions come from the symbols discovery already read (`.symtab`,
//! the debug file or `.dynsym`), then from the `.eh_frame` FDEs that no
//! symbol covers ([`unwind`](crate::unwind)). A function that must not be
//! patched is listed in [`Binary::unpatchable`] with the reason.

use crate::image::Image;
use crate::model::{Binary, Form, Function, Rejected, Site, SiteKind, Source, Unpatchable};
use crate::symbols::FunctionTable;
use crate::{names, unwind};

/// Bytes of a bare site: a `jmp rel32`.
const SITE_LEN: usize = 5;

/// Functions never patched, by name (design `UNPREPARED.md` 5.4; with
/// glibc's aliases, since the name kept at an address is its global one).
const NEVER: &[(&str, &str)] = &[
    ("vfork", "vfork: the child shares the parent's stack"),
    ("__vfork", "vfork: the child shares the parent's stack"),
    ("setjmp", "returns twice (setjmp)"),
    ("_setjmp", "returns twice (setjmp)"),
    ("sigsetjmp", "returns twice (setjmp)"),
    ("__sigsetjmp", "returns twice (setjmp)"),
    ("getcontext", "returns twice (getcontext)"),
    ("__getcontext", "returns twice (getcontext)"),
    ("swapcontext", "returns on another context's stack (swapcontext)"),
    (
        "__swapcontext",
        "returns on another context's stack (swapcontext)",
    ),
    ("clone", "clone: the child returns on a new stack"),
    ("__clone", "clone: the child returns on a new stack"),
    ("__clone3", "clone: the child returns on a new stack"),
    (
        "__restore_rt",
        "signal return trampoline: unwinders know it by its bytes",
    ),
    (
        "_start",
        "entered by the kernel: [rsp] is argc, not a return address",
    ),
    ("_Unwind_Resume", UNWINDER),
    ("_Unwind_Resume_or_Rethrow", UNWINDER),
    ("_Unwind_RaiseException", UNWINDER),
    ("_Unwind_ForcedUnwind", UNWINDER),
    ("_Unwind_Backtrace", UNWINDER),
];

/// Why the unwinder's library is never patched.
const UNWINDER_MODULE: &str = "in the unwinder's library: its functions read their own return addresses \
     while they walk the stack";

/// Whether the file `module` (a file name) is the unwinder's library
/// (libgcc's `libgcc_s.so.1`, LLVM's or nongnu `libunwind.so.N`).
fn is_unwinder(module: &str) -> bool {
    module.starts_with("libgcc_s.so")
        || module.starts_with("libunwind.so")
        || module.starts_with("libunwind-")
}

/// Why the unwinder's entry points are never patched.
const UNWINDER: &str =
    "the unwinder: it starts its walk from its own return address, read before anything can put it back";

/// Whether `binary` (as discovery found it in `image`) gets bare sites:
/// an x86-64 executable or shared library with no compiler entry site.
/// A file with compiler entry sites is traced through them only: the
/// functions a compiler left out there were left out on purpose.
pub(crate) fn applies(image: &Image<'_>, binary: &Binary) -> bool {
    image.isa.name() == "x86_64"
        && image.isa.pointer_size() == 8
        && !image.relocatable()
        && !binary.sites.iter().any(|s| s.kind.is_entry())
}

/// Adds the `.eh_frame` functions and a bare site for every function of
/// `binary` (whose symbols came from `from`), or its reason for having
/// none. `module` names the functions no symbol names.
pub(crate) fn add(binary: &mut Binary, image: &Image<'_>, from: Source, module: &str) {
    let from_fde = add_fde_functions(binary, image, module);
    let mut sites = Vec::with_capacity(binary.functions.len());
    let unwinder = is_unwinder(module);
    for (index, f) in binary.functions.iter().enumerate() {
        let source = if from_fde[index] { Source::EhFrame } else { from };
        let found = match unwinder {
            true => Err(UNWINDER_MODULE.to_string()),
            false => site(image, f),
        };
        match found {
            Ok((address, bytes)) => sites.push(Site {
                section: f.section,
                address,
                kind: SiteKind::Bare,
                source,
                form: Form::Code,
                bytes: bytes.into(),
                prefix: 0,
                function: Some(index),
            }),
            Err(reason) => binary.unpatchable.push(Unpatchable {
                function: index,
                source,
                reason,
            }),
        }
    }
    let sorted = binary.sites.is_empty();
    binary.sites.extend(sites);
    if !sorted {
        binary.sites.sort_by_key(|s| (s.section, s.address));
    }
}

/// Adds to `binary` a function for each FDE start that no function
/// covers, whose first row is the frame of a call, outside the PLT;
/// returns, by function index, whether each came from an FDE. Unwind
/// data that does not read whole adds nothing, and is reported in
/// [`Binary::rejected`].
fn add_fde_functions(binary: &mut Binary, image: &Image<'_>, module: &str) -> Vec<bool> {
    // The starts come in address order: the table's lookups mostly hit
    // where the last one did, or one further.
    let table = FunctionTable::new(std::mem::take(&mut binary.functions));
    let mut uncovered = |start: u64| {
        image
            .code_section_at(start)
            .is_some_and(|section| table.containing(section, start).is_none())
    };
    let fdes = unwind::fdes(image, &mut uncovered);
    binary.functions = table.functions;
    let fdes = match fdes {
        Ok(fdes) => fdes,
        Err(reason) => {
            binary.rejected.push(Rejected {
                section: None,
                address: image
                    .sections_named(".eh_frame")
                    .next()
                    .map_or(0, |(_, s)| s.address),
                source: Source::EhFrame,
                reason: format!("{reason}: no function is taken from the unwind data"),
            });
            Vec::new()
        }
    };
    let made: Vec<Function> = fdes
        .into_iter()
        .filter(|fde| fde.called && fde.size > 0)
        .filter_map(|fde| {
            let section = image.code_section_at(fde.start)?;
            if is_plt(&image.section(section)?.name) {
                return None;
            }
            let mut f = names::unnamed(format!("{module}+{:#x}", fde.start), section, fde.start, fde.size);
            f.sized = true;
            Some(f)
        })
        .collect();
    names::merge(binary, made)
}

fn is_plt(section: &str) -> bool {
    matches!(section, ".plt" | ".plt.sec" | ".plt.got")
}

/// A split part, by name: gcc's `foo.cold` (`foo.cold.N` in older
/// versions), entered by a jump from `foo`.
fn is_cold_part(name: &str) -> bool {
    name.rfind(".cold").is_some_and(|at| {
        let rest = &name[at + ".cold".len()..];
        rest.is_empty()
            || rest
                .strip_prefix('.')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Why `f` must not get a bare site, if it must not.
fn skipped(image: &Image<'_>, f: &Function) -> Option<String> {
    let section = image.section(f.section).map_or("", |s| s.name.as_str());
    if f.ifunc {
        return Some("ifunc resolver".into());
    }
    if is_plt(section) {
        return Some(format!("a PLT stub ({section})"));
    }
    if matches!(section, ".init" | ".fini") {
        return Some(format!(
            "in {section}: pieces of crti.o, crtn.o and others, run once"
        ));
    }
    // A debug file's symbol table may give the version (`name@@GCC_3.0`).
    let unversioned = f.name.split('@').next().unwrap_or(&f.name);
    if let Some((_, reason)) = NEVER.iter().find(|(name, _)| *name == unversioned) {
        return Some(format!("never patched: {reason}"));
    }
    if is_cold_part(&f.name) {
        return Some("a split part (.cold): jumped into, never called".into());
    }
    if !f.sized {
        return Some("its symbol has no size (assembly): where it ends is unknown".into());
    }
    None
}

/// The place (after any `endbr64`) and bytes of `f`'s bare site, or why
/// it has none.
fn site<'d>(image: &Image<'d>, f: &Function) -> Result<(u64, &'d [u8]), String> {
    if let Some(reason) = skipped(image, f) {
        return Err(reason);
    }
    let code = image
        .code(f.section, f.address)
        .filter(|code| f.size <= code.len() as u64)
        .ok_or("reaches past the end of its section")?;
    let pad = image.isa.landing_pad_len(code);
    if pad as u64 >= f.size {
        return Err("nothing after its endbr64".into());
    }
    let end = code.len().min(pad + SITE_LEN);
    Ok((f.address + pad as u64, &code[pad..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cold_parts_by_name() {
        for cold in ["main.cold", "f.cold.3", "_ZN1a1bEv.cold", "x.part.0.cold"] {
            assert!(is_cold_part(cold), "{cold}");
        }
        for called in [
            "cold",
            "f.part.0",
            "f.constprop.0",
            "f.cold.x",
            "f.coldish",
            "f.cold.",
        ] {
            assert!(!is_cold_part(called), "{called}");
        }
    }
}
