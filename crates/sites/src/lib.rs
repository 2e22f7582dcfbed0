//! Site discovery: for an ELF executable, shared library or relocatable
//! object, every place that can be patched, the exact bytes there now, and
//! the function it belongs to.
//!
//! Sources, in the order they are trusted:
//! 1. the tables compilers write (`__mcount_loc`, `__patchable_function_entries`,
//!    `xray_instr_map`, `__return_loc`), each entry checked against the bytes
//!    it points at;
//! 2. where a function has no table entry, the calls to `__fentry__`/`mcount`
//!    found from relocations (objects) or by decoding the code (linked files),
//!    which is `recordmcount`'s job done at read time;
//! 3. in an x86-64 executable or library with no compiler entry site,
//!    every function: a [`SiteKind::Bare`] site at its first instructions,
//!    the functions coming from the symbols and from `.eh_frame`
//!    ([`discover_file_with`]).
//!
//! Entries that do not match their kind's forms are returned as
//! [`Rejected`], never trusted. Malformed input gives an [`Error`], never a
//! panic.
#![forbid(unsafe_code)]

mod bare;
mod bytes;
mod classify;
mod code;
pub mod debugfile;
mod dynamic;
mod dynrel;
mod elfedit;
mod error;
mod got;
mod hooks;
mod image;
mod imports;
pub mod libraries;
mod model;
mod names;
pub mod params;
pub mod recordmcount;
mod regroup;
mod scan;
pub mod srclines;
mod symbols;
mod tables;
mod unwind;

pub use bytes::SiteBytes;
pub use code::Code;
pub use dynamic::Dynamic;
pub use error::{Error, Result};
pub use fntrace_arch::hex;
pub use imports::{function_imports, imports, Import};
pub use model::{Binary, FileKind, Form, Function, Rejected, Site, SiteKind, SledKind, Source, Unpatchable};

use classify::Context;
use hooks::Hooks;
use image::Image;
use object::Object;
use symbols::FunctionTable;

/// Finds every patchable site in the ELF file `data`. A site outside
/// every function symbol has no function; [`discover_file`] names them.
pub fn discover(data: &[u8]) -> Result<Binary> {
    let image = Image::parse(data)?;
    discover_in(&image, FunctionTable::read(&image))
}

/// What [`discover_file_with`] looks for besides the sites compilers left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// In an x86-64 executable or shared library without compiler entry
    /// sites, a [`SiteKind::Bare`] site for every function, and the
    /// functions that get none in [`Binary::unpatchable`].
    pub bare: bool,
    /// In a stripped file, names from its separate debug file if one is
    /// found (else `.dynsym` and the unwind data's functions, unnamed).
    pub debug_file: bool,
}

impl Default for Options {
    /// What [`discover_file`] does: bare sites included, debug files read.
    fn default() -> Self {
        Options {
            bare: true,
            debug_file: true,
        }
    }
}

/// [`discover_file_with`] with bare sites ([`Options::default`]).
pub fn discover_file(path: &std::path::Path, data: &[u8]) -> Result<Binary> {
    discover_file_with(path, data, &Options::default())
}

/// [`discover`] for the file at `path` (its contents `data`), with names
/// for every site's function (`docs/SITES.md`, "Names"): from `.symtab`;
/// in a stripped file, from its separate debug file if one is found
/// ([`debugfile`]), else `.dynsym`; a site still outside every symbol gets
/// a function of its own named `FILE+0xADDRESS`. With `options.bare`, an
/// x86-64 executable or library without compiler entry sites gets bare
/// sites (`docs/SITES.md`, "Functions no compiler prepared").
pub fn discover_file_with(path: &std::path::Path, data: &[u8], options: &Options) -> Result<Binary> {
    let image = Image::parse(data)?;
    let mut binary = discover_in(&image, FunctionTable::read(&image))?;
    let bare = options.bare && bare::applies(&image, &binary);
    if binary.sites.is_empty() && !bare {
        return Ok(binary);
    }
    let mut from = match symbols::has_symtab(&image) {
        true => Source::Symbol,
        false => Source::DynSym,
    };
    if image.file.symbol_table().is_none() && options.debug_file {
        let debug = debugfile::find(path, data);
        if let Some(functions) = debug.and_then(|d| names::from_debug_file(&image, &d)) {
            binary = discover_in(&image, FunctionTable::new(functions))?;
            from = Source::DebugFile;
        }
    }
    let module = names::module_name(path);
    if bare {
        bare::add(&mut binary, &image, from, &module);
    }
    names::name_unnamed(&mut binary, &image, &module);
    Ok(binary)
}

/// Discovery in `image`, whose functions are `functions`.
fn discover_in(image: &Image<'_>, functions: FunctionTable) -> Result<Binary> {
    // Linked files: one pass over the dynamic relocations, for the GOT
    // slots they name and the values they put into tables.
    let mut hooks = Hooks::default();
    let mut values = tables::DynamicValues::new(image);
    if !image.relocatable() {
        let dynsyms = image.file.dynamic_symbol_table();
        if dynsyms.is_some() || values.wanted() {
            dynrel::for_each(image, |reloc| {
                if let (Some(dynsyms), true) = (&dynsyms, reloc.symbol != 0) {
                    hooks.name_slot(dynsyms, reloc);
                }
                values.add(image, reloc);
            });
        }
    }
    let got = got::Got::read(image);
    let hooks = hooks.read(image, &functions, &got);
    let cx = Context {
        image,
        functions: &functions,
        hooks: &hooks,
    };

    // Entries are classified as they are read; the table's own rejections
    // come first, then those of classification, each in table order.
    let mut sites = Vec::with_capacity(tables::capacity(image));
    let mut unfit = Vec::new();
    let mut rejected = tables::read(
        image,
        values.finish(),
        &mut |entry| match classify::classify(&cx, &entry) {
            Ok(site) => sites.push(site),
            Err(r) => unfit.push(r),
        },
    );
    rejected.append(&mut unfit);
    let scanned = scan::scan(&cx, &sites);
    sites.extend(scanned);
    let sites = settle(sites, &mut rejected);

    Ok(Binary {
        kind: image.kind,
        arch: image.isa.name(),
        section_names: image.section_names(),
        functions: functions.functions,
        sites,
        rejected,
        unpatchable: Vec::new(),
    })
}

/// A quick look before the whole discovery (which takes 0.15 s for 100,000
/// functions): whether `data` has a non-empty table of sites a compiler
/// wrote, or imports a profiling hook through the dynamic linker. `false`
/// says nothing: [`discover`] may still find sites by decoding.
pub fn may_have_sites(data: &[u8]) -> bool {
    use object::{ObjectSection, ObjectSymbol};
    let Ok(file) = object::File::parse(data) else {
        return false;
    };
    file.sections()
        .any(|s| s.size() > 0 && s.name().is_ok_and(tables::is_table))
        || file
            .dynamic_symbols()
            .any(|s| s.is_undefined() && s.name().is_ok_and(|n| hooks::Hook::from_name(n).is_some()))
}

/// Orders the sites, keeps the first of two at one address (tables come
/// before scans), and rejects a site that overlaps the one before it: two
/// sites sharing bytes could not both be patched.
fn settle(mut sites: Vec<Site>, rejected: &mut Vec<Rejected>) -> Vec<Site> {
    // Stable: among sites at one address, discovery order is kept. Tables
    // are usually in order already, and a sorted slice needs no sort.
    let key = |s: &Site| (s.section, s.address);
    if !sites.windows(2).all(|w| key(&w[0]) <= key(&w[1])) {
        sites.sort_by_key(key);
    }
    // The last site kept: (section, address, end).
    let mut last: Option<(usize, u64, u64)> = None;
    sites.retain(|site| {
        if let Some((section, address, end)) = last {
            if section == site.section && address == site.address {
                return false;
            }
            if section == site.section && site.address < end {
                rejected.push(Rejected {
                    section: Some(site.section),
                    address: site.address,
                    source: site.source,
                    reason: format!("overlaps the site at {address:#x}"),
                });
                return false;
            }
        }
        let end = site.address.saturating_add(site.len() as u64);
        last = Some((site.section, site.address, end));
        true
    });
    sites
}
