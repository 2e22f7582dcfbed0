//! The GOT slots through which a linked x86-64 file calls functions of
//! other modules by name (`R_X86_64_JUMP_SLOT` and `R_X86_64_GLOB_DAT`
//! against a symbol): where the runtime, loaded into a running process by
//! `fntrace attach` (so not interposing anything), hooks the unwinder's
//! entry points.

use object::elf::{EM_X86_64, R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT};
use object::{Object, ObjectSymbol, ObjectSymbolTable, SymbolIndex, SymbolKind};

use crate::dynrel;
use crate::error::Result;
use crate::image::Image;

/// One GOT slot that holds the address of a named function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// The function's name (the index of it in the `names` asked for).
    pub which: usize,
    /// The slot's address in the file (add the load bias).
    pub slot: u64,
}

/// The GOT slots of `data` (an ELF file) that the dynamic linker fills
/// with the address of one of `names`. Nothing for files of other
/// machines or without dynamic symbols.
pub fn imports(data: &[u8], names: &[&str]) -> Result<Vec<Import>> {
    let image = Image::parse(data)?;
    let Some(dynsyms) = x86_64_dynamic_symbols(&image) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    dynrel::for_each(&image, |reloc| {
        if reloc.symbol == 0 || ![R_X86_64_JUMP_SLOT.0, R_X86_64_GLOB_DAT.0].contains(&reloc.r_type) {
            return;
        }
        let name = dynsyms
            .symbol_by_index(SymbolIndex(reloc.symbol as usize))
            .and_then(|s| s.name());
        if let Some(which) = name.ok().and_then(|n| names.iter().position(|w| *w == n)) {
            out.push(Import {
                which,
                slot: reloc.offset,
            });
        }
    });
    Ok(out)
}

/// The names of every function `data` (an x86-64 ELF file) calls in
/// other modules through a GOT slot (`JUMP_SLOT` or `GLOB_DAT` against an
/// undefined function symbol): PLT calls, `-fno-plt`/`-z now` calls and
/// Rust's `call *f@GOTPCREL` alike. Each name once, in slot order. Empty
/// for files of other machines or without dynamic symbols.
pub fn function_imports(data: &[u8]) -> Result<Vec<String>> {
    let image = Image::parse(data)?;
    let Some(dynsyms) = x86_64_dynamic_symbols(&image) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    dynrel::for_each(&image, |reloc| {
        if reloc.symbol == 0 || ![R_X86_64_JUMP_SLOT.0, R_X86_64_GLOB_DAT.0].contains(&reloc.r_type) {
            return;
        }
        let Ok(symbol) = dynsyms.symbol_by_index(SymbolIndex(reloc.symbol as usize)) else {
            return;
        };
        let function = matches!(symbol.kind(), SymbolKind::Text | SymbolKind::Unknown);
        if !symbol.is_undefined() || !function {
            return;
        }
        if let Ok(name) = symbol.name() {
            if !name.is_empty() && seen.insert(name) {
                out.push(name.to_string());
            }
        }
    });
    Ok(out)
}

/// The dynamic symbols of an x86-64 ELF file; `None` for other machines
/// or a file without them.
fn x86_64_dynamic_symbols<'i, 'd>(image: &'i Image<'d>) -> Option<object::read::SymbolTable<'d, 'i>> {
    let is_x86_64 = match &image.file {
        object::File::Elf64(f) => f.elf_header().e_machine.get(f.endian()) == EM_X86_64,
        _ => false,
    };
    image.file.dynamic_symbol_table().filter(|_| is_x86_64)
}
