//! Regrouping `__patchable_function_entries`: one table piece per code
//! section, linked to it and in its COMDAT group, as clang writes it.
//!
//! gcc 12 writes the entries of a whole translation unit into one section
//! whose `SHF_LINK_ORDER` link is the unit's *first* function, outside any
//! group. When the linker drops that function (a COMDAT copy another object
//! provides, or `--gc-sections`), it drops the entries of the whole unit;
//! when it keeps it but drops another COMDAT copy the table refers to, the
//! link fails: "`.text._ZNSt6vector…' referenced in section
//! `__patchable_function_entries' …: defined in discarded section". After
//! regrouping, the linker keeps an entry exactly when it keeps its code.
//!
//! Entries keep their relocations (symbol, type, addend, and the word, which
//! holds the addend of a REL entry); only the piece they live in changes.

use std::collections::BTreeMap;

use object::elf::{SectionFlags, SHF_GROUP, SHF_LINK_ORDER, SHT_PROGBITS, SHT_REL, SHT_RELA};
use object::read::elf::{FileHeader, SectionHeader as _};
use object::write::elf::Rel;
use object::{Endianness, SectionIndex, SymbolIndex};

use crate::elfedit::{Editor, Piece};
use crate::error::{Error, Result};

/// Name of the table section.
pub const TABLE: &str = "__patchable_function_entries";

/// One table section as the object has it.
struct Table {
    index: usize,
    /// Its relocation section.
    reloc: usize,
    link: usize,
    flags: SectionFlags,
    /// Each entry: the code section its relocation points into, its word,
    /// its relocation (offset within the table).
    entries: Vec<(usize, Vec<u8>, Rel)>,
}

/// The regrouped tables, ready to write.
pub(crate) struct Plan {
    pub pieces: Vec<Piece>,
    /// Tables (and their relocation sections) left with no entries.
    pub emptied: Vec<(usize, usize)>,
    /// Entries regrouped.
    pub entries: usize,
}

/// What regrouping would do to the object in `editor`: `None` when every
/// table piece already holds only entries of the section it is linked to,
/// and is in that section's group.
pub(crate) fn plan<Elf: FileHeader<Endian = Endianness>>(editor: &Editor<'_, Elf>) -> Result<Option<Plan>> {
    let tables = read(editor)?;
    let right = |t: &Table| {
        t.entries.iter().all(|(section, ..)| *section == t.link)
            && editor.group_of(t.index) == editor.group_of(t.link)
    };
    if tables.iter().all(right) {
        return Ok(None);
    }
    let mut by_section: BTreeMap<usize, Vec<(Vec<u8>, Rel)>> = BTreeMap::new();
    for t in &tables {
        for (section, word, rel) in &t.entries {
            by_section
                .entry(*section)
                .or_default()
                .push((word.clone(), rel.clone()));
        }
    }
    let flags = tables[0].flags;
    let mut unused: Vec<&Table> = tables.iter().collect();
    let mut pieces = Vec::new();
    let mut entries = 0;
    for (link, list) in by_section {
        // A table outside any group that is linked to this section already
        // becomes its piece; other sections get new ones.
        let reused = unused
            .iter()
            .position(|t| t.link == link && editor.group_of(t.index).is_none())
            .map(|i| unused.swap_remove(i));
        let mut data = Vec::new();
        let mut relocs = Vec::new();
        for (word, mut rel) in list {
            rel.r_offset = data.len() as u64;
            data.extend_from_slice(&word);
            relocs.push(rel);
        }
        entries += relocs.len();
        pieces.push(Piece {
            name: TABLE,
            link,
            data,
            relocs,
            flags,
            replaces: reused.map(|t| (t.index, t.reloc)),
        });
    }
    let emptied = unused.iter().map(|t| (t.index, t.reloc)).collect();
    Ok(Some(Plan {
        pieces,
        emptied,
        entries,
    }))
}

/// Every non-empty `__patchable_function_entries` section with relocations,
/// and its entries.
fn read<Elf: FileHeader<Endian = Endianness>>(editor: &Editor<'_, Elf>) -> Result<Vec<Table>> {
    let (endian, data, sections) = (editor.endian, editor.data(), &editor.sections);
    let ptr = editor.pointer_size;
    let mut tables = Vec::new();
    for (index, section) in sections.iter().enumerate() {
        if section.sh_type(endian) != SHT_PROGBITS
            || sections.section_name(endian, section)? != TABLE.as_bytes()
        {
            continue;
        }
        let words = section.data(endian, data)?;
        if words.is_empty() {
            continue;
        }
        let what = || format!("{TABLE} (section {index})");
        let mut relocs = sections.iter().enumerate().filter(|(_, s)| {
            matches!(s.sh_type(endian), SHT_REL | SHT_RELA) && s.sh_info(endian) as usize == index
        });
        let Some((reloc, reloc_section)) = relocs.next() else {
            // Nothing says where its words point: left as it is.
            continue;
        };
        if relocs.next().is_some() {
            return Err(Error::Malformed(format!(
                "{} has two relocation sections",
                what()
            )));
        }
        if reloc_section.sh_link(endian) as usize != editor.symbols.section().0 {
            return Err(Error::Malformed(format!(
                "the relocations of {} are not against the symbol table",
                what()
            )));
        }
        let rels: Vec<Rel> = match reloc_section.rela(endian, data)? {
            Some((rela, _)) => {
                let mips64el = editor.is_mips64el();
                rela.iter().map(|r| Rel::from_rela(endian, r, mips64el)).collect()
            }
            None => match reloc_section.rel(endian, data)? {
                Some((rel, _)) => rel.iter().map(|r| Rel::from_rel(endian, r)).collect(),
                None => Vec::new(),
            },
        };
        let mut covered = vec![false; words.len() / ptr];
        let mut entries = Vec::with_capacity(rels.len());
        for rel in rels {
            let offset = rel.r_offset;
            let slot = usize::try_from(offset / ptr as u64).unwrap_or(usize::MAX);
            if offset % ptr as u64 != 0
                || slot >= covered.len()
                || std::mem::replace(&mut covered[slot], true)
            {
                return Err(Error::Malformed(format!(
                    "{}: a relocation at offset {offset:#x} is not on an entry of its own",
                    what()
                )));
            }
            let symbol = editor.symbols.symbol(SymbolIndex(rel.r_sym as usize))?;
            let target = editor
                .symbols
                .symbol_section(endian, symbol, SymbolIndex(rel.r_sym as usize))?
                .map(|SectionIndex(s)| s)
                .filter(|&s| s != 0 && s < sections.len())
                .ok_or_else(|| {
                    Error::Unsupported(format!(
                        "{}: the entry at offset {offset:#x} points into no section of the object",
                        what()
                    ))
                })?;
            let word = words[slot * ptr..(slot + 1) * ptr].to_vec();
            entries.push((target, word, rel));
        }
        if covered.iter().any(|c| !c) || words.len() % ptr != 0 {
            return Err(Error::Unsupported(format!(
                "{} has entries without relocations",
                what()
            )));
        }
        let flags = SectionFlags(section.sh_flags(endian).0 & !(SHF_LINK_ORDER.0 | SHF_GROUP.0));
        tables.push(Table {
            index,
            reloc,
            link: section.sh_link(endian) as usize,
            flags,
            entries,
        });
    }
    Ok(tables)
}
