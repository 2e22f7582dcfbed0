//! Where each function is in its source, from DWARF (`record --srcline`,
//! uftrace's `--srcline`): the file and line of its declaration
//! (`DW_AT_decl_file`, `DW_AT_decl_line`), taken from its abstract origin
//! or specification when it has none of its own (an inlined instance, a
//! member function defined outside its class). Malformed DWARF gives an
//! error or leaves the function out, never a panic.

use gimli::{AttributeValue, Dwarf, Unit};

use crate::error::Result;
use crate::params::{each_function, each_unit, R};

/// A function's place in its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrcLine {
    /// Its address in the file.
    pub address: u64,
    /// The source file, as the compiler named it (with its directory).
    pub file: String,
    /// The line of its declaration.
    pub line: u64,
}

/// The source lines of every function with code in the ELF file `data`,
/// by address (none if it has no `.debug_info`).
pub fn srclines(data: &[u8]) -> Result<Vec<SrcLine>> {
    let mut out = each_unit(data, of_unit)?;
    out.sort_by_key(|s| s.address);
    out.dedup_by_key(|s| s.address);
    Ok(out)
}

fn of_unit(dwarf: &Dwarf<R<'_>>, unit: &Unit<R<'_>>, out: &mut Vec<SrcLine>) -> gimli::Result<()> {
    each_function(dwarf, unit, |entry, address| {
        // The declaration's place: its own, else its origin's (at most
        // two steps: an inlined instance of a member's definition).
        let mut at = entry.clone();
        let mut place = None;
        for _ in 0..3 {
            let file = at.attr_value(gimli::DW_AT_decl_file)?;
            let line = at
                .attr_value(gimli::DW_AT_decl_line)?
                .and_then(|v| v.udata_value());
            if let (Some(AttributeValue::FileIndex(file)), Some(line)) = (file, line) {
                place = Some((file, line));
                break;
            }
            let origin = [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification]
                .into_iter()
                .find_map(|a| match at.attr_value(a) {
                    Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
                    _ => None,
                });
            match origin {
                Some(o) => at = unit.entry(o)?,
                None => break,
            }
        }
        let Some((file, line)) = place else {
            return Ok(());
        };
        if let Some(file) = file_name(dwarf, unit, file)? {
            out.push(SrcLine { address, file, line });
        }
        Ok(())
    })
}

/// The name of file `index` of the unit's line program, with its directory
/// when the name is relative.
fn file_name(dwarf: &Dwarf<R<'_>>, unit: &Unit<R<'_>>, index: u64) -> gimli::Result<Option<String>> {
    let Some(program) = &unit.line_program else {
        return Ok(None);
    };
    let header = program.header();
    let Some(file) = header.file(index) else {
        return Ok(None);
    };
    let name = dwarf
        .attr_string(unit, file.path_name())?
        .to_string_lossy()
        .into_owned();
    if name.starts_with('/') {
        return Ok(Some(name));
    }
    let dir = match file.directory(header) {
        Some(d) => dwarf.attr_string(unit, d)?.to_string_lossy().into_owned(),
        None => String::new(),
    };
    Ok(Some(match dir.is_empty() {
        true => name,
        false => format!("{}/{name}", dir.trim_end_matches('/')),
    }))
}
