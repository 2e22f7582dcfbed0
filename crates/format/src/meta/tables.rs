//! The tab-separated tables: lines of `functions.tsv` and `profile.tsv`.
//!
//! `functions.tsv`: `FID  MODULE  ADDRESS  SIZE  NAME`, the id decimal, the
//! address and size in hex with `0x`. The name is the last field, so it may
//! hold tabs; the module may not. Writers replace tabs and line breaks that
//! would break a line with spaces (see [`FunctionEntry::to_line`]).
//!
//! `profile.tsv`: the header line [`ProfileRow::HEADER`], then six decimal
//! fields per line.

use crate::event::MAX_FID;

/// One line of `functions.tsv`: a function id and what it names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionEntry {
    /// The function id (dense from 0 in a process image).
    pub fid: u32,
    /// The module's path.
    pub module: String,
    /// The runtime address of the function.
    pub address: u64,
    /// The function's size in bytes (0 when unknown).
    pub size: u64,
    /// The symbol name as in the file (mangled).
    pub name: String,
}

impl FunctionEntry {
    /// The line of this entry, with its trailing `\n`. Tabs and line breaks
    /// in the module, and line breaks in the name, become spaces: the
    /// format has no escapes.
    pub fn to_line(&self) -> String {
        let module = clean(&self.module, true);
        let name = clean(&self.name, false);
        format!(
            "{}\t{}\t{:#x}\t{:#x}\t{}\n",
            self.fid, module, self.address, self.size, name
        )
    }

    /// Parses one line (a trailing `\n` or `\r\n` is allowed); the error is
    /// a short reason.
    pub fn parse_line(line: &str) -> Result<FunctionEntry, String> {
        let line = trim_eol(line);
        let fields: Vec<&str> = line.splitn(5, '\t').collect();
        let [fid, module, address, size, name] = fields[..] else {
            return Err(format!(
                "expected 5 tab-separated fields (FID MODULE ADDRESS SIZE NAME), found {}",
                fields.len()
            ));
        };
        let fid = parse_fid(fid)?;
        let address =
            parse_hex(address).ok_or_else(|| format!("bad address `{address}` (expected 0x...)"))?;
        let size = parse_hex(size).ok_or_else(|| format!("bad size `{size}` (expected 0x...)"))?;
        Ok(FunctionEntry {
            fid,
            module: module.to_string(),
            address,
            size,
            name: name.to_string(),
        })
    }

    /// Whether `addr` is inside the function: in `[address, address +
    /// size)`, or exactly `address` when the size is unknown (0).
    pub fn contains(&self, addr: u64) -> bool {
        match addr.checked_sub(self.address) {
            Some(off) => off < self.size.max(1),
            None => false,
        }
    }
}

/// One line of `profile.tsv`: a function's totals over the threads of a
/// process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ProfileRow {
    /// The function id.
    pub fid: u32,
    /// Calls that returned.
    pub calls: u64,
    /// Time inside the function, children included (ns).
    pub total_ns: u64,
    /// Time inside the function, children excluded (ns).
    pub self_ns: u64,
    /// The shortest call (ns).
    pub min_ns: u64,
    /// The longest call (ns).
    pub max_ns: u64,
}

impl ProfileRow {
    /// The header line of `profile.tsv`, without its line end (write it
    /// followed by `\n`).
    pub const HEADER: &'static str = "FID\tCALLS\tTOTAL_NS\tSELF_NS\tMIN_NS\tMAX_NS";

    /// Whether `line` is the header line (with or without its line end).
    pub fn is_header(line: &str) -> bool {
        trim_eol(line) == Self::HEADER
    }

    /// The line of this row, with its trailing `\n`.
    pub fn to_line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}\n",
            self.fid, self.calls, self.total_ns, self.self_ns, self.min_ns, self.max_ns
        )
    }

    /// Parses one line (a trailing `\n` or `\r\n` is allowed); the error is
    /// a short reason. The header line is an error here.
    pub fn parse_line(line: &str) -> Result<ProfileRow, String> {
        let line = trim_eol(line);
        let fields: Vec<&str> = line.split('\t').collect();
        let [fid, calls, total, self_ns, min, max] = fields[..] else {
            return Err(format!("expected 6 tab-separated fields, found {}", fields.len()));
        };
        let num = |what: &str, s: &str| parse_dec(s).ok_or_else(|| format!("bad {what} `{s}`"));
        Ok(ProfileRow {
            fid: parse_fid(fid)?,
            calls: num("CALLS", calls)?,
            total_ns: num("TOTAL_NS", total)?,
            self_ns: num("SELF_NS", self_ns)?,
            min_ns: num("MIN_NS", min)?,
            max_ns: num("MAX_NS", max)?,
        })
    }
}

/// `line` without one trailing `\n` or `\r\n`.
pub(crate) fn trim_eol(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

fn clean(s: &str, tabs: bool) -> String {
    s.chars()
        .map(|c| match c {
            '\n' | '\r' => ' ',
            '\t' if tabs => ' ',
            c => c,
        })
        .collect()
}

/// A function id: decimal, at most [`MAX_FID`].
fn parse_fid(s: &str) -> Result<u32, String> {
    let fid = parse_dec(s).ok_or_else(|| format!("bad function id `{s}`"))?;
    u32::try_from(fid)
        .ok()
        .filter(|&f| f <= MAX_FID)
        .ok_or_else(|| format!("function id {fid} is larger than {MAX_FID}"))
}

/// Decimal digits only (no sign, no spaces).
fn parse_dec(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `0x` (or `0X`) then hex digits.
fn parse_hex(s: &str) -> Option<u64> {
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_lines() {
        let f = FunctionEntry {
            fid: 3,
            module: "/usr/lib/libx.so".into(),
            address: 0x7f00_1234,
            size: 0x40,
            name: "_ZN3foo3barEv".into(),
        };
        let line = f.to_line();
        assert_eq!(line, "3\t/usr/lib/libx.so\t0x7f001234\t0x40\t_ZN3foo3barEv\n");
        assert_eq!(FunctionEntry::parse_line(&line), Ok(f.clone()));
        assert_eq!(FunctionEntry::parse_line(line.trim_end()), Ok(f.clone()));
        assert_eq!(
            FunctionEntry::parse_line("3\tm\t0X10\t0x0\ta\tb\r\n")
                .unwrap()
                .name,
            "a\tb"
        );
        let odd = FunctionEntry {
            module: "a\tb\nc".into(),
            name: "x\ny\tz".into(),
            ..f
        };
        let back = FunctionEntry::parse_line(&odd.to_line()).unwrap();
        assert_eq!((back.module.as_str(), back.name.as_str()), ("a b c", "x y\tz"));
    }

    #[test]
    fn bad_function_lines() {
        for (line, why) in [
            ("", "found 1"),
            ("1\tm\t0x1\t0x2", "found 4"),
            ("x\tm\t0x1\t0x2\tn", "function id"),
            ("+1\tm\t0x1\t0x2\tn", "function id"),
            ("16777216\tm\t0x1\t0x2\tn", "larger"),
            ("99999999999999999999\tm\t0x1\t0x2\tn", "function id"),
            ("1\tm\t10\t0x2\tn", "address"),
            ("1\tm\t0x\t0x2\tn", "address"),
            ("1\tm\t0x1\t0xg\tn", "size"),
            ("1\tm\t0x10000000000000000\t0x2\tn", "address"),
        ] {
            let err = FunctionEntry::parse_line(line).unwrap_err();
            assert!(err.contains(why), "{line:?}: {err}");
        }
    }

    #[test]
    fn contains() {
        let f = FunctionEntry::parse_line("0\tm\t0x100\t0x10\tf").unwrap();
        assert!(f.contains(0x100) && f.contains(0x10f));
        assert!(!f.contains(0xff) && !f.contains(0x110));
        let g = FunctionEntry { size: 0, ..f };
        assert!(g.contains(0x100) && !g.contains(0x101));
        let h = FunctionEntry {
            address: u64::MAX,
            size: u64::MAX,
            ..g
        };
        assert!(h.contains(u64::MAX));
    }

    #[test]
    fn profile_lines() {
        let r = ProfileRow {
            fid: 1,
            calls: 2,
            total_ns: 30,
            self_ns: 20,
            min_ns: 10,
            max_ns: 20,
        };
        assert_eq!(r.to_line(), "1\t2\t30\t20\t10\t20\n");
        assert_eq!(ProfileRow::parse_line(&r.to_line()), Ok(r));
        assert!(ProfileRow::is_header(
            "FID\tCALLS\tTOTAL_NS\tSELF_NS\tMIN_NS\tMAX_NS"
        ));
        assert!(ProfileRow::parse_line(ProfileRow::HEADER).is_err());
        assert!(ProfileRow::parse_line("1\t2\t3").unwrap_err().contains("found 3"));
        assert!(ProfileRow::parse_line("1\t2\t3\t4\t5\t-6")
            .unwrap_err()
            .contains("MAX_NS"));
    }
}
