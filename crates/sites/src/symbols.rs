//! The function table: every function symbol in executable code, local
//! ones included, with their sizes and, for static functions, the source
//! file they came from.
//!
//! The symbol table is read once, in order, into compact records that are
//! then sorted by address, carrying everything the table needs: neither the
//! symbol nor the string table is read again in address order (100,000
//! random reads there cost more than the sort), and names become `String`s
//! only for the symbols kept.

use std::cell::Cell;
use std::sync::Arc;

use object::elf::{STB_GLOBAL, STB_LOCAL, STB_WEAK, STT_FILE, STT_FUNC, STT_GNU_IFUNC};
use object::read::elf::{ElfFile, FileHeader, Sym, SymbolTable};
use object::{Endianness, SymbolIndex};

use crate::image::Image;
use crate::model::Function;

/// Functions sorted by (section, address), one per address.
pub(crate) struct FunctionTable {
    pub functions: Vec<Function>,
    /// The last position found: sites come mostly in address order, so
    /// the next lookup is mostly there or one further.
    hint: Cell<usize>,
}

impl FunctionTable {
    pub fn read(image: &Image<'_>) -> Self {
        FunctionTable::new(functions(image))
    }

    pub fn new(functions: Vec<Function>) -> Self {
        FunctionTable {
            functions,
            hint: Cell::new(0),
        }
    }

    /// How many functions start at or before (`section`, `address`).
    fn position(&self, section: usize, address: u64) -> usize {
        let before = |f: &Function| (f.section, f.address) <= (section, address);
        let fs = &self.functions;
        let hint = self.hint.get();
        // Whether `p` is the answer.
        let at = |p: usize| p <= fs.len() && (p == 0 || before(&fs[p - 1])) && !fs.get(p).is_some_and(before);
        let p = if at(hint) {
            hint
        } else if at(hint + 1) {
            hint + 1
        } else {
            fs.partition_point(before)
        };
        self.hint.set(p);
        p
    }

    /// The function whose body holds `address`.
    pub fn containing(&self, section: usize, address: u64) -> Option<usize> {
        let i = self.position(section, address).checked_sub(1)?;
        self.functions[i].contains(section, address).then_some(i)
    }

    /// The function that starts exactly at `address`.
    pub fn at(&self, section: usize, address: u64) -> Option<usize> {
        let i = self.position(section, address).checked_sub(1)?;
        let f = &self.functions[i];
        (f.section == section && f.address == address).then_some(i)
    }

    /// The first function that starts after `address` and before `end`.
    pub fn starting_between(&self, section: usize, address: u64, end: u64) -> Option<usize> {
        let i = self.position(section, address);
        let f = self.functions.get(i)?;
        (f.section == section && f.address < end).then_some(i)
    }
}

/// A function symbol as gathered.
#[derive(Clone, Copy)]
struct Gathered<'d> {
    section: usize,
    address: u64,
    /// Preference among aliases (see [`rank`]).
    rank: u8,
    /// Index in the symbol table.
    index: usize,
    name: &'d [u8],
    size: u64,
    local: bool,
}

/// Preference among aliases at one address: global, then weak, then local.
fn rank(bind: object::elf::SymbolBind) -> u8 {
    match bind {
        STB_GLOBAL => 0,
        STB_WEAK => 1,
        _ => 2,
    }
}

/// A gathered symbol in a sortable form, ordered by (section, address,
/// rank, symbol index). Symbol indices are unique, so an unstable sort is
/// deterministic, and among aliases of equal rank the first symbol comes
/// first.
trait Packed<'d>: Ord + Copy {
    /// The packed symbol, if it fits; `data` is the file.
    fn pack(symbol: &Gathered<'d>, data: &'d [u8]) -> Option<Self>;
    fn unpack(self, data: &'d [u8]) -> Gathered<'d>;
}

/// Any symbol, field by field.
type Wide<'d> = (usize, u64, u8, usize, &'d [u8], u64, bool);

impl<'d> Packed<'d> for Wide<'d> {
    fn pack(s: &Gathered<'d>, _: &'d [u8]) -> Option<Self> {
        Some((s.section, s.address, s.rank, s.index, s.name, s.size, s.local))
    }

    fn unpack(self, _: &'d [u8]) -> Gathered<'d> {
        let (section, address, rank, index, name, size, local) = self;
        Gathered {
            section,
            address,
            rank,
            index,
            name,
            size,
            local,
        }
    }
}

/// The same in 32 bytes, for every real file: section (32 bits) and the
/// address's high half; its low half, rank (2) and index (30); the name's
/// offset in the file (39), length (24) and `local`; the size.
#[derive(Clone, Copy)]
struct Compact([u64; 4]);

impl Compact {
    /// (section, address, rank, index), which alone orders and tells apart.
    fn key(&self) -> u128 {
        u128::from(self.0[0]) << 64 | u128::from(self.0[1])
    }
}

impl PartialEq for Compact {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Compact {}

impl PartialOrd for Compact {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Compact {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl<'d> Packed<'d> for Compact {
    fn pack(s: &Gathered<'d>, data: &'d [u8]) -> Option<Self> {
        let section = u32::try_from(s.section).ok()?;
        let at = (s.name.as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
        let end = at.checked_add(s.name.len())?;
        let inside = data.get(at..end).map(<[u8]>::as_ptr) == Some(s.name.as_ptr());
        let fits = s.index < 1 << 30 && s.rank < 4 && (at as u64) < 1 << 39 && s.name.len() < 1 << 24;
        (inside && fits).then(|| {
            Compact([
                u64::from(section) << 32 | s.address >> 32,
                s.address << 32 | u64::from(s.rank) << 30 | s.index as u64,
                (at as u64) << 25 | (s.name.len() as u64) << 1 | u64::from(s.local),
                s.size,
            ])
        })
    }

    fn unpack(self, data: &'d [u8]) -> Gathered<'d> {
        let [high, low, name, size] = self.0;
        let (at, len) = ((name >> 25) as usize, (name >> 1 & 0xff_ffff) as usize);
        Gathered {
            section: (high >> 32) as usize,
            address: high << 32 | low >> 32,
            rank: (low >> 30 & 3) as u8,
            index: (low & 0x3fff_ffff) as usize,
            // Checked when packed.
            name: data.get(at..at + len).unwrap_or_default(),
            size,
            local: name & 1 != 0,
        }
    }
}

/// A name from the file (checked as UTF-8 first: names are, nearly always),
/// shared: one allocation, which the runtime's records and function table
/// keep as they are.
fn string(name: &[u8]) -> Arc<str> {
    match std::str::from_utf8(name) {
        Ok(name) => name.into(),
        Err(_) => String::from_utf8_lossy(name).into(),
    }
}

/// Where a function without a size ends when no other follows it in its
/// section: at the end of the section.
fn section_end(image: &Image<'_>, f: &Function) -> u64 {
    image
        .section(f.section)
        .map_or(f.address, |s| s.address.saturating_add(s.size))
}

/// Whether [`functions`] reads `.symtab` (else `.dynsym`).
pub(crate) fn has_symtab(image: &Image<'_>) -> bool {
    match &image.file {
        object::File::Elf64(file) => file.elf_symbol_table().symbols().len() > 1,
        object::File::Elf32(file) => file.elf_symbol_table().symbols().len() > 1,
        _ => false,
    }
}

/// The named function symbols in code sections, from `.symtab` (or
/// `.dynsym` without it), sorted by (section, address), one per address:
/// global over weak over local, then the first. Symbols without a size
/// (hand-written assembly) reach the next function.
pub(crate) fn functions(image: &Image<'_>) -> Vec<Function> {
    match &image.file {
        object::File::Elf64(file) => elf_functions(image, file),
        object::File::Elf32(file) => elf_functions(image, file),
        _ => Vec::new(),
    }
}

fn elf_functions<'d, Elf: FileHeader<Endian = Endianness>>(
    image: &Image<'d>,
    file: &ElfFile<'d, Elf>,
) -> Vec<Function> {
    // What `object`'s `symbol_table()` gives, and `symbols()` iterates:
    // from index 1.
    let table = match has_symtab(image) {
        true => file.elf_symbol_table(),
        false => file.elf_dynamic_symbol_table(),
    };
    gather::<Compact, Elf>(image, file.endian(), table)
        .or_else(|| gather::<Wide<'_>, Elf>(image, file.endian(), table))
        .unwrap_or_default()
}

/// [`functions`], with symbols packed as `P`; `None` if one does not fit.
/// The symbol table is read directly (for each symbol, what `object`'s
/// generic `Symbol` would say).
fn gather<'d, P: Packed<'d>, Elf: FileHeader<Endian = Endianness>>(
    image: &Image<'d>,
    endian: Endianness,
    table: &SymbolTable<'d, Elf>,
) -> Option<Vec<Function>> {
    let mut symbols: Vec<P> = Vec::new();
    // `STT_FILE` symbols (index, name): a local symbol's file is the last
    // one before it.
    let mut files: Vec<(usize, Option<&[u8]>)> = Vec::new();
    // Where `STT_GNU_IFUNC` symbols are (section, address): few, and any
    // alias at such an address is a resolver.
    let mut ifuncs: Vec<(usize, u64)> = Vec::new();
    for (index, symbol) in table.symbols().iter().enumerate().skip(1) {
        let st_type = symbol.st_type();
        if st_type == STT_FILE {
            files.push((index, table.symbol_name(endian, symbol).ok()));
            continue;
        }
        if st_type != STT_FUNC && st_type != STT_GNU_IFUNC {
            continue;
        }
        let Ok(Some(section)) = table.symbol_section(endian, symbol, SymbolIndex(index)) else {
            continue;
        };
        if !image.section(section.0).is_some_and(|s| s.exec) {
            continue;
        }
        let name = match table.symbol_name(endian, symbol) {
            Ok(name) if !name.is_empty() => name,
            _ => continue,
        };
        if st_type == STT_GNU_IFUNC {
            ifuncs.push((section.0, symbol.st_value(endian).into()));
        }
        let gathered = Gathered {
            section: section.0,
            address: symbol.st_value(endian).into(),
            rank: rank(symbol.st_bind()),
            index,
            name,
            size: symbol.st_size(endian).into(),
            local: symbol.st_bind() == STB_LOCAL,
        };
        symbols.push(P::pack(&gathered, image.data)?);
    }
    symbols.sort_unstable();
    ifuncs.sort_unstable();
    let file_of = |index: usize| {
        let before = files.partition_point(|&(i, _)| i < index);
        before.checked_sub(1).and_then(|f| files[f].1)
    };
    let mut functions: Vec<Function> = Vec::with_capacity(symbols.len());
    for s in symbols.into_iter().map(|s| s.unpack(image.data)) {
        if let Some(last) = functions.last_mut() {
            if (last.section, last.address) == (s.section, s.address) {
                continue;
            }
            if last.size == 0 {
                let end = if last.section == s.section {
                    s.address
                } else {
                    section_end(image, last)
                };
                last.size = end.saturating_sub(last.address);
            }
        }
        functions.push(Function {
            name: string(s.name),
            symbol: s.index,
            section: s.section,
            address: s.address,
            size: s.size,
            local: s.local,
            file: if s.local {
                file_of(s.index).map(|f| string(f).to_string())
            } else {
                None
            },
            sized: s.size != 0,
            ifunc: ifuncs.binary_search(&(s.section, s.address)).is_ok(),
        });
    }
    if let Some(last) = functions.last_mut().filter(|f| f.size == 0) {
        last.size = section_end(image, last).saturating_sub(last.address);
    }
    Some(functions)
}
