//! A process image's function table (`functions.tsv`), indexed by id and by
//! address.

use crate::meta::FunctionEntry;

/// The functions of one process image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Functions {
    /// Sorted by fid, no duplicates.
    entries: Vec<FunctionEntry>,
    /// Indexes into `entries`, sorted by address, then by descending fid (so
    /// that a backward scan meets the lowest fid of one address first).
    by_addr: Vec<usize>,
    /// `max_end[i]`: the largest end (`address + max(size, 1)`) of
    /// `by_addr[..=i]`.
    max_end: Vec<u64>,
}

impl Functions {
    /// A table of `entries` (in any order); fails on a duplicate id.
    pub fn new(mut entries: Vec<FunctionEntry>) -> Result<Functions, String> {
        entries.sort_by_key(|e| e.fid);
        if let Some(w) = entries.windows(2).find(|w| w[0].fid == w[1].fid) {
            return Err(format!("function id {} appears twice", w[0].fid));
        }
        let mut by_addr: Vec<usize> = (0..entries.len()).collect();
        by_addr.sort_by_key(|&i| (entries[i].address, std::cmp::Reverse(entries[i].fid)));
        let mut max_end = Vec::with_capacity(by_addr.len());
        let mut end = 0u64;
        for &i in &by_addr {
            let e = &entries[i];
            end = end.max(e.address.saturating_add(e.size.max(1)));
            max_end.push(end);
        }
        Ok(Functions {
            entries,
            by_addr,
            max_end,
        })
    }

    /// Parses the text of `functions.tsv`. Blank lines are skipped. A last
    /// line without its `\n` that does not parse is taken for a write that
    /// was cut short: it is left out and described in the returned note.
    /// Any other bad line fails the whole table with `line N: reason`.
    pub fn parse(text: &str) -> Result<(Functions, Option<String>), String> {
        let mut entries = Vec::new();
        let mut note = None;
        let mut lines = text.split_inclusive('\n').enumerate().peekable();
        while let Some((i, line)) = lines.next() {
            if line.trim().is_empty() {
                continue;
            }
            match FunctionEntry::parse_line(line) {
                Ok(entry) => entries.push(entry),
                Err(reason) if lines.peek().is_none() && !line.ends_with('\n') => {
                    note = Some(format!("line {}: incomplete last line left out: {reason}", i + 1));
                }
                Err(reason) => return Err(format!("line {}: {reason}", i + 1)),
            }
        }
        Ok((Functions::new(entries)?, note))
    }

    /// The entry of `fid`.
    pub fn get(&self, fid: u32) -> Option<&FunctionEntry> {
        // Ids are dense from 0 in a well-formed table: try the direct index.
        if let Some(e) = self.entries.get(fid as usize).filter(|e| e.fid == fid) {
            return Some(e);
        }
        let i = self.entries.binary_search_by_key(&fid, |e| e.fid).ok()?;
        self.entries.get(i)
    }

    /// The raw (mangled) name of `fid`, or `fid#N` when the table does not
    /// have it.
    pub fn name(&self, fid: u32) -> String {
        match self.get(fid) {
            Some(e) => e.name.clone(),
            None => format!("fid#{fid}"),
        }
    }

    /// The function whose range holds `addr`, and `addr`'s offset in it.
    /// Where ranges overlap, the one that starts last wins, then the lowest
    /// id; a function of size 0 holds only its own address.
    pub fn by_address(&self, addr: u64) -> Option<(&FunctionEntry, u64)> {
        let n = self
            .by_addr
            .partition_point(|&i| self.entries.get(i).is_some_and(|e| e.address <= addr));
        for k in (0..n).rev() {
            let e = self.entries.get(*self.by_addr.get(k)?)?;
            if e.contains(addr) {
                return Some((e, addr - e.address));
            }
            // No earlier range reaches `addr`: stop.
            if k == 0 || self.max_end.get(k - 1).is_some_and(|&end| end <= addr) {
                break;
            }
        }
        None
    }

    /// The number of functions.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, by increasing id.
    pub fn iter(&self) -> impl Iterator<Item = &FunctionEntry> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(fid: u32, address: u64, size: u64, name: &str) -> FunctionEntry {
        FunctionEntry {
            fid,
            module: "m".into(),
            address,
            size,
            name: name.into(),
        }
    }

    #[test]
    fn get_and_name() {
        let t = Functions::new(vec![
            f(2, 0x300, 0x10, "c"),
            f(0, 0x100, 0x10, "a"),
            f(5, 0x200, 0, "z"),
        ])
        .unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.get(0).unwrap().name, "a");
        assert_eq!(t.get(5).unwrap().name, "z");
        assert!(t.get(1).is_none());
        assert_eq!(t.name(2), "c");
        assert_eq!(t.name(9), "fid#9");
        assert_eq!(t.iter().map(|e| e.fid).collect::<Vec<_>>(), [0, 2, 5]);
        assert!(Functions::new(vec![f(1, 0, 1, "a"), f(1, 4, 1, "b")])
            .unwrap_err()
            .contains("twice"));
    }

    #[test]
    fn by_address() {
        let t = Functions::new(vec![
            f(0, 0x1000, 0x100, "outer"),
            f(1, 0x1010, 0x10, "inner"),
            f(2, 0x2000, 0, "asm"),
            f(3, 0x3000, 0x20, "alias_b"),
            f(4, 0x3000, 0x20, "alias_a"),
            f(5, 0x3000, 0, "label"),
        ])
        .unwrap();
        let at = |a| t.by_address(a).map(|(e, off)| (e.name.as_str(), off));
        assert_eq!(at(0xfff), None);
        assert_eq!(at(0x1000), Some(("outer", 0)));
        assert_eq!(at(0x1015), Some(("inner", 5)));
        assert_eq!(at(0x1020), Some(("outer", 0x20)));
        assert_eq!(at(0x10ff), Some(("outer", 0xff)));
        assert_eq!(at(0x1100), None);
        assert_eq!(at(0x2000), Some(("asm", 0)));
        assert_eq!(at(0x2001), None);
        assert_eq!(at(0x3000), Some(("alias_b", 0)));
        assert_eq!(at(0x301f), Some(("alias_b", 0x1f)));
        assert_eq!(at(0x3020), None);
        assert_eq!(at(u64::MAX), None);
        assert_eq!(Functions::default().by_address(5), None);
    }

    #[test]
    fn parse_text() {
        let text = "0\tm\t0x10\t0x4\ta\n\n1\tm\t0x20\t0x4\tb\n2\tm\t0x3";
        let (t, note) = Functions::parse(text).unwrap();
        assert_eq!(t.len(), 2);
        assert!(note.unwrap().starts_with("line 4: incomplete last line"));
        let (t, note) = Functions::parse("0\tm\t0x10\t0x4\ta").unwrap();
        assert_eq!((t.len(), note), (1, None));
        let err = Functions::parse("0\tm\t0x10\t0x4\ta\nbad\n1\tm\t0x20\t0x4\tb\n").unwrap_err();
        assert!(err.starts_with("line 2: "), "{err}");
        assert!(Functions::parse("bad\n").is_err());
        assert_eq!(Functions::parse("").unwrap().0.len(), 0);
    }
}
