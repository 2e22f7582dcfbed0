//! What a linked file's GOT holds where no relocation says so: the global
//! pointer that PIC code addresses it with, and the MIPS ABI's global GOT
//! entries.
//!
//! MIPS PIC code calls through `lw t9, %call16(f)(gp)`: the slot is at
//! `gp + offset`, where `gp` is the link-time `_gp` (GNU ld puts it 0x7ff0
//! past the start of `.got`, so that 16-bit offsets reach 64 KiB). The slots
//! of global symbols carry no dynamic relocation: the dynamic linker fills
//! the GOT from `DT_MIPS_LOCAL_GOTNO` local entries, then one entry per
//! dynamic symbol from `DT_MIPS_GOTSYM` on, in `.dynsym` order.

use object::elf::{DT_MIPS_GOTSYM, DT_MIPS_LOCAL_GOTNO, DT_MIPS_SYMTABNO, DT_PLTGOT};
use object::read::elf::{Dyn, ElfFile, FileHeader};
use object::{Endianness, Object, ObjectSymbol};

use crate::image::Image;

/// Where `_gp` lies from the start of the GOT, as GNU ld places it.
const GP_BIAS: u64 = 0x7ff0;

/// The GOT facts of a linked file.
#[derive(Debug, Default)]
pub(crate) struct Got {
    /// The global pointer (link-time), if the file has one.
    pub gp: Option<u64>,
    /// MIPS global GOT entries: (slot address, symbol name).
    pub symbol_slots: Vec<(u64, String)>,
}

/// The MIPS GOT layout from the dynamic section.
#[derive(Default)]
struct Layout {
    pltgot: Option<u64>,
    local_gotno: Option<u64>,
    gotsym: Option<u64>,
    symtabno: Option<u64>,
}

impl Got {
    pub fn read(image: &Image<'_>) -> Got {
        let mips = matches!(
            image.file.architecture(),
            object::Architecture::Mips | object::Architecture::Mips64 | object::Architecture::Mips64_N32
        );
        if image.relocatable() || !mips {
            return Got::default();
        }
        let layout = match &image.file {
            object::File::Elf32(file) => layout(file),
            object::File::Elf64(file) => layout(file),
            _ => None,
        }
        .unwrap_or_default();
        // `_gp` is the truth where the symbol table is kept (it is local;
        // static executables have no dynamic section); a stripped file has
        // only the layout.
        let symbol = image
            .file
            .symbols()
            .find(|s| s.name() == Ok("_gp"))
            .map(|s| s.address());
        let gp = symbol.or_else(|| layout.pltgot?.checked_add(GP_BIAS));
        Got {
            gp,
            symbol_slots: global_slots(image, &layout),
        }
    }
}

fn layout<Elf: FileHeader<Endian = Endianness>>(file: &ElfFile<'_, Elf>) -> Option<Layout> {
    let endian = file.endian();
    let (entries, _) = file.elf_section_table().dynamic(endian, file.data()).ok()??;
    let mut layout = Layout::default();
    for entry in entries {
        let value = Some(entry.val(endian));
        match entry.tag(endian) {
            DT_PLTGOT => layout.pltgot = value,
            DT_MIPS_LOCAL_GOTNO => layout.local_gotno = value,
            DT_MIPS_GOTSYM => layout.gotsym = value,
            DT_MIPS_SYMTABNO => layout.symtabno = value,
            _ => {}
        }
    }
    Some(layout)
}

/// The global GOT entries with their symbols' names.
fn global_slots(image: &Image<'_>, layout: &Layout) -> Vec<(u64, String)> {
    let (Some(got), Some(local), Some(first)) = (layout.pltgot, layout.local_gotno, layout.gotsym) else {
        return Vec::new();
    };
    let Some(dynsyms) = image.file.dynamic_symbol_table() else {
        return Vec::new();
    };
    let ptr = image.isa.pointer_size() as u64;
    let count = layout.symtabno.unwrap_or(u64::MAX);
    let mut slots = Vec::new();
    for symbol in object::ObjectSymbolTable::symbols(&dynsyms) {
        let index = symbol.index().0 as u64;
        if index < first || index >= count {
            continue;
        }
        let Some(slot) = (index - first)
            .checked_add(local)
            .and_then(|n| n.checked_mul(ptr))
            .and_then(|off| got.checked_add(off))
        else {
            continue;
        };
        if let Ok(name) = symbol.name() {
            slots.push((slot, name.to_string()));
        }
    }
    slots
}
