//! The function table: every function symbol in executable code, local
//! ones included, with their sizes and, for static functions, the source
//! file they came from.

use object::elf::{STB_GLOBAL, STB_WEAK, STT_FUNC, STT_GNU_IFUNC};
use object::{Object, ObjectSymbol, ObjectSymbolTable, SymbolFlags, SymbolKind};

use crate::image::Image;
use crate::model::Function;

/// Functions sorted by (section, address), one per address.
pub(crate) struct FunctionTable {
    pub functions: Vec<Function>,
}

/// Preference among aliases at one address: global, then weak, then local.
fn rank(bind: object::elf::SymbolBind) -> u8 {
    match bind {
        STB_GLOBAL => 0,
        STB_WEAK => 1,
        _ => 2,
    }
}

impl FunctionTable {
    pub fn read(image: &Image<'_>) -> Self {
        let table = image
            .file
            .symbol_table()
            .filter(|t| t.symbols().next().is_some())
            .or_else(|| image.file.dynamic_symbol_table());
        let mut found: Vec<(Function, u8)> = Vec::new();
        if let Some(table) = table {
            let mut file: Option<String> = None;
            for symbol in table.symbols() {
                if symbol.kind() == SymbolKind::File {
                    file = symbol
                        .name_bytes()
                        .ok()
                        .map(|n| String::from_utf8_lossy(n).into_owned());
                    continue;
                }
                let SymbolFlags::Elf { st_info, .. } = symbol.flags() else {
                    continue;
                };
                if st_info.st_type() != STT_FUNC && st_info.st_type() != STT_GNU_IFUNC {
                    continue;
                }
                let Some(section) = symbol.section_index().map(|i| i.0) else {
                    continue;
                };
                if !image.section(section).is_some_and(|s| s.exec) {
                    continue;
                }
                let name = match symbol.name_bytes() {
                    Ok(n) if !n.is_empty() => String::from_utf8_lossy(n).into_owned(),
                    _ => continue,
                };
                let local = symbol.is_local();
                found.push((
                    Function {
                        name,
                        symbol: symbol.index().0,
                        section,
                        address: symbol.address(),
                        size: symbol.size(),
                        local,
                        file: if local { file.clone() } else { None },
                    },
                    rank(st_info.st_bind()),
                ));
            }
        }
        // Stable sort: among aliases of equal rank, the first symbol wins.
        found.sort_by_key(|(f, rank)| (f.section, f.address, *rank));
        found.dedup_by(|b, a| a.0.section == b.0.section && a.0.address == b.0.address);
        let mut functions: Vec<Function> = found.into_iter().map(|(f, _)| f).collect();

        // Symbols without a size (hand-written assembly) reach the next one.
        for i in 0..functions.len() {
            if functions[i].size != 0 {
                continue;
            }
            let f = &functions[i];
            let end = match functions.get(i + 1) {
                Some(next) if next.section == f.section => next.address,
                _ => image
                    .section(f.section)
                    .map_or(f.address, |s| s.address.saturating_add(s.size)),
            };
            functions[i].size = end.saturating_sub(f.address);
        }
        FunctionTable { functions }
    }

    fn position(&self, section: usize, address: u64) -> usize {
        self.functions
            .partition_point(|f| (f.section, f.address) <= (section, address))
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
