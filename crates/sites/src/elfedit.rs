//! Rewriting a relocatable ELF object by appending: table sections (each
//! with its relocations) are added at the end of the file or moved there,
//! grown COMDAT groups, a grown section-name table and a new section header
//! table follow, and every existing byte stays where it was.
//!
//! `object::build` cannot carry `SHT_GROUP` sections, which every C++
//! object has, so like the kernel's `recordmcount.c` this appends; headers
//! and relocations are encoded with `object::write::elf::Encoder`.

use std::collections::{BTreeMap, HashMap};

use object::elf::{
    SectionFlags, SHF_GROUP, SHF_INFO_LINK, SHF_LINK_ORDER, SHT_GROUP, SHT_NOBITS, SHT_PROGBITS, SHT_REL,
    SHT_RELA, SHT_STRTAB, SHT_SYMTAB,
};
use object::read::elf::{FileHeader, SectionHeader as _, SectionTable, SymbolTable};
use object::write::elf::{Encoder, FileHeader as WriteHeader, FileHeaderLayout, Rel, SectionHeader};
use object::Endianness;

use crate::error::{Error, Result};

/// A table section to write: its contents, its relocations, the code
/// section it is linked to (`SHF_LINK_ORDER`), and whose COMDAT group it
/// joins if that section is in one.
pub(crate) struct Piece {
    pub name: &'static str,
    /// The code section (`sh_link`).
    pub link: usize,
    /// The table's bytes (pointer-sized words).
    pub data: Vec<u8>,
    /// Relocations, with offsets within `data`.
    pub relocs: Vec<Rel>,
    /// Flags besides `SHF_LINK_ORDER` and `SHF_GROUP`.
    pub flags: SectionFlags,
    /// An existing table section and its relocation section to put this
    /// in, instead of new ones.
    pub replaces: Option<(usize, usize)>,
}

/// An object being rewritten.
pub(crate) struct Editor<'d, Elf: FileHeader<Endian = Endianness>> {
    data: &'d [u8],
    header: &'d Elf,
    pub endian: Endianness,
    pub sections: SectionTable<'d, Elf>,
    pub symbols: SymbolTable<'d, Elf>,
    /// The section index of the symbol table.
    symtab: usize,
    shstrndx: usize,
    encoder: Encoder<Endianness>,
    /// With addends in the relocations (RELA) or in the words (REL).
    pub rela: bool,
    /// The relocation type of an absolute pointer.
    pub pointer_reloc: u32,
    pub pointer_size: usize,
    headers: Vec<SectionHeader>,
    /// Member lists (flag word first) of the COMDAT groups, by section.
    groups: BTreeMap<usize, Vec<u32>>,
    /// The group of each member section.
    group_of: HashMap<usize, usize>,
    /// Groups whose member lists changed.
    grown: Vec<usize>,
    names: Vec<u8>,
    added_names: HashMap<String, u32>,
    out: Vec<u8>,
}

impl<'d, Elf: FileHeader<Endian = Endianness>> Editor<'d, Elf> {
    pub fn new(data: &'d [u8]) -> Result<Self> {
        let header = Elf::parse(data)?;
        let endian = header.endian()?;
        let arch = fntrace_arch::ElfArch {
            machine: header.e_machine(endian).0,
            is_64: header.is_type_64(),
            big_endian: !object::Endian::is_little_endian(endian),
        };
        let isa = fntrace_arch::for_elf(arch).ok_or_else(|| Error::UnsupportedArch(arch.describe()))?;
        let sections = header.sections(endian, data)?;
        let symbols = sections.symbols(endian, data, SHT_SYMTAB)?;
        let symtab = symbols.section().0;
        if symtab == 0 {
            return Err(Error::Unsupported("the object has no symbol table".into()));
        }
        let shstrndx = header.section_strings_index(endian, data)?.0;
        let encoder = Encoder::new(endian, header.is_type_64(), header.e_machine(endian));

        // The file header is rewritten: no section's contents may lie in it.
        let header_size = encoder.file_header_size();
        for (index, section) in sections.iter().enumerate().skip(1) {
            let (offset, size): (u64, u64) =
                (section.sh_offset(endian).into(), section.sh_size(endian).into());
            if section.sh_type(endian) != SHT_NOBITS && size != 0 && offset < header_size {
                return Err(Error::Malformed(format!(
                    "section {index} overlaps the ELF header"
                )));
            }
        }

        let mut groups = BTreeMap::new();
        let mut group_of = HashMap::new();
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
        let names = names_section.data(endian, data)?.to_vec();
        let headers = sections
            .iter()
            .map(|s| SectionHeader::from_raw(endian, s))
            .collect();
        let (pointer_reloc, rela) = isa.absolute_pointer_reloc();
        Ok(Editor {
            data,
            header,
            endian,
            sections,
            symbols,
            symtab,
            shstrndx,
            encoder,
            rela,
            pointer_reloc,
            pointer_size: isa.pointer_size(),
            headers,
            groups,
            group_of,
            grown: Vec::new(),
            names,
            added_names: HashMap::new(),
            out: data.to_vec(),
        })
    }

    /// The object's bytes as they were read.
    pub fn data(&self) -> &'d [u8] {
        self.data
    }

    /// Whether relocations use MIPS64 little-endian's own layout.
    pub fn is_mips64el(&self) -> bool {
        self.encoder.is_mips64el()
    }

    /// The COMDAT group section that `section` is a member of.
    pub fn group_of(&self, section: usize) -> Option<usize> {
        self.group_of.get(&section).copied()
    }

    /// The offset of `name` in the grown section-name table.
    fn name(&mut self, name: &str) -> u32 {
        if let Some(&offset) = self.added_names.get(name) {
            return offset;
        }
        let offset = self.names.len() as u32;
        self.names.extend_from_slice(name.as_bytes());
        self.names.push(0);
        self.added_names.insert(name.to_string(), offset);
        offset
    }

    fn align(&mut self, to: usize) {
        self.out.resize(self.out.len().next_multiple_of(to), 0);
    }

    /// Makes `member` a member of `group`.
    fn join(&mut self, group: usize, member: usize) {
        if let Some(members) = self.groups.get_mut(&group) {
            members.push(member as u32);
            self.group_of.insert(member, group);
            self.grown.push(group);
        }
    }

    /// Writes `piece`: its words and relocations at the end of the file, in
    /// new sections or in the ones it replaces.
    pub fn add(&mut self, piece: Piece) {
        let ptr = self.pointer_size;
        let group = self.group_of(piece.link);
        let group_flag = if group.is_some() {
            SHF_GROUP
        } else {
            SectionFlags(0)
        };
        let (table, reloc) = match piece.replaces {
            Some(existing) => existing,
            None => {
                let (table_name, reloc_name) = (
                    self.name(piece.name),
                    self.name(&format!(
                        "{}{}",
                        if self.rela { ".rela" } else { ".rel" },
                        piece.name
                    )),
                );
                let table = self.headers.len();
                self.headers.push(SectionHeader {
                    sh_name: table_name,
                    sh_type: SHT_PROGBITS,
                    sh_addralign: ptr as u64,
                    ..Default::default()
                });
                self.headers.push(SectionHeader {
                    sh_name: reloc_name,
                    sh_type: if self.rela { SHT_RELA } else { SHT_REL },
                    sh_link: self.symtab as u32,
                    sh_info: table as u32,
                    sh_addralign: ptr as u64,
                    sh_entsize: self.encoder.rel_size(self.rela),
                    ..Default::default()
                });
                (table, table + 1)
            }
        };

        self.align(ptr);
        let h = &mut self.headers[table];
        h.sh_flags = piece.flags | SHF_LINK_ORDER | group_flag;
        h.sh_link = piece.link as u32;
        h.sh_offset = self.out.len() as u64;
        h.sh_size = piece.data.len() as u64;
        self.out.extend_from_slice(&piece.data);

        self.align(ptr);
        let offset = self.out.len();
        for rel in &piece.relocs {
            self.encoder.relocation(&mut self.out, self.rela, rel);
        }
        let h = &mut self.headers[reloc];
        h.sh_flags = SHF_INFO_LINK | group_flag;
        h.sh_offset = offset as u64;
        h.sh_size = (self.out.len() - offset) as u64;

        if let Some(group) = group {
            for member in [table, reloc] {
                if self.group_of(member) != Some(group) {
                    self.join(group, member);
                }
            }
        }
    }

    /// Empties an existing table section and its relocation section.
    pub fn empty(&mut self, table: usize, reloc: usize) {
        self.headers[table].sh_size = 0;
        self.headers[reloc].sh_size = 0;
    }

    /// The rewritten object.
    pub fn finish(mut self) -> Result<Vec<u8>> {
        let endian = self.endian;
        let mut grown = std::mem::take(&mut self.grown);
        grown.sort_unstable();
        grown.dedup();
        for group in grown {
            self.align(4);
            let words = &self.groups[&group];
            self.headers[group].sh_offset = self.out.len() as u64;
            self.headers[group].sh_size = (words.len() * 4) as u64;
            for &word in words {
                self.out.extend_from_slice(&match endian {
                    Endianness::Little => word.to_le_bytes(),
                    Endianness::Big => word.to_be_bytes(),
                });
            }
        }

        self.headers[self.shstrndx].sh_offset = self.out.len() as u64;
        self.headers[self.shstrndx].sh_size = self.names.len() as u64;
        self.out.extend_from_slice(&self.names);

        self.align(self.pointer_size);
        let layout = FileHeaderLayout {
            e_phoff: self.header.e_phoff(endian).into(),
            segment_num: self.header.phnum(endian, self.data)?,
            e_shoff: self.out.len() as u64,
            section_num: self.headers.len() as u32,
            shstrtab_index: self.shstrndx as u32,
        };
        self.encoder.null_section_header(&mut self.out, &layout);
        for h in &self.headers[1..] {
            self.encoder.section_header(&mut self.out, h);
        }
        let mut head = Vec::new();
        self.encoder
            .file_header(&mut head, &WriteHeader::from_raw(endian, self.header), &layout)
            .map_err(|e| Error::Unsupported(format!("cannot write the ELF header: {e}")))?;
        self.out[..head.len()].copy_from_slice(&head);
        Ok(self.out)
    }
}
