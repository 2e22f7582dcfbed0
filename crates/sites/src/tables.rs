//! The tables compilers leave behind: `__mcount_loc`, `__return_loc`,
//! `__patchable_function_entries` (arrays of code pointers) and
//! `xray_instr_map` (XRay sled records).
//!
//! In a linked file an entry is the stored word, unless a dynamic relocation
//! covers it: in a PIE, gcc's `.quad` entries carry `R_X86_64_RELATIVE`
//! relocations whose addend is the truth (lld leaves the word itself zero).
//! XRay entries of version 2 and later are relative to their own address.
//! In a relocatable object the words are zero: the relocations say where
//! each entry points (`S + A`), as a section and an offset.

use std::cell::Cell;
use std::collections::HashMap;

use fntrace_arch::{PointerReloc, SledKind};
use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget, SectionIndex,
    SymbolIndex,
};

use crate::dynrel::DynReloc;
use crate::image::{Image, SectionInfo};
use crate::model::{Rejected, Source};

/// A table entry: the place it designates, and what it says about it.
pub(crate) struct Entry {
    pub source: Source,
    pub section: usize,
    pub address: u64,
    /// XRay: the kind of sled.
    pub sled: Option<SledKind>,
    /// XRay: the address of the function the sled belongs to.
    pub function: Option<u64>,
}

/// The pointer tables and the sources they stand for.
const POINTER_TABLES: [(&str, Source); 3] = [
    ("__mcount_loc", Source::McountLoc),
    ("__patchable_function_entries", Source::PatchableFunctionEntries),
    ("__return_loc", Source::ReturnLoc),
];

const XRAY_TABLE: &str = "xray_instr_map";

/// Whether `name` is one of the tables of sites compilers write.
pub(crate) fn is_table(name: &str) -> bool {
    name == XRAY_TABLE || POINTER_TABLES.iter().any(|(table, _)| *table == name)
}

/// At most how many entries the tables hold.
pub(crate) fn capacity(image: &Image<'_>) -> usize {
    let ptr = image.isa.pointer_size();
    let pointers: usize = POINTER_TABLES
        .iter()
        .flat_map(|(name, _)| image.sections_named(name))
        .map(|(_, s)| s.data.len() / ptr)
        .sum();
    let sleds: usize = image
        .sections_named(XRAY_TABLE)
        .map(|(_, s)| s.data.len() / (4 * ptr))
        .sum();
    pointers + sleds
}

/// Reads every table entry of the file, handing each to `on_entry` in
/// order; returns the entries that are not even that. `dynamic`: the
/// values dynamic relocations put into table fields ([`DynamicValues`]).
pub(crate) fn read(
    image: &Image<'_>,
    dynamic: Vec<(u64, u64)>,
    on_entry: &mut dyn FnMut(Entry),
) -> Vec<Rejected> {
    let mut reader = Reader {
        image,
        on_entry,
        rejected: Vec::new(),
        dynamic,
        next_dynamic: Cell::new(0),
    };
    for (name, source) in POINTER_TABLES {
        for (index, section) in image.sections_named(name) {
            reader.pointers(index, section, source);
        }
    }
    for (index, section) in image.sections_named(XRAY_TABLE) {
        reader.xray(index, section);
    }
    reader.rejected
}

/// A place an entry designates: a section (relocatable objects) or not
/// known yet (linked files, found from the address), and an address.
type Target = (Option<usize>, u64);

struct Reader<'a, 'd> {
    image: &'a Image<'d>,
    on_entry: &'a mut dyn FnMut(Entry),
    rejected: Vec<Rejected>,
    /// Linked files: (field address, value) from dynamic relocations, sorted.
    dynamic: Vec<(u64, u64)>,
    /// Where the next field's relocation mostly is in `dynamic`: fields
    /// are read in address order.
    next_dynamic: Cell<usize>,
}

impl Reader<'_, '_> {
    fn reject(&mut self, section: Option<usize>, address: u64, source: Source, reason: String) {
        self.rejected.push(Rejected {
            section,
            address,
            source,
            reason,
        });
    }

    fn push(&mut self, source: Source, target: Target, sled: Option<SledKind>, function: Option<u64>) {
        let (section, address) = target;
        if !self.image.relocatable() && (address == 0 || address >= u64::MAX - 1) {
            let reason = "null entry (a function the linker discarded?)".to_string();
            return self.reject(None, address, source, reason);
        }
        let section = section.or_else(|| self.image.code_section_at(address));
        match section.filter(|&s| self.image.section(s).is_some_and(|s| s.exec)) {
            Some(section) => (self.on_entry)(Entry {
                source,
                section,
                address,
                sled,
                function,
            }),
            None => self.reject(section, address, source, "points outside executable code".into()),
        }
    }

    /// The place the pointer field at `offset` of a table section
    /// designates: through its relocation (objects), or its stored value
    /// unless a dynamic relocation supplies it (linked files).
    fn field(&self, section: &SectionInfo<'_>, relocs: &HashMap<u64, Target>, offset: u64) -> Option<Target> {
        if self.image.relocatable() {
            return relocs.get(&offset).copied();
        }
        let at = section.address.wrapping_add(offset);
        let stored = usize::try_from(offset)
            .ok()
            .and_then(|o| section.data.get(o..))
            .and_then(|b| self.image.read_pointer(b))?;
        // The next relocation, unless several are for this field (then the
        // search picks, as it always did).
        let next = self.next_dynamic.get();
        let is_at = |i: usize| self.dynamic.get(i).is_some_and(|&(field, _)| field == at);
        let found = if is_at(next) && !is_at(next + 1) && !(next > 0 && is_at(next - 1)) {
            Ok(next)
        } else {
            self.dynamic.binary_search_by_key(&at, |&(field, _)| field)
        };
        let value = match found {
            Ok(i) => {
                self.next_dynamic.set(i + 1);
                self.dynamic[i].1
            }
            Err(_) => stored,
        };
        Some((None, value))
    }

    /// The entries of a pointer table section: the places its
    /// pointer-sized fields designate.
    fn pointers(&mut self, index: usize, section: &SectionInfo<'_>, source: Source) {
        let step = self.image.isa.pointer_size();
        if !section.data.len().is_multiple_of(step) {
            let reason = format!("{} bytes is not a whole number of entries", section.data.len());
            self.reject(Some(index), section.address, source, reason);
        }
        let relocs = self.relocations(index);
        let offsets = || (0..section.data.len() / step).map(|i| (i * step) as u64);
        let relocatable = self.image.relocatable();
        let missing = |s: &mut Self, offset: u64| {
            let at = section.address.wrapping_add(offset);
            s.reject(Some(index), at, source, "entry without a relocation".into());
        };
        // Objects: fields without a relocation are reported first, then
        // the entries. (A linked file's fields all have a value.)
        if relocatable {
            for offset in offsets().filter(|o| !relocs.contains_key(o)) {
                missing(self, offset);
            }
        }
        for offset in offsets() {
            match self.field(section, &relocs, offset) {
                Some(target) => self.push(source, target, None, None),
                None if !relocatable => missing(self, offset),
                None => {}
            }
        }
    }

    /// Relocatable objects: the relocations of a table section, by offset.
    fn relocations(&self, index: usize) -> HashMap<u64, Target> {
        let mut out = HashMap::new();
        if !self.image.relocatable() {
            return out;
        }
        let Ok(section) = self.image.file.section_by_index(SectionIndex(index)) else {
            return out;
        };
        let data = self.image.section(index).map_or(&[][..], |s| s.data);
        for (offset, reloc) in section.relocations() {
            let RelocationFlags::Elf { r_type } = reloc.flags() else {
                continue;
            };
            if self.image.isa.pointer_reloc(r_type.0).is_none() {
                continue;
            }
            let RelocationTarget::Symbol(symbol) = reloc.target() else {
                continue;
            };
            let Ok(symbol) = self.image.file.symbol_by_index(symbol) else {
                continue;
            };
            let Some(target_section) = symbol.section_index() else {
                continue;
            };
            let addend = if reloc.has_implicit_addend() {
                usize::try_from(offset)
                    .ok()
                    .and_then(|o| data.get(o..))
                    .and_then(|field| self.image.read_pointer(field))
                    .unwrap_or(0)
            } else {
                reloc.addend() as u64
            };
            out.insert(
                offset,
                (Some(target_section.0), symbol.address().wrapping_add(addend)),
            );
        }
        out
    }

    fn xray(&mut self, index: usize, section: &SectionInfo<'_>) {
        let ptr = self.image.isa.pointer_size();
        let size = 4 * ptr;
        let source = Source::XrayInstrMap;
        if !section.data.len().is_multiple_of(size) {
            let reason = format!("{} bytes is not a whole number of sleds", section.data.len());
            self.reject(Some(index), section.address, source, reason);
        }
        let relocs = self.relocations(index);
        for (i, record) in section.data.chunks_exact(size).enumerate() {
            let base = (i * size) as u64;
            let sled = match record[2 * ptr] {
                0 | 3 => SledKind::Entry,
                1 => SledKind::Exit,
                2 => SledKind::Tail,
                // Custom and typed event sleds are not function sites.
                _ => continue,
            };
            let version = record[2 * ptr + 2];
            let (Some(sled_at), Some(function)) = (
                self.field(section, &relocs, base),
                self.field(section, &relocs, base + ptr as u64),
            ) else {
                let at = section.address.wrapping_add(base);
                self.reject(Some(index), at, source, "sled without a relocation".into());
                continue;
            };
            // From version 2 on, linked entries are relative to themselves.
            let relative = |offset: u64, (section_index, value): Target| -> Target {
                if version >= 2 && !self.image.relocatable() {
                    (
                        section_index,
                        section.address.wrapping_add(offset).wrapping_add(value),
                    )
                } else {
                    (section_index, value)
                }
            };
            let sled_at = relative(base, sled_at);
            let function = relative(base + ptr as u64, function);
            self.push(source, sled_at, Some(sled), Some(function.1));
        }
    }
}

/// Linked files: the values that dynamic relocations put into table
/// fields, gathered from the relocations one by one ([`DynamicValues::add`]).
pub(crate) struct DynamicValues<'d, 'f> {
    /// The tables' address ranges (start, size); none for objects.
    tables: Vec<(u64, u64)>,
    dynsyms: Option<object::SymbolTable<'d, 'f>>,
    /// (field address, value).
    values: Vec<(u64, u64)>,
}

impl<'d, 'f> DynamicValues<'d, 'f> {
    pub fn new(image: &'f Image<'d>) -> Self {
        let tables = if image.relocatable() {
            Vec::new()
        } else {
            POINTER_TABLES
                .iter()
                .map(|(name, _)| *name)
                .chain([XRAY_TABLE])
                .flat_map(|name| image.sections_named(name).map(|(_, s)| (s.address, s.size)))
                .collect()
        };
        DynamicValues {
            tables,
            dynsyms: image.file.dynamic_symbol_table(),
            values: Vec::new(),
        }
    }

    /// Whether any relocation can matter.
    pub fn wanted(&self) -> bool {
        !self.tables.is_empty()
    }

    /// Takes in one dynamic relocation.
    #[inline]
    pub fn add(&mut self, image: &Image<'_>, reloc: DynReloc) {
        let field = reloc.offset;
        // With implicit addends (REL) the stored word already holds the value.
        if reloc.implicit_addend
            || !self
                .tables
                .iter()
                .any(|&(start, size)| field >= start && field - start < size)
        {
            return;
        }
        let value = match image.isa.pointer_reloc(reloc.r_type) {
            Some(PointerReloc::Relative) => reloc.addend as u64,
            Some(PointerReloc::Absolute) if reloc.symbol != 0 => {
                let index = SymbolIndex(reloc.symbol as usize);
                let symbol = self.dynsyms.as_ref().and_then(|t| t.symbol_by_index(index).ok());
                match symbol.filter(|s| s.is_definition()) {
                    Some(s) => s.address().wrapping_add(reloc.addend as u64),
                    None => return,
                }
            }
            _ => return,
        };
        self.values.push((field, value));
    }

    /// The values, sorted by field address.
    pub fn finish(self) -> Vec<(u64, u64)> {
        let mut values = self.values;
        values.sort_unstable();
        values
    }
}
