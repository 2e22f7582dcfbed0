//! A process image's function table (`functions.tsv`), indexed by id and by
//! address.
//!
//! Ranges may overlap (damaged or hostile tables too): the address index is
//! the table cut into segments, each with the function that holds its
//! addresses, made once in O(n log n), so that a lookup is a binary search
//! however the ranges nest.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use crate::meta::FunctionEntry;

/// No function: a segment between functions.
const NONE: u32 = u32::MAX;

/// The functions of one process image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Functions {
    /// Sorted by fid, no duplicates.
    entries: Vec<FunctionEntry>,
    /// `(start, index into entries or NONE)`, by start: from `start` up to
    /// the next segment's, addresses belong to that function. Ends are
    /// `address + max(size, 1)`, which can pass `u64::MAX`.
    segments: Vec<(u128, u32)>,
}

impl Functions {
    /// A table of `entries` (in any order); fails on a duplicate id.
    pub fn new(mut entries: Vec<FunctionEntry>) -> Result<Functions, String> {
        entries.sort_by_key(|e| e.fid);
        if let Some(w) = entries.windows(2).find(|w| w[0].fid == w[1].fid) {
            return Err(format!("function id {} appears twice", w[0].fid));
        }
        let segments = segments(&entries);
        Ok(Functions { entries, segments })
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
            .segments
            .partition_point(|&(start, _)| start <= u128::from(addr));
        let &(_, index) = self.segments.get(n.checked_sub(1)?)?;
        let e = self.entries.get(index as usize)?;
        Some((e, addr - e.address))
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

/// The address segments of `entries` (see [`Functions`]): a sweep over the
/// ranges' starts and ends, with the ranges open at each point ordered by
/// who wins: the last start, then the lowest fid.
fn segments(entries: &[FunctionEntry]) -> Vec<(u128, u32)> {
    // (point, is a start, index); at one point ends come before starts.
    let mut points: Vec<(u128, bool, usize)> = Vec::with_capacity(2 * entries.len());
    for (i, e) in entries.iter().enumerate() {
        let start = u128::from(e.address);
        points.push((start, true, i));
        points.push((start + u128::from(e.size.max(1)), false, i));
    }
    points.sort_unstable();
    let mut open = BTreeSet::new();
    let mut segments: Vec<(u128, u32)> = Vec::new();
    let mut k = 0;
    while let Some(&(at, _, _)) = points.get(k) {
        while let Some(&(_, start, i)) = points.get(k).filter(|p| p.0 == at) {
            let key = (Reverse(entries[i].address), entries[i].fid, i);
            if start {
                open.insert(key);
            } else {
                open.remove(&key);
            }
            k += 1;
        }
        let winner = open
            .first()
            .map_or(NONE, |&(_, _, i)| u32::try_from(i).unwrap_or(NONE));
        if segments.last().map(|s| s.1) != Some(winner) {
            segments.push((at, winner));
        }
    }
    segments
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
        // A range past the end of the address space holds up to its end.
        let t = Functions::new(vec![f(0, u64::MAX - 1, 0x10, "top")]).unwrap();
        assert_eq!(t.by_address(u64::MAX).map(|(e, off)| (e.fid, off)), Some((0, 1)));
    }

    #[test]
    fn by_address_agrees_with_every_range() {
        // Random tables of overlapping ranges, against the rule itself:
        // of the ranges that hold the address, the last start, then the
        // lowest fid.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..200 {
            let entries: Vec<FunctionEntry> = (0..next(12) as u32)
                .map(|fid| f(fid, 0x100 + next(64), next(40), "x"))
                .collect();
            let t = Functions::new(entries.clone()).unwrap();
            for addr in 0xf0..0x1a0 {
                let want = entries
                    .iter()
                    .filter(|e| e.contains(addr))
                    .min_by_key(|e| (Reverse(e.address), e.fid))
                    .map(|e| e.fid);
                assert_eq!(
                    t.by_address(addr).map(|(e, _)| e.fid),
                    want,
                    "{entries:?} at {addr:#x}"
                );
            }
        }
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
