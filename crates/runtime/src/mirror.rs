//! The mirror of a module's punned sites (`Shape::Punned`): a run of gcc's
//! one-byte NOPs, taken in while threads run, keeps every byte an
//! instruction boundary (a thread may be stopped, or interrupted by a
//! signal, at any of them), so its call's displacement is fixed: four bytes
//! that are each a harmless one-byte instruction. The call of a site whose
//! run ends at `r` therefore goes to `r + disp`, the same `disp` for the
//! whole module: there, in a *mirror* region mapped `disp` bytes from the
//! module's code, each site has a 6-byte `jmp *word(%rip)` through its own
//! data word, which holds the site's trampoline slot. Two sites' runs end
//! at least 6 bytes apart (a function is a run and at least a `ret`), so
//! their mirror slots never overlap.
//!
//! The mirror's code is written once, before any site calls it, then made
//! read-only and executable; it is never unmapped (a thread may be in it).
//! Changing a site's trampoline is one aligned store of its data word.

use std::io;

use crate::sys;

/// `jmp *disp32(%rip)`: 6 bytes.
const JMP_LEN: usize = 6;

// Where a data word points before its site is first switched on: a `ret`,
// back to the site's function as if nothing had been called.
extern "C" {
    fn fntrace_mirror_ret();
}
std::arch::global_asm!(
    ".text",
    ".globl fntrace_mirror_ret",
    ".hidden fntrace_mirror_ret",
    "fntrace_mirror_ret:",
    "ret",
);

/// The address of a `ret`: where a call through a word that has no target
/// yet goes, back to its caller as if nothing had been called.
pub fn ret_stub() -> usize {
    fntrace_mirror_ret as *const () as usize
}

/// A module's mirror.
#[derive(Debug)]
pub struct Mirror {
    /// The displacement of every punned call of the module.
    pub disp: i32,
    /// The data words, one per site (in the order of `rets`).
    words: usize,
    /// The return addresses of the punned sites (ascending).
    rets: Vec<usize>,
}

impl Mirror {
    /// Maps a mirror for the punned sites whose runs end at `rets`
    /// (ascending), with the first displacement of
    /// `fntrace_arch::x86_64::pun_displacements` whose region is free.
    pub fn map(rets: Vec<usize>) -> io::Result<Mirror> {
        let (Some(&first), Some(&last)) = (rets.first(), rets.last()) else {
            return Err(io::Error::other("no site"));
        };
        let page = sys::page_size();
        let words_len = (rets.len() * 8).next_multiple_of(page);
        // `FNTRACE_PUN_FROM=N` skips the first N displacements: with the
        // first (`90 90 90 90`), switching a site writes one byte and
        // punning it none; the tests use the others too.
        let from = std::env::var(fntrace_format::settings::PUN_FROM)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        for disp in fntrace_arch::x86_64::pun_displacements().skip(from) {
            let at = |r: usize| r.wrapping_add(disp as isize as usize);
            let lo = at(first) & !(page - 1);
            let hi = (at(last) + JMP_LEN).next_multiple_of(page);
            if at(first) > first {
                continue;
            }
            let code_len = hi - lo;
            // The code, then the data words right after it (within reach
            // of a rel32 from every slot).
            if sys::map_fixed_noreplace(lo, code_len + words_len).is_err() {
                continue;
            }
            let mirror = Mirror {
                disp,
                words: hi,
                rets,
            };
            mirror.fill(lo, hi)?;
            return Ok(mirror);
        }
        Err(io::Error::other(format!(
            "no free address space for the mirror of {first:#x}..{last:#x}"
        )))
    }

    /// Writes every slot and data word, then makes the code read-only and
    /// executable and the words read-write (never both writable and
    /// executable).
    fn fill(&self, lo: usize, hi: usize) -> io::Result<()> {
        let ret = ret_stub();
        for (i, &r) in self.rets.iter().enumerate() {
            let slot = self.slot_of(r);
            let word = self.words + 8 * i;
            let rel = i32::try_from(word as isize - (slot + JMP_LEN) as isize)
                .map_err(|_| io::Error::other("mirror too large"))?;
            let mut code = [0xff, 0x25, 0, 0, 0, 0];
            code[2..].copy_from_slice(&rel.to_le_bytes());
            // SAFETY: `slot..slot + 6` and `word..word + 8` lie in the
            // mapping `map` just made (readable and writable), which no
            // site calls yet; slots do not overlap (module doc).
            unsafe {
                std::ptr::copy_nonoverlapping(code.as_ptr(), slot as *mut u8, JMP_LEN);
                (word as *mut usize).write(ret);
            }
        }
        sys::protect(lo, hi, libc::PROT_READ | libc::PROT_EXEC)
    }

    /// The mirror slot the punned call of the site whose run ends at `ret`
    /// goes to.
    pub fn slot_of(&self, ret: usize) -> usize {
        ret.wrapping_add(self.disp as isize as usize)
    }

    /// Makes the site whose run ends at `ret` jump on to `target` (a
    /// trampoline slot); false if it has no slot here.
    pub fn set(&self, ret: usize, target: usize) -> bool {
        let Ok(i) = self.rets.binary_search(&ret) else {
            return false;
        };
        let word = self.words + 8 * i;
        // SAFETY: the data word of site `i`, an aligned word of this
        // mirror's read-write part; threads jumping through it read it
        // whole, the old value or the new.
        unsafe { std::ptr::write_volatile(word as *mut usize, target) };
        true
    }
}
