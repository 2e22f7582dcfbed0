//! The recorded values of a call (its arguments, or its return value): the
//! payload of a `DATA` event (`docs/FORMAT.md`, "Arguments and return
//! values"), written by the runtime without allocating ([`Writer`]) and
//! read back as [`Value`]s.
//!
//! The payload is a sequence of values, each a tag byte and its bytes,
//! padded with zero bytes to whole 8-byte words (a zero tag ends it). The
//! tag's low four bits say what the value is ([`KIND_SIGNED`], ...), its
//! high bits the base-2 logarithm of an integer's width: `int` takes one
//! tag byte and four bytes, not a word. Strings are a length byte and that
//! many bytes.

use std::fmt;

/// A signed integer (`d`, `i`).
pub const KIND_SIGNED: u8 = 1;
/// An unsigned integer (`u`).
pub const KIND_UNSIGNED: u8 = 2;
/// An integer shown in hexadecimal (`x`).
pub const KIND_HEX: u8 = 3;
/// An integer shown in octal (`o`).
pub const KIND_OCTAL: u8 = 4;
/// A character (`c`).
pub const KIND_CHAR: u8 = 5;
/// A `float` (4 bytes) or `double` (8 bytes).
pub const KIND_FLOAT: u8 = 6;
/// A pointer (`p`).
pub const KIND_PTR: u8 = 7;
/// A string read whole: a length byte, then its bytes.
pub const KIND_STR: u8 = 8;
/// A string cut at [`MAX_STRING`] bytes (or where the payload ended).
pub const KIND_STR_CUT: u8 = 9;
/// A string pointer that could not be read (8 bytes: the pointer; 0 is
/// `NULL`).
pub const KIND_UNREADABLE: u8 = 10;
/// A `bool` (shown `true`, `false`, or the number if neither).
pub const KIND_BOOL: u8 = 11;
/// A name shown as it is (an enum's value): a length byte, then its bytes.
pub const KIND_NAME: u8 = 12;
/// A value passed by value that is not read (a struct): shown `{...}`; one
/// byte, its size in words (0: larger).
pub const KIND_AGGREGATE: u8 = 13;
/// A value that is not where it could be read (`-a`: DWARF says the
/// parameter is not in a register at the entry): shown `?`; one byte, 0.
pub const KIND_UNKNOWN: u8 = 14;

/// The most bytes of one payload (uftrace keeps 1 KiB of arguments per
/// call too).
pub const MAX_PAYLOAD: usize = 1024;
/// The most bytes of one string kept.
pub const MAX_STRING: usize = 128;

/// The tag byte of a value of `kind` and `size` bytes (1, 2, 4; anything
/// else is 8): the kind in the low four bits, the width's base-2
/// logarithm above.
pub const fn tag(kind: u8, size: u8) -> u8 {
    let log = match size {
        1 => 0,
        2 => 1,
        4 => 2,
        _ => 3,
    };
    kind | log << 4
}

/// Writes values into a caller's buffer, never past its end: a value that
/// does not fit is left out (a string is cut first).
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Writer<'a> {
    /// A writer filling `buf` (at most [`MAX_PAYLOAD`] bytes of it).
    pub fn new(buf: &'a mut [u8]) -> Writer<'a> {
        let end = buf.len().min(MAX_PAYLOAD);
        Writer {
            buf: &mut buf[..end],
            len: 0,
        }
    }

    fn put(&mut self, tag: u8, bytes: &[u8]) -> bool {
        let end = self.len + 1 + bytes.len();
        if end > self.buf.len() {
            return false;
        }
        self.buf[self.len] = tag;
        self.buf[self.len + 1..end].copy_from_slice(bytes);
        self.len = end;
        true
    }

    /// An integer of `size` bytes (1, 2, 4 or 8; its low bytes of `raw`)
    /// of this kind (`KIND_SIGNED` ... `KIND_PTR`, or `KIND_FLOAT` with 4
    /// or 8).
    pub fn scalar(&mut self, kind: u8, size: u8, raw: u64) -> bool {
        let tag = tag(kind, size);
        let n = 1usize << (tag >> 4);
        self.put(tag, &raw.to_le_bytes()[..n])
    }

    /// A string's bytes (before its terminator), `cut` if it went on.
    pub fn string(&mut self, bytes: &[u8], cut: bool) -> bool {
        let room = self.buf.len().saturating_sub(self.len + 2);
        let keep = bytes.len().min(MAX_STRING).min(room);
        let cut = cut || keep < bytes.len();
        let end = self.len + 2 + keep;
        if end > self.buf.len() {
            return false;
        }
        self.buf[self.len] = if cut { KIND_STR_CUT } else { KIND_STR };
        self.buf[self.len + 1] = keep as u8;
        self.buf[self.len + 2..end].copy_from_slice(&bytes[..keep]);
        self.len = end;
        true
    }

    /// A name (an enum value's), shown as it is.
    pub fn name(&mut self, name: &[u8]) -> bool {
        let keep = name.len().min(MAX_STRING);
        let end = self.len + 2 + keep;
        if end > self.buf.len() {
            return false;
        }
        self.buf[self.len] = KIND_NAME;
        self.buf[self.len + 1] = keep as u8;
        self.buf[self.len + 2..end].copy_from_slice(&name[..keep]);
        self.len = end;
        true
    }

    /// A string pointer that could not be read.
    pub fn unreadable(&mut self, ptr: u64) -> bool {
        self.scalar(KIND_UNREADABLE, 8, ptr)
    }

    /// Bytes written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whole words the payload takes (zero bytes pad the last).
    pub fn words(&self) -> usize {
        self.len.div_ceil(8)
    }
}

/// A recorded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `d`, `i`.
    Signed(i64),
    /// `u`.
    Unsigned(u64),
    /// `x`.
    Hex(u64),
    /// `o`.
    Octal(u64),
    /// `c`.
    Char(u8),
    /// A `float`.
    F32(f32),
    /// A `double`.
    F64(f64),
    /// `p`.
    Ptr(u64),
    /// `s`: the bytes, and whether the string went on past them.
    Str(Vec<u8>, bool),
    /// `s` whose pointer could not be read (0: `NULL`).
    Unreadable(u64),
    /// A `bool`.
    Bool(u8),
    /// A name (an enum's value).
    Name(String),
    /// A struct passed by value, not read.
    Aggregate,
    /// A value not where it could be read.
    Unknown,
    /// A payload that does not decode: why.
    Damaged(String),
}

/// Reads the values of a payload (`words`, as the `DATA` event carries
/// them); `Err` with a reason at the first malformed one.
pub fn decode(words: &[u64]) -> Result<Vec<Value>, String> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() && bytes[at] != 0 {
        let tag = bytes[at];
        let kind = tag & 15;
        at += 1;
        let take = |at: usize, n: usize| -> Result<&[u8], String> {
            bytes
                .get(at..at + n)
                .ok_or_else(|| format!("value of tag {tag:#x} cut at byte {at}"))
        };
        match kind {
            KIND_NAME => {
                let n = usize::from(*take(at, 1)?.first().unwrap_or(&0));
                let s = take(at + 1, n)?;
                at += 1 + n;
                out.push(Value::Name(String::from_utf8_lossy(s).into_owned()));
            }
            KIND_STR | KIND_STR_CUT => {
                let n = usize::from(*take(at, 1)?.first().unwrap_or(&0));
                let s = take(at + 1, n)?.to_vec();
                at += 1 + n;
                out.push(Value::Str(s, kind == KIND_STR_CUT));
            }
            KIND_SIGNED..=KIND_UNREADABLE | KIND_BOOL | KIND_AGGREGATE | KIND_UNKNOWN => {
                let n = 1usize << (tag >> 4).min(3);
                let mut raw = [0u8; 8];
                raw[..n].copy_from_slice(take(at, n)?);
                at += n;
                let u = u64::from_le_bytes(raw);
                let shift = 64 - 8 * n as u32;
                out.push(match kind {
                    KIND_SIGNED => Value::Signed(((u << shift) as i64) >> shift),
                    KIND_UNSIGNED => Value::Unsigned(u),
                    KIND_HEX => Value::Hex(u),
                    KIND_OCTAL => Value::Octal(u),
                    KIND_CHAR => Value::Char(u as u8),
                    KIND_FLOAT if n == 4 => Value::F32(f32::from_bits(u as u32)),
                    KIND_FLOAT => Value::F64(f64::from_bits(u)),
                    KIND_PTR => Value::Ptr(u),
                    KIND_BOOL => Value::Bool(u as u8),
                    KIND_AGGREGATE => Value::Aggregate,
                    KIND_UNKNOWN => Value::Unknown,
                    _ => Value::Unreadable(u),
                });
            }
            _ => return Err(format!("unknown value tag {tag:#x} at byte {}", at - 1)),
        }
    }
    Ok(out)
}

/// The most values of a register payload ([`decode_registers`]).
pub const MAX_REGISTERS: usize = 6;

/// The descriptor word of a register payload: byte `i` is the tag of value
/// `i` (as [`Writer::scalar`] writes it: kind and width; integer kinds
/// only), byte 7 their count.
pub fn register_descriptor(tags: &[u8]) -> Option<u64> {
    if tags.is_empty() || tags.len() > MAX_REGISTERS {
        return None;
    }
    let mut d = (tags.len() as u64) << 56;
    for (i, &t) in tags.iter().enumerate() {
        if !matches!(t & 15, KIND_SIGNED..=KIND_CHAR | KIND_PTR | KIND_BOOL) {
            return None;
        }
        d |= u64::from(t) << (8 * i);
    }
    Some(d)
}

/// Reads a register payload (`event::DATA_REGISTERS`): its descriptor
/// word, then one whole register per value, shown by the descriptor's
/// tags. Words missing at the end (a payload cut short) read as 0.
pub fn decode_registers(words: &[u64]) -> Result<Vec<Value>, String> {
    let Some(&d) = words.first() else {
        return Ok(Vec::new());
    };
    if d == 0 {
        // The descriptor is written last: a signal came between the
        // event and it, and the thread never wrote it.
        return Err("not written (a signal handler came in between)".into());
    }
    let count = ((d >> 56) as usize).min(MAX_REGISTERS);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let tag = (d >> (8 * i)) as u8;
        let n = 1usize << (tag >> 4).min(3);
        let raw = words.get(1 + i).copied().unwrap_or(0).to_le_bytes();
        let mut bytes = vec![tag];
        bytes.extend_from_slice(&raw[..n]);
        bytes.resize(bytes.len().next_multiple_of(8), 0);
        let packed: Vec<u64> = bytes
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        out.extend(decode(&packed)?);
    }
    Ok(out)
}

/// Writes `bytes` as the inside of a C literal: printable ASCII as is,
/// quotes and backslashes escaped, the rest as `\n`, `\t` or `\xHH`.
fn escaped(f: &mut fmt::Formatter<'_>, bytes: &[u8], quote: u8) -> fmt::Result {
    for &b in bytes {
        match b {
            b'\n' => f.write_str("\\n")?,
            b'\t' => f.write_str("\\t")?,
            b'\r' => f.write_str("\\r")?,
            b'\\' => f.write_str("\\\\")?,
            _ if b == quote => write!(f, "\\{}", b as char)?,
            0x20..=0x7e => write!(f, "{}", b as char)?,
            _ => write!(f, "\\x{b:02x}")?,
        }
    }
    Ok(())
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Signed(v) => write!(f, "{v}"),
            Value::Unsigned(v) => write!(f, "{v}"),
            Value::Hex(v) => write!(f, "{v:#x}"),
            Value::Octal(0) => f.write_str("0"),
            Value::Octal(v) => write!(f, "0{v:o}"),
            Value::Char(c) => {
                f.write_str("'")?;
                escaped(f, &[*c], b'\'')?;
                f.write_str("'")
            }
            Value::F32(v) => write!(f, "{v:?}"),
            Value::F64(v) => write!(f, "{v:?}"),
            Value::Ptr(v) => write!(f, "{v:#x}"),
            Value::Str(s, cut) => {
                f.write_str("\"")?;
                escaped(f, s, b'"')?;
                f.write_str(if *cut { "\"..." } else { "\"" })
            }
            Value::Unreadable(0) => f.write_str("NULL"),
            Value::Unreadable(p) => write!(f, "<unreadable {p:#x}>"),
            Value::Bool(0) => f.write_str("false"),
            Value::Bool(1) => f.write_str("true"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Name(n) => f.write_str(n),
            Value::Aggregate => f.write_str("{...}"),
            Value::Unknown => f.write_str("?"),
            Value::Damaged(why) => write!(f, "<damaged: {why}>"),
        }
    }
}

/// The values joined as an argument list: `3, "abc", 1.5`.
pub fn list(values: &[Value]) -> String {
    let mut s = String::new();
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&v.to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(f: impl Fn(&mut Writer<'_>)) -> Vec<Value> {
        let mut buf = [0u8; MAX_PAYLOAD];
        let mut w = Writer::new(&mut buf);
        f(&mut w);
        let n = w.words();
        let words: Vec<u64> = buf[..n * 8]
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        decode(&words).unwrap()
    }

    #[test]
    fn values_round_trip_in_their_own_width() {
        let v = round(|w| {
            w.scalar(KIND_SIGNED, 4, (-7i32) as u32 as u64 | 0xdead_0000_0000_0000);
            w.scalar(KIND_SIGNED, 1, 0x80);
            w.scalar(KIND_UNSIGNED, 2, 0xffff);
            w.scalar(KIND_HEX, 8, 0x1234);
            w.scalar(KIND_OCTAL, 8, 0o755);
            w.scalar(KIND_CHAR, 1, b'\n' as u64);
            w.scalar(KIND_FLOAT, 4, 1.5f32.to_bits() as u64);
            w.scalar(KIND_FLOAT, 8, 3.75f64.to_bits());
            w.scalar(KIND_PTR, 8, 0x7fff_0000);
            w.string(b"a\"b", false);
            w.unreadable(0);
            w.unreadable(0x10);
            w.scalar(KIND_BOOL, 1, 1);
            w.name(b"RED");
            w.scalar(KIND_AGGREGATE, 1, 2);
        });
        assert_eq!(
            list(&v),
            r#"-7, -128, 65535, 0x1234, 0755, '\n', 1.5, 3.75, 0x7fff0000, "a\"b", NULL, <unreadable 0x10>, true, RED, {...}"#
        );
    }

    #[test]
    fn long_strings_are_cut_and_full_buffers_refuse() {
        let long = vec![b'x'; 300];
        let v = round(|w| {
            w.string(&long, false);
        });
        assert_eq!(v, [Value::Str(vec![b'x'; MAX_STRING], true)]);
        let mut buf = [0u8; 8];
        let mut w = Writer::new(&mut buf);
        assert!(w.scalar(KIND_SIGNED, 4, 1));
        assert!(!w.scalar(KIND_SIGNED, 4, 1));
        assert!(w.string(b"long", false));
        assert_eq!(w.len(), 8);
        assert!(!w.unreadable(0));
        let words = [u64::from_le_bytes(buf)];
        assert_eq!(
            decode(&words).unwrap(),
            [Value::Signed(1), Value::Str(b"l".to_vec(), true)]
        );
    }

    #[test]
    fn register_payloads() {
        let tags = [KIND_SIGNED | 2 << 4, KIND_HEX | 3 << 4, KIND_CHAR];
        let d = register_descriptor(&tags).unwrap();
        let regs = [d, (-5i64) as u64, 0xbeef, b'x' as u64 | 0xff00];
        assert_eq!(list(&decode_registers(&regs).unwrap()), "-5, 0xbeef, 'x'");
        // Cut short: the missing register reads 0.
        assert_eq!(list(&decode_registers(&regs[..2]).unwrap()), r"-5, 0x0, '\x00'");
        assert!(register_descriptor(&[KIND_STR]).is_none());
        assert!(register_descriptor(&[]).is_none());
        assert!(register_descriptor(&[KIND_SIGNED; 7]).is_none());
    }

    #[test]
    fn malformed_payloads_are_errors() {
        assert!(decode(&[0x3f]).is_err());
        // A string whose length goes past the payload.
        assert!(decode(&[0x50_08]).is_err());
        assert_eq!(decode(&[0]).unwrap(), []);
    }
}
