//! A parsed ELF file, with the questions discovery asks of it: what is the
//! architecture, where is the code, what bytes are at an address.

use fntrace_arch::Isa;
use object::elf::{PT_INTERP, SHF_ALLOC, SHF_EXECINSTR, SHT_NOBITS};
use object::{Object, ObjectSection, ObjectSegment, SectionFlags, SegmentFlags};

use crate::error::{Error, Result};
use crate::model::FileKind;

/// What discovery keeps of one section.
pub(crate) struct SectionInfo<'d> {
    pub name: String,
    pub address: u64,
    pub size: u64,
    pub exec: bool,
    pub alloc: bool,
    /// Contents; empty for `SHT_NOBITS`.
    pub data: &'d [u8],
}

impl SectionInfo<'_> {
    pub fn contains(&self, address: u64) -> bool {
        address >= self.address && address - self.address < self.size
    }
}

pub(crate) struct Image<'d> {
    /// The whole file.
    pub data: &'d [u8],
    pub file: object::File<'d>,
    pub isa: &'static dyn Isa,
    pub kind: FileKind,
    /// By ELF section index; `None` for the null section.
    pub sections: Vec<Option<SectionInfo<'d>>>,
    /// Executable sections (address, index), sorted by address (linked
    /// files).
    exec_by_address: Vec<(u64, usize)>,
}

/// Reads `e_machine` from an ELF header that `object` has already parsed.
fn e_machine(data: &[u8]) -> Option<u16> {
    let bytes = [*data.get(18)?, *data.get(19)?];
    Some(match data.get(5)? {
        2 => u16::from_be_bytes(bytes),
        _ => u16::from_le_bytes(bytes),
    })
}

impl<'d> Image<'d> {
    pub fn parse(data: &'d [u8]) -> Result<Self> {
        if !data.starts_with(b"\x7fELF") {
            return Err(Error::NotElf);
        }
        let file = object::File::parse(data)?;
        let machine = e_machine(data).ok_or_else(|| Error::Malformed("short header".into()))?;
        let arch = fntrace_arch::ElfArch {
            machine,
            is_64: file.is_64(),
            big_endian: !file.is_little_endian(),
        };
        let isa = fntrace_arch::for_elf(arch).ok_or_else(|| Error::UnsupportedArch(arch.describe()))?;
        let kind = match file.kind() {
            object::ObjectKind::Relocatable => FileKind::Relocatable,
            object::ObjectKind::Executable => FileKind::Executable,
            object::ObjectKind::Dynamic => {
                let interp = file
                    .segments()
                    .any(|s| matches!(s.flags(), SegmentFlags::Elf { p_type, .. } if p_type == PT_INTERP));
                if interp {
                    FileKind::PieExecutable
                } else {
                    FileKind::SharedLibrary
                }
            }
            other => return Err(Error::Malformed(format!("unexpected ELF type {other:?}"))),
        };

        let mut sections = Vec::new();
        for section in file.sections() {
            let index = section.index().0;
            let (sh_type, sh_flags) = match section.flags() {
                SectionFlags::Elf { sh_type, sh_flags } => (sh_type, sh_flags),
                _ => continue,
            };
            let name = String::from_utf8_lossy(section.name_bytes()?).into_owned();
            let exec = (sh_flags & SHF_EXECINSTR).0 != 0;
            let data = if sh_type == SHT_NOBITS {
                &[][..]
            } else {
                section
                    .data()
                    .map_err(|e| Error::Malformed(format!("section {index} ({name}): {e}")))?
            };
            if sections.len() <= index {
                sections.resize_with(index + 1, || None);
            }
            sections[index] = Some(SectionInfo {
                // In objects, addresses are section offsets (symbols and
                // relocations count from the section start), whatever
                // `sh_addr` says.
                address: if kind == FileKind::Relocatable {
                    0
                } else {
                    section.address()
                },
                size: if sh_type == SHT_NOBITS {
                    section.size()
                } else {
                    data.len() as u64
                },
                alloc: (sh_flags & SHF_ALLOC).0 != 0,
                exec,
                data,
                name,
            });
        }

        let mut exec_by_address: Vec<(u64, usize)> = sections
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().filter(|s| s.exec && s.alloc).map(|s| (s.address, i)))
            .collect();
        exec_by_address.sort_by_key(|&(address, _)| address);

        Ok(Image {
            data,
            file,
            isa,
            kind,
            sections,
            exec_by_address,
        })
    }

    pub fn relocatable(&self) -> bool {
        self.kind == FileKind::Relocatable
    }

    pub fn section(&self, index: usize) -> Option<&SectionInfo<'d>> {
        self.sections.get(index)?.as_ref()
    }

    /// Sections with this name, with their indices.
    pub fn sections_named<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = (usize, &'a SectionInfo<'d>)> + 'a {
        self.sections
            .iter()
            .enumerate()
            .filter_map(move |(i, s)| s.as_ref().filter(|s| s.name == name).map(|s| (i, s)))
    }

    /// Executable sections, with their indices.
    pub fn code_sections(&self) -> impl Iterator<Item = (usize, &SectionInfo<'d>)> + '_ {
        self.sections
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().filter(|s| s.exec).map(|s| (i, s)))
    }

    /// The executable section holding `address` (linked files only: in
    /// relocatable objects every section starts at 0).
    pub fn code_section_at(&self, address: u64) -> Option<usize> {
        let pos = self
            .exec_by_address
            .partition_point(|&(start, _)| start <= address);
        let (_, index) = *self.exec_by_address.get(pos.checked_sub(1)?)?;
        self.section(index)?.contains(address).then_some(index)
    }

    /// The code from `address` to the end of executable section `section`.
    pub fn code(&self, section: usize, address: u64) -> Option<&'d [u8]> {
        let s = self.section(section).filter(|s| s.exec)?;
        let offset = usize::try_from(address.checked_sub(s.address)?).ok()?;
        s.data.get(offset..)
    }

    /// Reads a pointer-sized word with the file's endianness.
    pub fn read_pointer(&self, bytes: &[u8]) -> Option<u64> {
        let little = self.file.is_little_endian();
        Some(match self.isa.pointer_size() {
            8 => {
                let b: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
                if little {
                    u64::from_le_bytes(b)
                } else {
                    u64::from_be_bytes(b)
                }
            }
            _ => {
                let b: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
                u64::from(if little {
                    u32::from_le_bytes(b)
                } else {
                    u32::from_be_bytes(b)
                })
            }
        })
    }

    /// Names of all sections by index, for the public model.
    pub fn section_names(&self) -> Vec<String> {
        self.sections
            .iter()
            .map(|s| s.as_ref().map_or_else(String::new, |s| s.name.clone()))
            .collect()
    }
}
