//! What a function takes and returns, from DWARF (`fntrace record -a`):
//! for every function with code (`DW_AT_low_pc`), its parameters' types
//! and its return type, reduced to what a tracer can show — integers of
//! their width and sign, `bool`, characters, floating point, pointers,
//! C strings, enums (with their names), and aggregates (shown, not read).
//!
//! Types are followed through typedefs and qualifiers; a function given by
//! an abstract instance (inlined elsewhere, or declared in a class) takes
//! its name, parameters and return type from there. A function marked
//! `DW_CC_nocall` (no longer called by the standard convention) is left
//! out, and each parameter says where its location puts it at the entry
//! ([`AtEntry`]), so that a compiler's change to the convention is not
//! taken for the declaration. Malformed DWARF gives
//! an error or leaves the function out, never a panic.

use std::borrow::Cow;
use std::collections::HashMap;

use gimli::{AttributeValue, DebuggingInformationEntry, Dwarf, EndianSlice, RunTimeEndian, Unit, UnitOffset};
use object::{Object, ObjectSection};

use crate::error::{Error, Result};

/// A type as a tracer shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    /// An integer of `size` bytes.
    Int {
        /// Bytes (1, 2, 4, 8; 16 for `__int128`).
        size: u8,
        /// Signed.
        signed: bool,
    },
    /// `bool`.
    Bool,
    /// `char` (of either sign).
    Char,
    /// `float` (4), `double` (8), `long double` (16).
    Float {
        /// Bytes.
        size: u8,
    },
    /// A pointer (or a C++ reference).
    Pointer,
    /// A pointer to `char`: a C string.
    CString,
    /// An enum: its width, and its enumerators' values and names.
    Enum {
        /// Bytes.
        size: u8,
        /// Its values, with their names.
        values: Vec<(i64, String)>,
    },
    /// A Rust `&str`: a pointer and a length, passed as two integer
    /// arguments.
    StrSlice,
    /// The address of a C++ `std::string` (libstdc++'s: a pointer, then
    /// the length): a reference to one, or one passed by value (which the
    /// C++ ABI passes by address).
    StdString,
    /// A class passed by value that the C++ ABI passes by address (not
    /// trivially copyable: `DW_CC_pass_by_reference`).
    ByAddress,
    /// A struct, union or class passed by value, of `size` bytes.
    Aggregate {
        /// Bytes.
        size: u64,
    },
    /// Anything else (vectors, `_Complex`, unknown encodings).
    Unknown,
}

/// Where DWARF says a parameter is when the function is entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtEntry {
    /// Nothing says otherwise (a location in the frame, as `-O0` builds
    /// have, or a single expression): where the ABI puts it.
    Abi,
    /// In this DWARF register (0-15 the general registers, 17-32 the
    /// vector ones): its location list at the entry address.
    Reg(u16),
    /// In these two, 8 bytes each (a Rust `&str`'s pointer and length).
    Pair(u16, u16),
    /// In memory, at the address this register holds (`DW_OP_bregN 0`
    /// in a location list: a struct passed by its address).
    At(u16),
    /// Not in a register at the entry: optimised out, a constant the
    /// compiler propagated into the function (the caller may not pass it
    /// at all), or no location there.
    Unknown,
}

/// A function's parameters and return type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Its address in the file (`DW_AT_low_pc`).
    pub address: u64,
    /// Its name (`DW_AT_name`, or the linkage name).
    pub name: String,
    /// Its parameters, in order (`this` first for a member function).
    pub params: Vec<Type>,
    /// Where each parameter is at the entry, by DWARF (as `params`).
    pub at_entry: Vec<AtEntry>,
    /// Its return type (`None`: `void`).
    pub ret: Option<Type>,
}

pub(crate) type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// The parameters of every function with code in the ELF file `data`
/// (none if it has no `.debug_info`).
pub fn parameters(data: &[u8]) -> Result<Vec<Params>> {
    let mut out = each_unit(data, functions_of)?;
    out.sort_by_key(|p| p.address);
    out.dedup_by_key(|p| p.address);
    Ok(out)
}

/// What `f` adds of each unit of the DWARF of the ELF file `data`.
pub(crate) fn each_unit<T>(
    data: &[u8],
    mut f: impl FnMut(&Dwarf<R<'_>>, &Unit<R<'_>>, &mut Vec<T>) -> gimli::Result<()>,
) -> Result<Vec<T>> {
    with_dwarf(data, |dwarf| {
        let mut out = Vec::new();
        let mut units = dwarf.units();
        while let Some(header) = units.next()? {
            let unit = dwarf.unit(header)?;
            f(dwarf, &unit, &mut out)?;
        }
        Ok(out)
    })
}

/// Calls `f` with each subprogram of `unit` that has code, and the
/// address it is entered at.
pub(crate) fn each_function(
    dwarf: &Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    mut f: impl FnMut(&DebuggingInformationEntry<'_, '_, R<'_>>, u64) -> gimli::Result<()>,
) -> gimli::Result<()> {
    let mut entries = unit.entries();
    while let Some((_, entry)) = entries.next_dfs()? {
        if entry.tag() != gimli::DW_TAG_subprogram {
            continue;
        }
        if let Some(address) = entry_address(dwarf, unit, entry)? {
            f(entry, address)?;
        }
    }
    Ok(())
}

/// Runs `f` on the DWARF of the ELF file `data` (empty sections where it
/// has none).
fn with_dwarf<T>(data: &[u8], f: impl FnOnce(&Dwarf<R<'_>>) -> gimli::Result<T>) -> Result<T> {
    let file = object::File::parse(data).map_err(|e| Error::Malformed(format!("not an ELF file: {e}")))?;
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let mut sections: HashMap<&'static str, Cow<'_, [u8]>> = HashMap::new();
    let load = |id: gimli::SectionId| -> std::result::Result<Cow<'_, [u8]>, gimli::Error> {
        Ok(match file.section_by_name(id.name()) {
            Some(s) => s.uncompressed_data().unwrap_or(Cow::Borrowed(&[])),
            None => Cow::Borrowed(&[]),
        })
    };
    for id in [
        gimli::SectionId::DebugAbbrev,
        gimli::SectionId::DebugInfo,
        gimli::SectionId::DebugStr,
        gimli::SectionId::DebugLineStr,
        gimli::SectionId::DebugStrOffsets,
        gimli::SectionId::DebugAddr,
        gimli::SectionId::DebugRanges,
        gimli::SectionId::DebugRngLists,
        gimli::SectionId::DebugLine,
        gimli::SectionId::DebugLoc,
        gimli::SectionId::DebugLocLists,
        gimli::SectionId::DebugTypes,
        gimli::SectionId::DebugAranges,
    ] {
        sections.insert(id.name(), load(id).unwrap_or(Cow::Borrowed(&[])));
    }
    let dwarf = Dwarf::load(|id| -> std::result::Result<R<'_>, gimli::Error> {
        let bytes: &[u8] = sections.get(id.name()).map_or(&[], |c| c.as_ref());
        Ok(EndianSlice::new(bytes, endian))
    })
    .map_err(dwarf_error)?;
    f(&dwarf).map_err(dwarf_error)
}

/// The address a subprogram is entered at: its `DW_AT_low_pc`, or the
/// start of the first of its `DW_AT_ranges` (gcc's hot and `.cold` parts);
/// none for one without code.
fn entry_address(
    dwarf: &Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    entry: &DebuggingInformationEntry<'_, '_, R<'_>>,
) -> gimli::Result<Option<u64>> {
    let address = match entry.attr_value(gimli::DW_AT_low_pc)? {
        Some(low) => dwarf.attr_address(unit, low)?,
        None if entry.attr_value(gimli::DW_AT_ranges)?.is_some() => {
            dwarf.die_ranges(unit, entry)?.next()?.map(|r| r.begin)
        }
        None => None,
    };
    Ok(address.filter(|&a| a != 0))
}

fn dwarf_error(e: gimli::Error) -> Error {
    Error::Malformed(format!("DWARF: {e}"))
}

/// The functions with code of one unit.
fn functions_of(dwarf: &Dwarf<R<'_>>, unit: &Unit<R<'_>>, out: &mut Vec<Params>) -> gimli::Result<()> {
    let mut entries = unit.entries();
    // Rust's own ABI passes and returns a struct larger than 16 bytes by
    // its address (C's passes it on the stack).
    let rust = match entries.next_dfs()? {
        Some((_, root)) => matches!(
            root.attr_value(gimli::DW_AT_language)?,
            Some(AttributeValue::Language(gimli::DW_LANG_Rust))
        ),
        None => false,
    };
    let by_rust = |t: Type| match t {
        Type::Aggregate { size } if rust && size > 16 => Type::ByAddress,
        t => t,
    };
    each_function(dwarf, unit, |entry, address| {
        // A function the compiler no longer calls by the standard
        // convention (LLVM marks so an internal function whose arguments
        // or return value it removed or made constant): its declaration
        // says nothing of its registers.
        if let Some(AttributeValue::CallingConvention(gimli::DW_CC_nocall)) =
            entry.attr_value(gimli::DW_AT_calling_convention)?
        {
            return Ok(());
        }
        let name = name_of(dwarf, unit, entry, 0)?.unwrap_or_default();
        let ret = match type_of(unit, entry, 0)? {
            Some(t) => resolve(dwarf, unit, t, 0)?,
            None => None,
        };
        let (params, at_entry) = params_of(dwarf, unit, entry.offset(), address)?;
        out.push(Params {
            address,
            name,
            params: params.into_iter().map(by_rust).collect(),
            at_entry,
            ret: ret.map(by_rust),
        });
        Ok(())
    })
}

/// Where an entry's information may be instead: its abstract origin or
/// its specification (in the same unit).
fn origin(entry: &DebuggingInformationEntry<'_, '_, R<'_>>) -> gimli::Result<Option<UnitOffset>> {
    for at in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
        if let Some(AttributeValue::UnitRef(o)) = entry.attr_value(at)? {
            return Ok(Some(o));
        }
    }
    Ok(None)
}

fn name_of(
    dwarf: &Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    entry: &DebuggingInformationEntry<'_, '_, R<'_>>,
    depth: u32,
) -> gimli::Result<Option<String>> {
    if let Some(v) = entry.attr_value(gimli::DW_AT_name)? {
        let s = dwarf.attr_string(unit, v)?;
        return Ok(Some(s.to_string_lossy().into_owned()));
    }
    match origin(entry)? {
        Some(o) if depth < 8 => name_of(dwarf, unit, &unit.entry(o)?, depth + 1),
        _ => Ok(None),
    }
}

/// An entry's `DW_AT_type`, or its origin's.
fn type_of(
    unit: &Unit<R<'_>>,
    entry: &DebuggingInformationEntry<'_, '_, R<'_>>,
    depth: u32,
) -> gimli::Result<Option<UnitOffset>> {
    if let Some(AttributeValue::UnitRef(t)) = entry.attr_value(gimli::DW_AT_type)? {
        return Ok(Some(t));
    }
    match origin(entry)? {
        Some(o) if depth < 8 => type_of(unit, &unit.entry(o)?, depth + 1),
        _ => Ok(None),
    }
}

/// The formal parameters of the subprogram at `at` (or, if it has none
/// listed, of its origin), and where each is at `entry`.
fn params_of(
    dwarf: &Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    at: UnitOffset,
    entry: u64,
) -> gimli::Result<(Vec<Type>, Vec<AtEntry>)> {
    let mut tree = unit.entries_tree(Some(at))?;
    let root = tree.root()?;
    let origin = origin(root.entry())?;
    let (mut out, mut places) = (Vec::new(), Vec::new());
    let mut children = root.children();
    let mut listed = false;
    while let Some(child) = children.next()? {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_formal_parameter {
            continue;
        }
        listed = true;
        let t = match type_of(unit, e, 0)? {
            Some(t) => resolve(dwarf, unit, t, 0)?.unwrap_or(Type::Unknown),
            None => Type::Unknown,
        };
        out.push(t);
        places.push(at_entry(dwarf, unit, e, entry).unwrap_or(AtEntry::Abi));
    }
    match origin {
        Some(o) if !listed => params_of(dwarf, unit, o, entry),
        _ => Ok((out, places)),
    }
}

/// Where a parameter is at the function's entry `pc`, by its location.
fn at_entry(
    dwarf: &Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    param: &DebuggingInformationEntry<'_, '_, R<'_>>,
    pc: u64,
) -> gimli::Result<AtEntry> {
    let Some(location) = param.attr_value(gimli::DW_AT_location)? else {
        // No location at all: optimised out. Its register at the entry
        // is what the caller passed, if the caller passes it.
        return Ok(if param.attr_value(gimli::DW_AT_const_value)?.is_some() {
            AtEntry::Unknown
        } else {
            AtEntry::Abi
        });
    };
    let Some(mut list) = dwarf.attr_locations(unit, location)? else {
        // A single expression, for the whole function: a register, or
        // memory (a frame slot at -O0: written by the prologue, not a
        // statement about the entry); anything else (a constant) is not
        // where the caller put it.
        let AttributeValue::Exprloc(expr) = location else {
            return Ok(AtEntry::Abi);
        };
        if let Some(place) = registers_of(expr, unit.encoding()) {
            return Ok(place);
        }
        let first = expr.operations(unit.encoding()).next().ok().flatten();
        return Ok(match first {
            Some(
                gimli::Operation::FrameOffset { .. }
                | gimli::Operation::RegisterOffset { .. }
                | gimli::Operation::Address { .. }
                | gimli::Operation::Call { .. },
            ) => AtEntry::Abi,
            _ => AtEntry::Unknown,
        });
    };
    let mut first = None;
    while let Some(item) = list.next()? {
        let place = registers_of(item.data, unit.encoding());
        first.get_or_insert(place);
        if item.range.begin <= pc && pc < item.range.end {
            return Ok(place.unwrap_or(AtEntry::Unknown));
        }
    }
    // No entry covers the entry address: the first says where it starts.
    Ok(first.flatten().unwrap_or(AtEntry::Unknown))
}

/// The register a location expression names ([`register_of`]); the two
/// registers of a value in two 8-byte pieces (`DW_OP_regX DW_OP_piece 8
/// DW_OP_regY DW_OP_piece 8`: a Rust `&str` in registers); or the register
/// holding the address of a value in memory (`DW_OP_bregN 0`).
fn registers_of(expr: gimli::Expression<R<'_>>, encoding: gimli::Encoding) -> Option<AtEntry> {
    use gimli::Operation::{Piece, Register, RegisterOffset};
    if let Some(r) = register_of(expr, encoding) {
        return Some(AtEntry::Reg(r));
    }
    // No form of interest has more than four operations.
    let mut ops = Vec::with_capacity(4);
    let mut iter = expr.operations(encoding);
    while let Some(op) = iter.next().ok()? {
        if ops.len() == 4 {
            return None;
        }
        ops.push(op);
    }
    let piece = |op: &gimli::Operation<R<'_>>| {
        matches!(
            op,
            Piece {
                size_in_bits: 64,
                bit_offset: None
            }
        )
    };
    match ops.as_slice() {
        [RegisterOffset {
            register,
            offset: 0,
            base_type,
        }] if base_type.0 == 0 => Some(AtEntry::At(register.0)),
        [Register { register: a }, p, Register { register: b }, q] if piece(p) && piece(q) => {
            Some(AtEntry::Pair(a.0, b.0))
        }
        _ => None,
    }
}

/// The register a location expression names (`DW_OP_regN`, or the entry
/// value of one), if that is all it is.
fn register_of(expr: gimli::Expression<R<'_>>, encoding: gimli::Encoding) -> Option<u16> {
    let mut ops = expr.operations(encoding);
    let op = ops.next().ok()??;
    if ops.next().ok()?.is_some() {
        return None;
    }
    match op {
        gimli::Operation::Register { register } => Some(register.0),
        gimli::Operation::EntryValue { expression } => register_of(gimli::Expression(expression), encoding),
        _ => None,
    }
}

/// The type at `t`, through typedefs and qualifiers (`None`: `void`).
fn resolve(
    dwarf: &Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    t: UnitOffset,
    depth: u32,
) -> gimli::Result<Option<Type>> {
    if depth > 16 {
        return Ok(Some(Type::Unknown));
    }
    let e = unit.entry(t)?;
    let size = match e.attr_value(gimli::DW_AT_byte_size)? {
        Some(v) => v.udata_value().unwrap_or(0),
        None => 0,
    };
    let inner = |e: &DebuggingInformationEntry<'_, '_, R<'_>>| -> gimli::Result<Option<UnitOffset>> {
        Ok(match e.attr_value(gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(o)) => Some(o),
            _ => None,
        })
    };
    Ok(Some(match e.tag() {
        gimli::DW_TAG_typedef
        | gimli::DW_TAG_const_type
        | gimli::DW_TAG_volatile_type
        | gimli::DW_TAG_restrict_type
        | gimli::DW_TAG_atomic_type => {
            return match inner(&e)? {
                Some(o) => resolve(dwarf, unit, o, depth + 1),
                None => Ok(None),
            }
        }
        gimli::DW_TAG_base_type => {
            let enc = match e.attr_value(gimli::DW_AT_encoding)? {
                Some(AttributeValue::Encoding(enc)) => enc,
                _ => return Ok(Some(Type::Unknown)),
            };
            match enc {
                gimli::DW_ATE_boolean => Type::Bool,
                // `char` itself; `signed char` and `unsigned char` (int8_t,
                // uint8_t) are numbers.
                gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char
                    if size == 1 && is_char(dwarf, unit, &e)? =>
                {
                    Type::Char
                }
                gimli::DW_ATE_signed | gimli::DW_ATE_signed_char => Type::Int {
                    size: size as u8,
                    signed: true,
                },
                gimli::DW_ATE_unsigned | gimli::DW_ATE_unsigned_char | gimli::DW_ATE_UTF => Type::Int {
                    size: size as u8,
                    signed: false,
                },
                gimli::DW_ATE_float => Type::Float { size: size as u8 },
                _ => Type::Unknown,
            }
        }
        gimli::DW_TAG_pointer_type => match inner(&e)? {
            Some(o) if points_to_char(dwarf, unit, o, 0)? => Type::CString,
            _ => Type::Pointer,
        },
        gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type => match inner(&e)? {
            Some(o) if resolve(dwarf, unit, o, depth + 1)? == Some(Type::StdString) => Type::StdString,
            _ => Type::Pointer,
        },
        gimli::DW_TAG_enumeration_type => {
            let mut values = Vec::new();
            let mut tree = unit.entries_tree(Some(t))?;
            let root = tree.root()?;
            let mut children = root.children();
            while let Some(child) = children.next()? {
                let c = child.entry();
                if c.tag() != gimli::DW_TAG_enumerator {
                    continue;
                }
                let value = match c.attr_value(gimli::DW_AT_const_value)? {
                    Some(AttributeValue::Sdata(v)) => v,
                    Some(AttributeValue::Udata(v)) => v as i64,
                    Some(v) => v.sdata_value().unwrap_or(0),
                    None => continue,
                };
                if let Some(n) = c.attr_value(gimli::DW_AT_name)? {
                    let n = dwarf.attr_string(unit, n)?.to_string_lossy().into_owned();
                    values.push((value, n));
                }
            }
            Type::Enum {
                size: if size == 0 { 4 } else { size as u8 },
                values,
            }
        }
        gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type | gimli::DW_TAG_class_type => {
            let name = match e.attr_value(gimli::DW_AT_name)? {
                Some(v) => dwarf.attr_string(unit, v)?.to_string_lossy().into_owned(),
                None => String::new(),
            };
            if size == 16 && (name == "&str" || name == "&mut str") {
                Type::StrSlice
            } else if name.starts_with("basic_string<char,")
                && member_at(dwarf, unit, t, "_M_string_length")? == Some(8)
            {
                Type::StdString
            } else if matches!(
                e.attr_value(gimli::DW_AT_calling_convention)?,
                Some(AttributeValue::CallingConvention(gimli::DW_CC_pass_by_reference))
            ) {
                Type::ByAddress
            } else {
                Type::Aggregate { size }
            }
        }
        _ => Type::Unknown,
    }))
}

/// The offset of the data member `name` of the struct or class at `t`.
fn member_at(
    dwarf: &Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    t: UnitOffset,
    name: &str,
) -> gimli::Result<Option<u64>> {
    let mut tree = unit.entries_tree(Some(t))?;
    let root = tree.root()?;
    let mut children = root.children();
    while let Some(child) = children.next()? {
        let c = child.entry();
        if c.tag() != gimli::DW_TAG_member {
            continue;
        }
        let Some(n) = c.attr_value(gimli::DW_AT_name)? else {
            continue;
        };
        if dwarf.attr_string(unit, n)?.slice() == name.as_bytes() {
            return Ok(c
                .attr_value(gimli::DW_AT_data_member_location)?
                .and_then(|v| v.udata_value()));
        }
    }
    Ok(None)
}

/// Whether a base type is named `char`.
fn is_char(
    dwarf: &Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    e: &DebuggingInformationEntry<'_, '_, R<'_>>,
) -> gimli::Result<bool> {
    Ok(match e.attr_value(gimli::DW_AT_name)? {
        Some(v) => dwarf.attr_string(unit, v)?.slice() == b"char",
        None => false,
    })
}

/// Whether the type at `t` is `char` (through qualifiers and typedefs).
fn points_to_char(
    dwarf: &Dwarf<R<'_>>,
    unit: &Unit<R<'_>>,
    t: UnitOffset,
    depth: u32,
) -> gimli::Result<bool> {
    if depth > 16 {
        return Ok(false);
    }
    let e = unit.entry(t)?;
    match e.tag() {
        gimli::DW_TAG_typedef
        | gimli::DW_TAG_const_type
        | gimli::DW_TAG_volatile_type
        | gimli::DW_TAG_restrict_type => match e.attr_value(gimli::DW_AT_type)? {
            Some(AttributeValue::UnitRef(o)) => points_to_char(dwarf, unit, o, depth + 1),
            _ => Ok(false),
        },
        gimli::DW_TAG_base_type => {
            let size = e
                .attr_value(gimli::DW_AT_byte_size)?
                .and_then(|v| v.udata_value());
            let enc = e.attr_value(gimli::DW_AT_encoding)?;
            Ok(size == Some(1)
                && matches!(
                    enc,
                    Some(AttributeValue::Encoding(
                        gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char
                    ))
                )
                && is_char(dwarf, unit, &e)?)
        }
        _ => Ok(false),
    }
}
