//! Dynamic relocations of a linked file, read straight from the relocation
//! sections. They are the same ones `object`'s `dynamic_relocations()`
//! yields (every `SHT_REL`, `SHT_RELA` and `SHT_CREL` section linked to the
//! dynamic symbol table), without building a generic `Relocation` for each:
//! a PIE has one `R_X86_64_RELATIVE` per table entry, and discovery looks at
//! them twice (table values, hook slots).

use object::elf::{SHT_CREL, SHT_REL, SHT_RELA};
use object::read::elf::{CrelIterator, ElfFile, FileHeader, Rela, SectionHeader};
use object::Endianness;

use crate::image::Image;

/// One dynamic relocation, as discovery needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DynReloc {
    /// Address of the field it fills.
    pub offset: u64,
    /// `r_type`.
    pub r_type: u32,
    /// Dynamic symbol index; 0 for none.
    pub symbol: u32,
    /// Explicit addend (0 with implicit addends).
    pub addend: i64,
    /// REL (and CREL without addends): the addend is the stored word.
    pub implicit_addend: bool,
}

/// Calls `f` for every dynamic relocation of the file, in section order.
pub(crate) fn for_each(image: &Image<'_>, mut f: impl FnMut(DynReloc)) {
    match &image.file {
        object::File::Elf64(file) => walk(file, &mut f),
        object::File::Elf32(file) => walk(file, &mut f),
        _ => {}
    }
}

fn walk<Elf: FileHeader<Endian = Endianness>>(file: &ElfFile<'_, Elf>, f: &mut impl FnMut(DynReloc)) {
    let endian = file.endian();
    let data = file.data();
    let dynsym = file.elf_dynamic_symbol_table().section();
    let mips64el = file.elf_header().is_mips64el(endian);
    for section in file.elf_section_table().iter().skip(1) {
        if section.link(endian) != dynsym {
            continue;
        }
        match section.sh_type(endian) {
            SHT_REL => {
                let Ok(rels) = section.data_as_array::<Elf::Rel, _>(endian, data) else {
                    continue;
                };
                for r in rels {
                    // `object` reads MIPS64 little-endian's r_info layout
                    // (symbol first, then three types) only for RELA.
                    let r: Elf::Rela = (*r).into();
                    f(DynReloc {
                        offset: r.r_offset(endian).into(),
                        r_type: r.r_type(endian, mips64el).0,
                        symbol: r.r_sym(endian, mips64el),
                        addend: 0,
                        implicit_addend: true,
                    });
                }
            }
            SHT_RELA => {
                let Ok(relas) = section.data_as_array::<Elf::Rela, _>(endian, data) else {
                    continue;
                };
                for r in relas {
                    f(DynReloc {
                        offset: r.r_offset(endian).into(),
                        r_type: r.r_type(endian, mips64el).0,
                        symbol: r.r_sym(endian, mips64el),
                        addend: r.r_addend(endian).into(),
                        implicit_addend: false,
                    });
                }
            }
            SHT_CREL => {
                let Some(crels) = section
                    .data(endian, data)
                    .ok()
                    .and_then(|d| CrelIterator::new(d).ok())
                else {
                    continue;
                };
                let implicit_addend = !crels.is_rela();
                // As `object` does: a section's relocations end at the first
                // that cannot be read.
                for r in crels.map_while(Result::ok) {
                    f(DynReloc {
                        offset: r.r_offset,
                        r_type: r.r_type.0,
                        symbol: r.r_sym,
                        addend: r.r_addend,
                        implicit_addend,
                    });
                }
            }
            _ => {}
        }
    }
}
