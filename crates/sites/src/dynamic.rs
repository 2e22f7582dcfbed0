//! A cheap look at how an ELF file is linked dynamically: the libraries it
//! needs (`DT_NEEDED`), where it asks the dynamic loader to look for them
//! (`DT_RUNPATH`, `DT_RPATH`), its `DT_SONAME`, its interpreter, and
//! whether it may have sites (the test of [`crate::may_have_sites`]).
//! Read from the file through [`object::ReadCache`]: the headers, the
//! section names, the dynamic section and the dynamic string table; the
//! dynamic symbols only when that string table names a profiling hook.
//! A library without sites (libc) costs a few small reads, never its
//! symbols or its code.

use std::fs::File;

use object::elf::{DF_1_NODEFLIB, DT_FLAGS_1, DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME, SHT_DYNSYM};
use object::read::elf::{Dyn, FileHeader, ProgramHeader, SectionHeader, Sym};
use object::{Endianness, ReadCache, ReadRef};

use crate::error::{Error, Result};
use crate::hooks::Hook;
use crate::tables;

/// What the dynamic loader reads of a file, and whether it may have sites.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dynamic {
    /// `e_machine`.
    pub machine: u16,
    /// A 64-bit file.
    pub is_64: bool,
    /// `DT_NEEDED`, in order.
    pub needed: Vec<String>,
    /// `DT_RUNPATH` (`:`-separated directories, with `$ORIGIN` and such).
    pub runpath: Option<String>,
    /// `DT_RPATH`.
    pub rpath: Option<String>,
    /// `DT_SONAME`.
    pub soname: Option<String>,
    /// `DF_1_NODEFLIB`: the system's directories are not searched for
    /// what this file needs.
    pub nodeflib: bool,
    /// `PT_INTERP`, the dynamic loader a program names.
    pub interpreter: Option<String>,
    /// A non-empty table of sites, or an import of a profiling hook; or a
    /// file without section headers, which only discovery can tell.
    pub may_have_sites: bool,
}

impl Dynamic {
    /// Reads `file`, an ELF file.
    pub fn read(file: &File) -> Result<Dynamic> {
        let cache = ReadCache::new(file);
        match object::FileKind::parse(&cache).map_err(|_| Error::NotElf)? {
            object::FileKind::Elf32 => read_elf::<object::elf::FileHeader32<Endianness>, _>(&cache),
            object::FileKind::Elf64 => read_elf::<object::elf::FileHeader64<Endianness>, _>(&cache),
            _ => Err(Error::NotElf),
        }
    }
}

fn read_elf<'d, Elf: FileHeader<Endian = Endianness>, R: ReadRef<'d>>(data: R) -> Result<Dynamic> {
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let mut out = Dynamic {
        machine: header.e_machine(endian).0,
        is_64: header.is_class_64(),
        ..Dynamic::default()
    };
    for segment in header.program_headers(endian, data)? {
        if let Some(path) = segment.interpreter(endian, data)? {
            out.interpreter = Some(String::from_utf8_lossy(path).into_owned());
        }
    }
    let sections = header.sections(endian, data)?;
    if sections.is_empty() {
        out.may_have_sites = true;
        return Ok(out);
    }
    out.may_have_sites = sections.iter().any(|s| {
        s.sh_size(endian).into() > 0
            && sections
                .section_name(endian, s)
                .is_ok_and(|n| std::str::from_utf8(n).is_ok_and(tables::is_table))
    });
    let Some((entries, strtab)) = sections.dynamic(endian, data)? else {
        return Ok(out);
    };
    let strings = sections.section(strtab)?.data(endian, data)?;
    let string = |offset: u64| -> Result<String> {
        let tail = usize::try_from(offset)
            .ok()
            .and_then(|o| strings.get(o..))
            .ok_or_else(|| Error::Malformed(format!("dynamic string at {offset:#x} out of its table")))?;
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        Ok(String::from_utf8_lossy(&tail[..end]).into_owned())
    };
    for entry in entries {
        let value = entry.val(endian);
        match entry.tag(endian) {
            DT_NEEDED => out.needed.push(string(value)?),
            DT_RUNPATH => out.runpath = Some(string(value)?),
            DT_RPATH => out.rpath = Some(string(value)?),
            DT_SONAME => out.soname = Some(string(value)?),
            DT_FLAGS_1 => out.nodeflib = value & DF_1_NODEFLIB.0 != 0,
            _ => {}
        }
    }
    if !out.may_have_sites && names_a_hook(strings) {
        out.may_have_sites = imports_a_hook::<Elf, R>(data, &sections, endian)?;
    }
    Ok(out)
}

/// Whether a string of `strings` (NUL-separated) is a hook's name.
fn names_a_hook(strings: &[u8]) -> bool {
    strings
        .split(|&b| b == 0)
        .any(|s| std::str::from_utf8(s).is_ok_and(|s| Hook::from_name(s).is_some()))
}

/// Whether an undefined dynamic symbol is a hook.
fn imports_a_hook<'d, Elf: FileHeader<Endian = Endianness>, R: ReadRef<'d>>(
    data: R,
    sections: &object::read::elf::SectionTable<'d, Elf, R>,
    endian: Endianness,
) -> Result<bool> {
    let symbols = sections.symbols(endian, data, SHT_DYNSYM)?;
    // The names from the string table read whole, not one read each.
    let strings = sections
        .section(symbols.string_section())
        .ok()
        .and_then(|s| s.data(endian, data).ok())
        .unwrap_or_default();
    Ok(symbols.symbols().iter().any(|symbol| {
        symbol.is_undefined(endian)
            && usize::try_from(symbol.st_name(endian))
                .ok()
                .and_then(|o| strings.get(o..))
                .and_then(|tail| tail.split(|&b| b == 0).next())
                .and_then(|name| std::str::from_utf8(name).ok())
                .is_some_and(|name| Hook::from_name(name).is_some())
    }))
}
