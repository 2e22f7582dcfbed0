//! Memory for the detours of bare sites (`bare.rs`): executable pages near
//! a module, where each function traced through a jump has its detour at
//! an address the jump's punned displacement allows, and read-write pages
//! for the data words the detours call through.
//!
//! A detour is found a place by searching the addresses its jump may land
//! on ([`fntrace_arch::x86_64::bare::next_landing`]) for free bytes, page by
//! page: a page is mapped (`MAP_FIXED_NOREPLACE`, never over anything) the
//! first time a detour lands in it, and a page someone else holds is
//! skipped. A bitmap per page says which bytes are taken. Detours are never
//! freed or rewritten — a thread may be in one, or be about to return into
//! one — so the space only grows, by what is traced.
//!
//! Like the trampoline pools, no page is ever writable and executable
//! except while a batch writes detours into it, and [`Space::close`] ends
//! that; the words live in pages that are never executable.

use std::collections::BTreeMap;
use std::io;

use crate::sys;

const PAGE: usize = 4096;
/// Candidate places tried per detour before giving up (a site whose pun
/// allows a handful of addresses, all taken, is refused quickly; one that
/// allows many finds room in the first few).
const TRIES: usize = 1 << 16;
/// Bytes of a group of data words.
const GROUP: usize = 128;
/// What a rel32 reaches, with a margin.
const REACH: usize = (1 << 31) - (1 << 24);

/// A page of the space.
#[derive(Debug)]
enum Page {
    /// Mapped by someone else, or a page of words: never a detour here.
    Taken,
    /// Ours: one bit per byte, set when taken.
    Ours(Box<[u64; PAGE / 64]>),
}

/// The detour and word pages of one module.
#[derive(Debug, Default)]
pub struct Space {
    pages: BTreeMap<usize, Page>,
    /// Pages made writable by this batch's writes.
    open: Vec<usize>,
    /// Word pages: (base, words used).
    words: Vec<(usize, usize)>,
    /// Just past the last detour written: functions come in address order,
    /// and so do their windows, so the next place is mostly after it (a
    /// search from the window's start would step over every detour placed
    /// before: quadratic in the functions selected).
    hint: usize,
}

impl Space {
    /// The first place in `[lo, hi)` where `size` bytes (at most a page) are
    /// free, trying the addresses `next` gives (`next(from)`: the first
    /// allowed address at or after `from`); `None` if there is none.
    pub fn find(
        &mut self,
        lo: usize,
        hi: usize,
        size: usize,
        next: impl Fn(usize) -> Option<usize>,
    ) -> Option<usize> {
        if size == 0 || size > PAGE {
            return None;
        }
        let hint = self.hint;
        if hint > lo && hint < hi {
            if let Some(at) = self.search(hint, hi, size, &next) {
                return Some(at);
            }
            return self.search(lo, hi.min(hint + size), size, &next);
        }
        self.search(lo, hi, size, &next)
    }

    /// [`Space::find`] from `lo`.
    fn search(
        &mut self,
        lo: usize,
        hi: usize,
        size: usize,
        next: &impl Fn(usize) -> Option<usize>,
    ) -> Option<usize> {
        let mut from = lo;
        for _ in 0..TRIES {
            let at = next(from)?;
            if at < from || at.checked_add(size)? > hi {
                return None;
            }
            let page = at & !(PAGE - 1);
            if at + size > page + PAGE {
                // Detours do not straddle pages: the next page's start on.
                from = page + PAGE;
                continue;
            }
            match self.page(page) {
                Page::Taken => from = page + PAGE,
                Page::Ours(bits) => match taken_in(bits, at - page, size) {
                    None => return Some(at),
                    Some(used) => from = page + used + 1,
                },
            }
        }
        None
    }

    /// The page at `base`, mapped now if nobody holds it.
    fn page(&mut self, base: usize) -> &Page {
        self.pages.entry(base).or_insert_with(|| {
            if sys::map_fixed_noreplace(base, PAGE).is_err()
                || sys::protect(base, base + PAGE, libc::PROT_READ | libc::PROT_EXEC).is_err()
            {
                return Page::Taken;
            }
            Page::Ours(Box::new([0; PAGE / 64]))
        })
    }

    /// Writes `bytes` at `at` (a place [`Space::find`] gave) and marks them
    /// taken. The page stays writable until [`Space::close`].
    pub fn write(&mut self, at: usize, bytes: &[u8]) -> io::Result<()> {
        let page = at & !(PAGE - 1);
        let Some(Page::Ours(bits)) = self.pages.get_mut(&page) else {
            return Err(io::Error::other(format!("{at:#x} is not in a detour page")));
        };
        if at + bytes.len() > page + PAGE || taken_in(bits, at - page, bytes.len()).is_some() {
            return Err(io::Error::other(format!(
                "{at:#x}: no room for {} bytes",
                bytes.len()
            )));
        }
        if !self.open.contains(&page) {
            let rwx = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
            sys::protect(page, page + PAGE, rwx)?;
            self.open.push(page);
        }
        for i in at - page..at - page + bytes.len() {
            bits[i / 64] |= 1 << (i % 64);
        }
        self.hint = at + bytes.len();
        // SAFETY: `at..at + len` lies in a page this space mapped and just
        // made writable, in bytes no detour used: no thread runs them yet
        // (no jump leads here before the batch that writes it).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
        Ok(())
    }

    /// Ends a batch of detour writes: their pages are read-only again.
    pub fn close(&mut self) {
        for page in self.open.drain(..) {
            let _ = sys::protect(page, page + PAGE, libc::PROT_READ | libc::PROT_EXEC);
        }
    }

    /// A new group of data words (sixteen, 128 bytes aligned: `W`, its ops
    /// and data, then from `W + 32` a guard's six) within rel32 reach of
    /// `near`: the first holding `value`, the others 0.
    pub fn word(&mut self, near: usize, value: usize) -> io::Result<usize> {
        let reach = |w: usize| w.abs_diff(near) < REACH;
        let found = self
            .words
            .iter_mut()
            .find(|(base, used)| *used < PAGE / GROUP && reach(*base));
        let (base, used) = match found {
            Some(page) => page,
            None => {
                let base = self.word_page(near)?;
                self.words.push((base, 0));
                self.words.last_mut().expect("just pushed")
            }
        };
        let word = *base + GROUP * *used;
        *used += 1;
        for k in 1..GROUP / 8 {
            set_word(word + 8 * k, 0);
        }
        set_word(word, value);
        Ok(word)
    }

    /// Maps a page for words near `near` (below it, then above).
    fn word_page(&mut self, near: usize) -> io::Result<usize> {
        let near = near & !(PAGE - 1);
        for k in 1..1024usize {
            for base in [near.checked_sub(k * PAGE), near.checked_add(k * PAGE)]
                .into_iter()
                .flatten()
            {
                if self.pages.contains_key(&base) || sys::map_fixed_noreplace(base, PAGE).is_err() {
                    continue;
                }
                self.pages.insert(base, Page::Taken);
                return Ok(base);
            }
        }
        Err(io::Error::other(format!("no room for data words near {near:#x}")))
    }
}

/// The last taken byte among `bits[at..at + size]`, if any.
fn taken_in(bits: &[u64; PAGE / 64], at: usize, size: usize) -> Option<usize> {
    (at..at + size).rev().find(|&i| bits[i / 64] >> (i % 64) & 1 != 0)
}

/// Writes a word the detours call through (a trampoline slot).
pub fn set_word(word: usize, value: usize) {
    // SAFETY: `word` was given out by `Space::word`: an aligned word of a
    // read-write page that lives forever; threads read it whole.
    unsafe { std::ptr::write_volatile(word as *mut usize, value) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detours_never_share_a_byte_and_skip_taken_pages() {
        let mut space = Space::default();
        // A region nobody holds: well above this test's own mappings.
        let lo = 0x6000_0000_0000usize;
        let hi = lo + 4 * PAGE;
        // Every address allowed: detours of 100 bytes pack one after another.
        let a = space.find(lo, hi, 100, Some).expect("room");
        space.write(a, &[0xc3; 100]).unwrap();
        let b = space.find(lo, hi, 100, Some).expect("room");
        assert_eq!(b, a + 100);
        // Addresses ≡ 7 (mod 256) only.
        let next = |from: usize| {
            let at = (from & !255) + 7;
            Some(if at >= from { at } else { at + 256 })
        };
        let c = space.find(lo, hi, 40, next).expect("room");
        assert_eq!(c % 256, 7);
        assert!(c >= a + 100 || c + 40 <= a);
        space.write(c, &[0xc3; 40]).unwrap();
        // Taken bytes cannot be written twice.
        assert!(space.write(a + 50, &[0xc3]).is_err());
        space.close();
        // SAFETY: the byte was just written into a page the space mapped.
        assert_eq!(unsafe { *(a as *const u8) }, 0xc3);
        // Words are within reach and hold their value.
        let w = space.word(a, 0x1234).unwrap();
        assert!(w.abs_diff(a) < REACH);
        // SAFETY: a word the space mapped and wrote.
        assert_eq!(unsafe { *(w as *const usize) }, 0x1234);
    }
}
