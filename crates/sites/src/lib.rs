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
//!    which is `recordmcount`'s job done at read time.
//!
//! Entries that do not match their kind's forms are returned as
//! [`Rejected`], never trusted. Malformed input gives an [`Error`], never a
//! panic.
#![forbid(unsafe_code)]

mod classify;
pub mod demangle;
mod error;
pub mod filter;
mod hooks;
mod image;
mod model;
pub mod recordmcount;
mod scan;
mod symbols;
mod tables;

pub use error::{Error, Result};
pub use fntrace_arch::hex;
pub use model::{Binary, FileKind, Form, Function, Rejected, Site, SiteKind, SledKind, Source};

use classify::Context;
use hooks::Hooks;
use image::Image;
use symbols::FunctionTable;

/// Finds every patchable site in the ELF file `data`.
pub fn discover(data: &[u8]) -> Result<Binary> {
    let image = Image::parse(data)?;
    let functions = FunctionTable::read(&image);
    let hooks = Hooks::read(&image, &functions);
    let cx = Context {
        image: &image,
        functions: &functions,
        hooks: &hooks,
    };

    let (entries, mut rejected) = tables::read(&image);
    let mut sites = Vec::with_capacity(entries.len());
    for entry in &entries {
        match classify::classify(&cx, entry) {
            Ok(site) => sites.push(site),
            Err(r) => rejected.push(r),
        }
    }
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
    })
}

/// Orders the sites, keeps the first of two at one address (tables come
/// before scans), and rejects a site that overlaps the one before it: two
/// sites sharing bytes could not both be patched.
fn settle(mut sites: Vec<Site>, rejected: &mut Vec<Rejected>) -> Vec<Site> {
    // Stable: among sites at one address, discovery order is kept.
    sites.sort_by_key(|s| (s.section, s.address));
    let mut out: Vec<Site> = Vec::with_capacity(sites.len());
    for site in sites {
        if let Some(prev) = out.last() {
            if prev.section == site.section && prev.address == site.address {
                continue;
            }
            if prev.section == site.section && site.address < prev.address.saturating_add(prev.len() as u64) {
                rejected.push(Rejected {
                    section: Some(site.section),
                    address: site.address,
                    source: site.source,
                    reason: format!("overlaps the site at {:#x}", prev.address),
                });
                continue;
            }
        }
        out.push(site);
    }
    out
}
