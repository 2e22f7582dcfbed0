//! `recordmcount`: adds `__mcount_loc` tables to relocatable objects whose
//! compiler could not write them (clang, gcc without `-mrecord-mcount`).
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
//! dropped whole by `--gc-sections`).
//!
//! `object::build` cannot carry `SHT_GROUP` sections, so like the kernel's
//! `recordmcount.c` this appends the new sections, the grown groups, a
//! grown section-name table and a new section header table at the end of
//! the file, leaving every existing byte where it was.

use std::collections::{BTreeMap, HashMap};

use object::elf::{
    SHF_ALLOC, SHF_GROUP, SHF_INFO_LINK, SHF_LINK_ORDER, SHF_WRITE, SHT_GROUP, SHT_NOBITS, SHT_PROGBITS,
    SHT_REL, SHT_RELA, SHT_STRTAB, SHT_SYMTAB,
};
use object::read::elf::{FileHeader, SectionHeader as _};
use object::write::elf::{Encoder, FileHeader as WriteHeader, FileHeaderLayout, Rel, SectionHeader};
use object::{Endianness, Object, ObjectSymbol, SymbolKind};

use crate::error::{Error, Result};
use crate::model::{FileKind, SiteKind};

/// Name of the table section, as gcc's `-mrecord-mcount` names it.
pub const TABLE: &str = "__mcount_loc";

/// What `record` did.
#[derive(Debug)]
pub enum Outcome {
    /// The rewritten object.
    Recorded {
        /// The new contents of the file.
        output: Vec<u8>,
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

/// One table entry: relocation symbol and addend.
struct Entry {
    symbol: u32,
    addend: i64,
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
    if binary.section_names.iter().any(|n| n == TABLE) {
        return Ok(Outcome::AlreadyRecorded);
    }
    let file = object::File::parse(data)?;
    // Section symbols by section: (symbol index, value), for sites outside
    // any function.
    let section_symbols: HashMap<usize, (usize, u64)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Section)
        .filter_map(|s| Some((s.section_index()?.0, (s.index().0, s.address()))))
        .collect();

    let mut tables: BTreeMap<usize, Vec<Entry>> = BTreeMap::new();
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
        tables.entry(site.section).or_default().push(Entry {
            symbol: u32::try_from(symbol).map_err(|_| Error::Malformed("symbol index".into()))?,
            addend: site.address.wrapping_sub(base) as i64,
        });
    }
    if tables.is_empty() {
        return Ok(Outcome::NoSites);
    }
    let sites = tables.values().map(Vec::len).sum();
    let count = tables.len();
    let output = match object::FileKind::parse(data)? {
        object::FileKind::Elf64 => append::<object::elf::FileHeader64<Endianness>>(data, &tables)?,
        object::FileKind::Elf32 => append::<object::elf::FileHeader32<Endianness>>(data, &tables)?,
        _ => return Err(Error::NotElf),
    };
    Ok(Outcome::Recorded {
        output,
        sites,
        tables: count,
    })
}

fn align(out: &mut Vec<u8>, to: usize) {
    out.resize(out.len().next_multiple_of(to), 0);
}

fn put_u32(out: &mut Vec<u8>, endian: Endianness, value: u32) {
    out.extend_from_slice(&match endian {
        Endianness::Little => value.to_le_bytes(),
        Endianness::Big => value.to_be_bytes(),
    });
}

/// Appends one table and one relocation section per code section.
fn append<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    tables: &BTreeMap<usize, Vec<Entry>>,
) -> Result<Vec<u8>> {
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let machine = header.e_machine(endian);
    let arch = fntrace_arch::ElfArch {
        machine: machine.0,
        is_64: header.is_type_64(),
        big_endian: !object::Endian::is_little_endian(endian),
    };
    let isa = fntrace_arch::for_elf(arch).ok_or_else(|| Error::UnsupportedArch(arch.describe()))?;
    let sections = header.sections(endian, data)?;
    let symtab = sections.symbols(endian, data, SHT_SYMTAB)?.section().0;
    if symtab == 0 {
        return Err(Error::Unsupported("the object has no symbol table".into()));
    }
    let shstrndx = header.section_strings_index(endian, data)?.0;
    let encoder = Encoder::new(endian, header.is_type_64(), header.e_machine(endian));
    let (r_type, rela) = isa.absolute_pointer_reloc();
    let ptr = isa.pointer_size();

    // The file header is rewritten: no section's contents may lie in it.
    let header_size = encoder.file_header_size();
    for (index, section) in sections.iter().enumerate().skip(1) {
        let (offset, size): (u64, u64) = (section.sh_offset(endian).into(), section.sh_size(endian).into());
        if section.sh_type(endian) != SHT_NOBITS && size != 0 && offset < header_size {
            return Err(Error::Malformed(format!(
                "section {index} overlaps the ELF header"
            )));
        }
    }

    let mut headers: Vec<SectionHeader> = sections
        .iter()
        .map(|s| SectionHeader::from_raw(endian, s))
        .collect();
    // COMDAT groups: member lists, and the group of each member.
    let mut groups: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    let mut group_of: HashMap<usize, usize> = HashMap::new();
    for (index, section) in sections.iter().enumerate() {
        if section.sh_type(endian) != SHT_GROUP {
            continue;
        }
        let words: Vec<u32> = section
            .data_as_array::<object::U32<Endianness>, _>(endian, data)?
            .iter()
            .map(|w| w.get(endian))
            .collect();
        for &member in words.iter().skip(1) {
            group_of.insert(member as usize, index);
        }
        groups.insert(index, words);
    }

    let names_section = sections.section(object::SectionIndex(shstrndx))?;
    if names_section.sh_type(endian) != SHT_STRTAB {
        return Err(Error::Malformed(format!(
            "section {shstrndx}, the section-name table, is not a string table"
        )));
    }
    let mut names = names_section.data(endian, data)?.to_vec();
    let table_name = names.len() as u32;
    names.extend_from_slice(TABLE.as_bytes());
    names.push(0);
    let reloc_name = names.len() as u32;
    names.extend_from_slice(if rela { b".rela" } else { b".rel" });
    names.extend_from_slice(TABLE.as_bytes());
    names.push(0);

    let mut out = data.to_vec();
    let mut grown = Vec::new();
    for (&code, entries) in tables {
        let group = group_of.get(&code).copied();
        let group_flag = if group.is_some() {
            SHF_GROUP
        } else {
            object::elf::SectionFlags(0)
        };

        align(&mut out, ptr);
        let table_offset = out.len() as u64;
        for e in entries {
            // With RELA the addend lives in the relocation; with REL, here.
            let word = if rela { 0 } else { e.addend as u64 };
            let bytes = match (endian, ptr) {
                (Endianness::Little, 8) => word.to_le_bytes().to_vec(),
                (Endianness::Big, 8) => word.to_be_bytes().to_vec(),
                (Endianness::Little, _) => (word as u32).to_le_bytes().to_vec(),
                (Endianness::Big, _) => (word as u32).to_be_bytes().to_vec(),
            };
            out.extend_from_slice(&bytes);
        }
        let table_index = headers.len();
        headers.push(SectionHeader {
            sh_name: table_name,
            sh_type: SHT_PROGBITS,
            sh_flags: SHF_ALLOC | SHF_WRITE | SHF_LINK_ORDER | group_flag,
            sh_addr: 0,
            sh_offset: table_offset,
            sh_size: (entries.len() * ptr) as u64,
            sh_link: code as u32,
            sh_info: 0,
            sh_addralign: ptr as u64,
            sh_entsize: 0,
        });

        align(&mut out, ptr);
        let reloc_offset = out.len();
        for (i, e) in entries.iter().enumerate() {
            let rel = Rel {
                r_offset: (i * ptr) as u64,
                r_sym: e.symbol,
                r_type: object::elf::RelocationType(r_type),
                r_addend: if rela { e.addend } else { 0 },
            };
            encoder.relocation(&mut out, rela, &rel);
        }
        let reloc_index = headers.len();
        headers.push(SectionHeader {
            sh_name: reloc_name,
            sh_type: if rela { SHT_RELA } else { SHT_REL },
            sh_flags: SHF_INFO_LINK | group_flag,
            sh_addr: 0,
            sh_offset: reloc_offset as u64,
            sh_size: (out.len() - reloc_offset) as u64,
            sh_link: symtab as u32,
            sh_info: table_index as u32,
            sh_addralign: ptr as u64,
            sh_entsize: encoder.rel_size(rela),
        });

        if let Some(members) = group.and_then(|g| groups.get_mut(&g)) {
            members.extend([table_index as u32, reloc_index as u32]);
            grown.extend(group);
        }
    }
    grown.sort_unstable();
    grown.dedup();
    for group in grown {
        align(&mut out, 4);
        headers[group].sh_offset = out.len() as u64;
        headers[group].sh_size = (groups[&group].len() * 4) as u64;
        for &word in &groups[&group] {
            put_u32(&mut out, endian, word);
        }
    }

    headers[shstrndx].sh_offset = out.len() as u64;
    headers[shstrndx].sh_size = names.len() as u64;
    out.extend_from_slice(&names);

    align(&mut out, ptr);
    let layout = FileHeaderLayout {
        e_phoff: header.e_phoff(endian).into(),
        segment_num: header.phnum(endian, data)?,
        e_shoff: out.len() as u64,
        section_num: headers.len() as u32,
        shstrtab_index: shstrndx as u32,
    };
    encoder.null_section_header(&mut out, &layout);
    for h in &headers[1..] {
        encoder.section_header(&mut out, h);
    }
    let mut head = Vec::new();
    encoder
        .file_header(&mut head, &WriteHeader::from_raw(endian, header), &layout)
        .map_err(|e| Error::Unsupported(format!("cannot write the ELF header: {e}")))?;
    out[..head.len()].copy_from_slice(&head);
    Ok(out)
}
