//! Names for the functions of a stripped binary (`docs/SITES.md`,
//! "Names"): its `.symtab`; else the function symbols of its separate
//! debug file ([`debugfile`](crate::debugfile)), else its `.dynsym`; and
//! a site still outside every symbol gets a function of its own, named
//! `MODULE+0xADDRESS`, so that two functions never share a name.

use std::path::Path;

use crate::image::Image;
use crate::model::{Binary, FileKind, Function, Site};
use crate::symbols;

/// The function symbols of the debug file `debug` for `image`, placed in
/// `image`'s code sections by address (a debug file keeps the section
/// headers, with no contents); `None` if it has none, or is no ELF file
/// of the same architecture.
pub(crate) fn from_debug_file(image: &Image<'_>, debug: &[u8]) -> Option<Vec<Function>> {
    let debug = Image::parse(debug).ok()?;
    if debug.isa.name() != image.isa.name() || image.relocatable() {
        return None;
    }
    let mut functions: Vec<Function> = symbols::functions(&debug)
        .into_iter()
        .filter_map(|mut f| {
            f.section = image.code_section_at(f.address)?;
            Some(f)
        })
        .collect();
    functions.sort_by_key(|f| (f.section, f.address));
    functions.dedup_by_key(|f| (f.section, f.address));
    (!functions.is_empty()).then_some(functions)
}

/// Where the function of an entry site starts: after the NOPs a
/// patchable site has before the entry, and before an `endbr64` that
/// comes just before the site (`-fcf-protection`). An `mcount` site lies
/// after the prologue: its function is named after the site.
fn entry_of(binary_code: &dyn Fn(usize, u64) -> Option<[u8; 4]>, site: &Site) -> u64 {
    let entry = site.address + u64::from(site.prefix);
    if site.prefix == 0 && site.address >= 4 {
        if let Some(bytes) = binary_code(site.section, site.address - 4) {
            if bytes == [0xf3, 0x0f, 0x1e, 0xfa] {
                return site.address - 4;
            }
        }
    }
    entry
}

/// Gives every site outside all symbols a function: one per entry site,
/// starting at its entry (see [`entry_of`]) and reaching the next
/// function, named `module+0xENTRY` (`module:SECTION+0xOFFSET` in a
/// relocatable object); other sites belong to the function before them.
pub(crate) fn name_unnamed(binary: &mut Binary, image: &Image<'_>, module: &str) {
    if binary.sites.iter().all(|s| s.function.is_some()) {
        return;
    }
    let code = |section: usize, address: u64| -> Option<[u8; 4]> {
        image.code(section, address)?.get(..4)?.try_into().ok()
    };
    let mut made: Vec<Function> = Vec::new();
    for site in binary
        .sites
        .iter()
        .filter(|s| s.function.is_none() && s.kind.is_entry())
    {
        let address = entry_of(&code, site);
        let name = match binary.kind {
            FileKind::Relocatable => format!("{module}:{}+{address:#x}", binary.section_name(site.section)),
            _ => format!("{module}+{address:#x}"),
        };
        made.push(unnamed(name, site.section, address, 0));
    }
    let made_at = merge(binary, made);
    // A made function reaches the next function, or the end of its section.
    let all = &mut binary.functions;
    for i in (0..all.len()).filter(|&i| made_at[i]) {
        let (section, address) = (all[i].section, all[i].address);
        let end = match all.get(i + 1) {
            Some(next) if next.section == section => next.address,
            _ => image
                .section(section)
                .map_or(address + 1, |s| s.address.saturating_add(s.size)),
        };
        all[i].size = end.saturating_sub(address).max(1);
    }
    for site in binary.sites.iter_mut().filter(|s| s.function.is_none()) {
        let fs = &binary.functions;
        let at = fs.partition_point(|f| (f.section, f.address) <= (site.section, site.address));
        site.function = at
            .checked_sub(1)
            .filter(|&i| fs[i].contains(site.section, site.address));
    }
}

/// A function no symbol names: `name` (`module+0xADDRESS`), `size` bytes
/// (0: not known yet).
pub(crate) fn unnamed(name: String, section: usize, address: u64, size: u64) -> Function {
    Function {
        name: name.into(),
        symbol: 0,
        section,
        address,
        size,
        local: true,
        file: None,
        sized: false,
        ifunc: false,
    }
}

/// Adds the functions `made` to `binary`'s (a made function at the address
/// of one it has is dropped), keeping them in (section, address) order
/// and the function indices of its sites and unpatchable functions right;
/// returns, by new index, whether each function is one of `made`.
pub(crate) fn merge(binary: &mut Binary, made: Vec<Function>) -> Vec<bool> {
    if made.is_empty() {
        return vec![false; binary.functions.len()];
    }
    // All functions by (section, address), each knowing its old index.
    let old = binary.functions.len();
    let mut all: Vec<(Function, Option<usize>)> = std::mem::take(&mut binary.functions)
        .into_iter()
        .enumerate()
        .map(|(i, f)| (f, Some(i)))
        .chain(made.into_iter().map(|f| (f, None)))
        .collect();
    // Stable: a function of the binary comes before a made one.
    all.sort_by_key(|(f, _)| (f.section, f.address));
    all.dedup_by_key(|(f, _)| (f.section, f.address));
    let mut new_index = vec![usize::MAX; old];
    for (i, (_, was)) in all.iter().enumerate() {
        if let Some(was) = was {
            new_index[*was] = i;
        }
    }
    let made_at = all.iter().map(|(_, was)| was.is_none()).collect();
    binary.functions = all.into_iter().map(|(f, _)| f).collect();
    let renumber = |f: usize| new_index.get(f).copied().filter(|&i| i != usize::MAX);
    for site in &mut binary.sites {
        site.function = site.function.and_then(renumber);
    }
    binary.unpatchable.retain_mut(|u| match renumber(u.function) {
        Some(f) => {
            u.function = f;
            true
        }
        None => false,
    });
    made_at
}

/// The module name used in made names: the file name of `path`.
pub(crate) fn module_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
