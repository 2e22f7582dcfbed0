//! What the user asks to record of a function's arguments and return value
//! (`-A PATTERN@SPEC`, `-R PATTERN@retval[/FORMAT]`), in uftrace's syntax,
//! so that its users need not learn a new one:
//!
//! ```text
//! SPEC    := ITEM [ "," ITEM ]...
//! ITEM    := "arg" N [ "/" FORMAT [ SIZE ] ] [ "%" PLACE ]
//!          | "fparg" N [ "/" SIZE ] [ "%" PLACE ]
//!          | "retval" [ "/" FORMAT [ SIZE ] ]
//! FORMAT  := d | i | u | x | o | s | c | f | p
//! SIZE    := 8 | 16 | 32 | 64          (bits; fparg: 32 or 64)
//! PLACE   := a register (rdi, ..., r15, xmm0-xmm7) | "stack+" K
//! ```
//!
//! `argN` is the N-th argument of the integer class of the SysV x86-64
//! ABI (rdi, rsi, rdx, rcx, r8, r9, then the stack); `fpargN` the N-th of
//! the vector class (xmm0-xmm7). `stack+K` is the K-th 8-byte word above
//! the return address (the first stack argument is `stack+1`). Without a
//! format an integer is shown signed (`d`) and 64 bits wide, as uftrace
//! does; `/i32` shows an `int` as the callee sees it (the upper half of its
//! register is not defined by the ABI).
//!
//! The items travel to the runtime in [`crate::settings::ARGS`] as written
//! by [`ArgSpec`]'s `Display`, and are parsed there again: one grammar,
//! here.

use std::fmt;

/// Where a value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Place {
    /// A general register, by its number in [`REGISTERS`].
    Reg(u8),
    /// A vector register `xmmN` (its low 8 bytes).
    Xmm(u8),
    /// The K-th 8-byte word above the return address (from 1).
    Stack(u16),
    /// The return value (`rax`, or `xmm0` for `f`).
    Retval,
}

/// The general registers a place may name, in the order of
/// `fntrace-runtime`'s register frame readers (`rax` is 0).
pub const REGISTERS: [&str; 16] = [
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
    "r15",
];

/// The integer argument registers of the SysV x86-64 ABI, as indexes into
/// [`REGISTERS`].
pub const INT_ARGS: [u8; 6] = [5, 4, 3, 2, 8, 9];
/// The vector argument registers (`xmm0`-`xmm7`).
pub const FP_ARGS: u8 = 8;

/// How a value is shown (and, for strings, read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `d`, `i`: signed decimal.
    Signed,
    /// `u`: unsigned decimal.
    Unsigned,
    /// `x`: hexadecimal.
    Hex,
    /// `o`: octal.
    Octal,
    /// `s`: a C string the value points to.
    Str,
    /// `S`: a C++ `std::string` (libstdc++'s) the value is the address of
    /// (a `const std::string &`, or a `std::string` passed by value, which
    /// the C++ ABI passes by address): its characters, as many as its
    /// length says.
    StdString,
    /// A string of the length at the place given (`-a` only): a Rust
    /// `&str`, whose pointer is the value and whose length the next
    /// integer argument.
    Slice(Place),
    /// `c`: a character.
    Char,
    /// `f`: a floating-point number.
    Float,
    /// `p`: a pointer (hexadecimal).
    Ptr,
    /// `b`: a `bool` (`true`, `false`; a fntrace addition to uftrace's
    /// letters, which `-a` uses).
    Bool,
    /// An enum (`-a` only): its value's name from the spec's `enums` table
    /// of this index, else the number.
    Enum(u8),
    /// A struct passed by value (`-a` only): shown `{...}`, not read.
    Aggregate,
    /// A parameter not where the ABI puts it at the entry (`-a` only,
    /// by its DWARF location): shown `?`, not read.
    Unknown,
}

impl Format {
    fn letter(self) -> char {
        match self {
            Format::Signed => 'd',
            Format::Unsigned => 'u',
            Format::Hex => 'x',
            Format::Octal => 'o',
            Format::Str => 's',
            Format::StdString => 'S',
            Format::Slice(_) => 'l',
            Format::Char => 'c',
            Format::Float => 'f',
            Format::Ptr => 'p',
            Format::Bool => 'b',
            Format::Enum(_) => 'e',
            Format::Aggregate => 'a',
            Format::Unknown => '?',
        }
    }

    fn from_letter(c: char) -> Option<Format> {
        Some(match c {
            'd' | 'i' => Format::Signed,
            'u' => Format::Unsigned,
            'x' => Format::Hex,
            'o' => Format::Octal,
            's' => Format::Str,
            'S' => Format::StdString,
            'c' => Format::Char,
            'f' => Format::Float,
            'p' => Format::Ptr,
            'b' => Format::Bool,
            _ => return None,
        })
    }
}

/// One value to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item {
    /// Where it is.
    pub place: Place,
    /// How it is shown.
    pub format: Format,
    /// Its width in bytes (1, 2, 4, 8).
    pub size: u8,
    /// How the user wrote its source (`arg2`, `fparg1`, `retval`): kept
    /// for `Display`, so that a spec survives the trip to the runtime.
    source: Source,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Arg(u16),
    FpArg(u16),
    Retval,
}

impl Item {
    /// The `n`-th argument (from 1) at `place`, shown as `format`, of
    /// `size` bytes (`-a` builds its specs with it).
    pub fn arg(n: u16, place: Place, format: Format, size: u8) -> Item {
        let source = if matches!(place, Place::Xmm(_)) || format == Format::Float {
            Source::FpArg(n)
        } else {
            Source::Arg(n)
        };
        Item {
            place,
            format,
            size,
            source,
        }
    }

    /// The return value, shown as `format`, of `size` bytes.
    pub fn retval(format: Format, size: u8) -> Item {
        Item {
            place: Place::Retval,
            format,
            size,
            source: Source::Retval,
        }
    }

    /// Whether this is the return value.
    pub fn is_retval(&self) -> bool {
        self.place == Place::Retval
    }
}

/// What to record of the functions a pattern selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgSpec {
    /// The functions (a filter pattern, as `-F` takes).
    pub pattern: String,
    /// The arguments, in order.
    pub args: Vec<Item>,
    /// The return value.
    pub retval: Option<Item>,
    /// The enums of `Format::Enum` items, by index: values and names
    /// (`-a`, from DWARF; empty for a spec parsed from text).
    pub enums: Vec<Vec<(i64, String)>>,
}

/// The most values one function records (uftrace's limit is a buffer of
/// 1 KiB; ours is on the count, with the payload bounded in
/// `crate::values`).
pub const MAX_ITEMS: usize = 16;

/// A spec that does not parse: the reason names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad argument spec '{spec}': {reason}")]
pub struct SpecError {
    /// The whole spec as given.
    pub spec: String,
    /// What is wrong, in a phrase.
    pub reason: String,
}

impl ArgSpec {
    /// Parses `PATTERN@ITEM[,ITEM]...` (`-A`, `-R`, and [`crate::settings::ARGS`]).
    pub fn parse(text: &str) -> Result<ArgSpec, SpecError> {
        let err = |reason: String| SpecError {
            spec: text.to_string(),
            reason,
        };
        let (pattern, items) = text
            .split_once('@')
            .ok_or_else(|| err("expected FUNCTION@arg1,... or FUNCTION@retval".into()))?;
        let pattern = pattern.trim();
        if pattern.is_empty() {
            return Err(err("no function before '@'".into()));
        }
        let mut spec = ArgSpec {
            pattern: pattern.to_string(),
            args: Vec::new(),
            retval: None,
            enums: Vec::new(),
        };
        for item in items.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(err("an empty item".into()));
            }
            let parsed = parse_item(item).map_err(|r| err(format!("'{item}': {r}")))?;
            if parsed.is_retval() {
                spec.retval = Some(parsed);
            } else {
                spec.args.push(parsed);
            }
        }
        if spec.args.len() > MAX_ITEMS {
            return Err(err(format!("more than {MAX_ITEMS} arguments")));
        }
        Ok(spec)
    }

    /// This spec with `other`'s items added (two `-A` for one pattern, or
    /// an `-A` and an `-R`): its arguments after these, its return value
    /// if it has one.
    pub fn merge(&mut self, other: &ArgSpec) {
        self.args.extend(other.args.iter().copied());
        self.args.truncate(MAX_ITEMS);
        if other.retval.is_some() {
            self.retval = other.retval;
        }
    }
}

fn parse_item(item: &str) -> Result<Item, String> {
    let (head, place) = match item.split_once('%') {
        Some((h, p)) => (h, Some(p)),
        None => (item, None),
    };
    let (name, format) = match head.split_once('/') {
        Some((n, f)) => (n, Some(f)),
        None => (head, None),
    };
    let index = |digits: &str, what: &str| -> Result<u16, String> {
        let n: u16 = digits
            .parse()
            .map_err(|_| format!("expected a number after '{what}'"))?;
        if n == 0 {
            return Err(format!("arguments count from 1 ({what}1 is the first)"));
        }
        Ok(n)
    };
    let (source, fp) = if let Some(d) = name.strip_prefix("fparg") {
        (Source::FpArg(index(d, "fparg")?), true)
    } else if let Some(d) = name.strip_prefix("arg") {
        (Source::Arg(index(d, "arg")?), false)
    } else if name == "retval" {
        (Source::Retval, false)
    } else {
        return Err(format!("unknown value '{name}' (argN, fpargN, retval)"));
    };
    let (format, size) = match (format, fp) {
        (None, false) => (Format::Signed, 8),
        (None, true) => (Format::Float, 8),
        (Some(f), true) => match f {
            "32" => (Format::Float, 4),
            "64" => (Format::Float, 8),
            _ => return Err(format!("fparg takes a size of 32 or 64 bits, not '{f}'")),
        },
        (Some(f), false) => parse_format(f)?,
    };
    let place = match (place, source) {
        (Some(_), Source::Retval) => return Err("a return value has no place to give".into()),
        (Some(p), _) => parse_place(p)?,
        (None, Source::Retval) => Place::Retval,
        (None, Source::Arg(n)) => match INT_ARGS.get(usize::from(n) - 1) {
            Some(&r) => Place::Reg(r),
            None => Place::Stack(n - INT_ARGS.len() as u16),
        },
        (None, Source::FpArg(n)) if n <= u16::from(FP_ARGS) => Place::Xmm((n - 1) as u8),
        (None, Source::FpArg(n)) => {
            return Err(format!(
                "fparg{n} is not in a register: give its place (fparg{n}%stack+K)"
            ))
        }
    };
    Ok(Item {
        place,
        format,
        size,
        source,
    })
}

fn parse_format(f: &str) -> Result<(Format, u8), String> {
    let mut chars = f.chars();
    let letter = chars.next().ok_or("no format after '/'")?;
    let format = Format::from_letter(letter)
        .ok_or_else(|| format!("unknown format '{letter}' (d i u x o s S c f p b)"))?;
    let bits = chars.as_str();
    let size = match bits {
        "" => match format {
            Format::Char | Format::Bool => 1,
            _ => 8,
        },
        "8" => 1,
        "16" => 2,
        "32" => 4,
        "64" => 8,
        _ => return Err(format!("unknown size '{bits}' (8, 16, 32, 64)")),
    };
    match (format, size) {
        (Format::Float, 4 | 8) | (Format::Str | Format::StdString | Format::Ptr, 8) => Ok((format, size)),
        (Format::Float, _) => Err("a float is 32 or 64 bits".into()),
        (Format::Str | Format::StdString | Format::Ptr, _) => Err("a pointer is 64 bits".into()),
        _ => Ok((format, size)),
    }
}

fn parse_place(p: &str) -> Result<Place, String> {
    if let Some(k) = p.strip_prefix("stack") {
        let k = k.strip_prefix('+').unwrap_or(k);
        let k: u16 = k.parse().map_err(|_| format!("expected stack+K, not '{p}'"))?;
        if k == 0 {
            return Err("stack+0 is the return address; the first argument word is stack+1".into());
        }
        return Ok(Place::Stack(k));
    }
    if let Some(n) = p.strip_prefix("xmm") {
        if let Ok(n) = n.parse::<u8>() {
            if n < FP_ARGS {
                return Ok(Place::Xmm(n));
            }
        }
    }
    match REGISTERS.iter().position(|r| *r == p) {
        Some(7) => Err("rsp is not an argument's place (use stack+K)".into()),
        Some(i) => Ok(Place::Reg(i as u8)),
        None => Err(format!("unknown register '{p}'")),
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            Source::Arg(n) => write!(f, "arg{n}")?,
            Source::FpArg(n) => write!(f, "fparg{n}")?,
            Source::Retval => write!(f, "retval")?,
        }
        match self.source {
            Source::FpArg(_) => write!(f, "/{}", u32::from(self.size) * 8)?,
            _ => write!(f, "/{}{}", self.format.letter(), u32::from(self.size) * 8)?,
        }
        match self.place {
            Place::Reg(r) => write!(f, "%{}", REGISTERS[usize::from(r)]),
            Place::Xmm(n) => write!(f, "%xmm{n}"),
            Place::Stack(k) => write!(f, "%stack+{k}"),
            Place::Retval => Ok(()),
        }
    }
}

impl fmt::Display for ArgSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@", self.pattern)?;
        let mut first = true;
        for item in self.args.iter().chain(&self.retval) {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
