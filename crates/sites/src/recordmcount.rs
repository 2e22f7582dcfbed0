//! `recordmcount`: adds `__mcount_loc` tables to relocatable objects whose
//! compiler could not write them (clang, gcc without `-mrecord-mcount`),
//! and regroups gcc's `__patchable_function_entries` one piece per code
//! section (`regroup.rs`).
//!
//! The design answers the critique in seed `002_*`: every entry is a
//! relocation against the *function symbol* (local ones included: they
//! live in the same object, so no globalize/localize dance is needed) with
//! the site's offset in the function as addend, never a section offset
//! computed by hand. Each code section gets its own table section, with
//! `SHF_LINK_ORDER` pointing at it and, when it is a COMDAT member, in the
//! same group: the linker then keeps a table piece exactly when it keeps
//! the code, so the table stays right under `-ffunction-sections`,
//! `--gc-sections` and COMDAT folding (gcc's own single `__mcount_loc` is
//! dropped whole by `--gc-sections`). The object is rewritten by appending
//! (`elfedit.rs`).

use std::collections::{BTreeMap, HashMap};

use object::elf::{SHF_ALLOC, SHF_WRITE};
use object::read::elf::FileHeader;
use object::write::elf::Rel;
use object::{Endianness, Object, ObjectSymbol, SymbolKind};

use crate::elfedit::{Editor, Piece};
use crate::error::{Error, Result};
use crate::model::{Binary, FileKind, SiteKind};
use crate::regroup;

/// Name of the table section, as gcc's `-mrecord-mcount` names it.
pub const TABLE: &str = "__mcount_loc";

/// What `record` did to an object.
#[derive(Debug)]
pub struct Outcome {
    /// The new contents of the file, when anything changed.
    pub output: Option<Vec<u8>>,
    /// What became of `__mcount_loc`.
    pub mcount: Mcount,
    /// What became of `__patchable_function_entries`.
    pub patchable: Patchable,
}

/// What `record` did about `__mcount_loc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mcount {
    /// Added.
    Recorded {
        /// Table entries written.
        sites: usize,
        /// Table sections added (one per code section with sites).
        tables: usize,
    },
    /// The object has a `__mcount_loc` table already; nothing to do.
    AlreadyRecorded,
    /// The object calls no `__fentry__`/`mcount`; nothing to do.
    NoSites,
}

/// What `record` did about `__patchable_function_entries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patchable {
    /// Regrouped: one piece per code section, in its COMDAT group.
    Regrouped {
        /// Entries moved into the new pieces.
        entries: usize,
        /// Pieces written (one per code section with entries).
        tables: usize,
    },
    /// Every piece holds the entries of its own section already (clang's
    /// output, or an object regrouped before).
    Grouped,
    /// The object has no such table.
    Absent,
}

/// Computes the rewritten contents of relocatable object `data`.
pub fn record(data: &[u8]) -> Result<Outcome> {
    let binary = crate::discover(data)?;
    if binary.kind != FileKind::Relocatable {
        return Err(Error::Unsupported(format!(
            "a {}, not a relocatable object: recordmcount rewrites .o files before they are linked",
            binary.kind.as_str()
        )));
    }
    match object::FileKind::parse(data)? {
        object::FileKind::Elf64 => rewrite::<object::elf::FileHeader64<Endianness>>(data, &binary),
        object::FileKind::Elf32 => rewrite::<object::elf::FileHeader32<Endianness>>(data, &binary),
        _ => Err(Error::NotElf),
    }
}

fn rewrite<Elf: FileHeader<Endian = Endianness>>(data: &[u8], binary: &Binary) -> Result<Outcome> {
    let mut editor = Editor::<Elf>::new(data)?;
    let mcount_pieces = if binary.section_names.iter().any(|n| n == TABLE) {
        None
    } else {
        Some(mcount_pieces(data, binary, &editor)?)
    };
    let mcount = match &mcount_pieces {
        None => Mcount::AlreadyRecorded,
        Some(pieces) if pieces.is_empty() => Mcount::NoSites,
        Some(pieces) => Mcount::Recorded {
            sites: pieces.iter().map(|p| p.relocs.len()).sum(),
            tables: pieces.len(),
        },
    };
    let plan = regroup::plan(&editor)?;
    let patchable = match &plan {
        Some(plan) => Patchable::Regrouped {
            entries: plan.entries,
            tables: plan.pieces.len(),
        },
        None if binary.section_names.iter().any(|n| n == regroup::TABLE) => Patchable::Grouped,
        None => Patchable::Absent,
    };
    let mut pieces = mcount_pieces.unwrap_or_default();
    if let Some(plan) = plan {
        for (table, reloc) in plan.emptied {
            editor.empty(table, reloc);
        }
        pieces.extend(plan.pieces);
    }
    let output = if pieces.is_empty() {
        None
    } else {
        for piece in pieces {
            editor.add(piece);
        }
        Some(editor.finish()?)
    };
    Ok(Outcome {
        output,
        mcount,
        patchable,
    })
}

/// One `__mcount_loc` piece per code section with calls to `__fentry__` or
/// `mcount`, each entry against the function symbol.
fn mcount_pieces<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    binary: &Binary,
    editor: &Editor<'_, Elf>,
) -> Result<Vec<Piece>> {
    let file = object::File::parse(data)?;
    // Section symbols by section: (symbol index, value), for sites outside
    // any function.
    let section_symbols: HashMap<usize, (usize, u64)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Section)
        .filter_map(|s| Some((s.section_index()?.0, (s.index().0, s.address()))))
        .collect();

    let mut tables: BTreeMap<usize, Vec<(u32, i64)>> = BTreeMap::new();
    for site in &binary.sites {
        if !matches!(site.kind, SiteKind::Fentry | SiteKind::Mcount) {
            continue;
        }
        let (symbol, base) = match binary.function_of(site) {
            Some(f) => (f.symbol, f.address),
            None => match section_symbols.get(&site.section) {
                Some(&(symbol, value)) => (symbol, value),
                None => {
                    return Err(Error::Unsupported(format!(
                        "the site at {}+{:#x} has no function symbol to refer to",
                        binary.section_name(site.section),
                        site.address
                    )))
                }
            },
        };
        let symbol = u32::try_from(symbol).map_err(|_| Error::Malformed("symbol index".into()))?;
        tables
            .entry(site.section)
            .or_default()
            .push((symbol, site.address.wrapping_sub(base) as i64));
    }
    let (r_type, rela) = (editor.pointer_reloc, editor.rela);
    let ptr = editor.pointer_size;
    let endian = editor.endian;
    Ok(tables
        .into_iter()
        .map(|(link, entries)| {
            let mut data = Vec::with_capacity(entries.len() * ptr);
            let mut relocs = Vec::with_capacity(entries.len());
            for (i, (symbol, addend)) in entries.into_iter().enumerate() {
                // With RELA the addend lives in the relocation; with REL, here.
                let word = if rela { 0 } else { addend as u64 };
                data.extend_from_slice(&pointer_bytes(endian, ptr, word));
                relocs.push(Rel {
                    r_offset: (i * ptr) as u64,
                    r_sym: symbol,
                    r_type: object::elf::RelocationType(r_type),
                    r_addend: if rela { addend } else { 0 },
                });
            }
            Piece {
                name: TABLE,
                link,
                data,
                relocs,
                flags: SHF_ALLOC | SHF_WRITE,
                replaces: None,
            }
        })
        .collect())
}

/// A pointer-sized word in the object's byte order.
fn pointer_bytes(endian: Endianness, size: usize, word: u64) -> Vec<u8> {
    match (endian, size) {
        (Endianness::Little, 8) => word.to_le_bytes().to_vec(),
        (Endianness::Big, 8) => word.to_be_bytes().to_vec(),
        (Endianness::Little, _) => (word as u32).to_le_bytes().to_vec(),
        (Endianness::Big, _) => (word as u32).to_be_bytes().to_vec(),
    }
}
