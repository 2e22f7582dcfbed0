//! A batch of site patches (the kernel's `text_poke_bp_batch`): each poke
//! is verified as it is added, and kept only in the layout of the passes
//! that write it — 100,000 sites are patched at once, so every pass streams
//! as little memory as it can.

use std::sync::Mutex;

use fntrace_arch::{hex, BreakpointPatcher, Code, Resume};

use super::{holds, read, write, BatchStats, Poke, Range, Writer};
use crate::{sys, trap};

/// The vectors of the largest batch so far (its trap table too, withdrawn),
/// kept for the next: fresh pages fault on first touch, ~1,500 of them for
/// 100,000 sites, which costs more than the batch's own work. They stay
/// (~6 MB for 100,000 sites), as the trap table in force used to.
static SPARE: Mutex<Option<Vectors>> = Mutex::new(None);

/// Per write: the caller's key, the site, its new bytes, and the trap
/// table's entry (live batches only).
#[derive(Default)]
struct Vectors {
    keys: Vec<u32>,
    addrs: Vec<usize>,
    new: Vec<Code>,
    /// Per write, [`Poke::starts`].
    starts: Vec<u8>,
    trap: Vec<(usize, Resume)>,
}

impl Vectors {
    /// The spare vectors, emptied, with room for `capacity` writes.
    fn take(capacity: usize, live: bool) -> Vectors {
        let spare = SPARE.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut v = spare.unwrap_or_default();
        v.keys.clear();
        v.addrs.clear();
        v.new.clear();
        v.starts.clear();
        v.trap.clear();
        v.keys.reserve(capacity);
        v.addrs.reserve(capacity);
        v.new.reserve(capacity);
        v.starts.reserve(capacity);
        if live {
            v.trap.reserve(capacity);
        }
        v
    }

    /// Keeps these as the spare unless the spare is larger.
    fn give_back(self) {
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if spare
            .as_ref()
            .is_none_or(|s| s.addrs.capacity() <= self.addrs.capacity())
        {
            *spare = Some(self);
        }
    }
}

/// A poke refused when its batch was written: its code could not be made
/// writable, so it was not written.
#[derive(Debug)]
pub struct Refused {
    /// The key it was added under.
    pub key: usize,
    /// The bytes at the site (those it expected).
    pub now: Code,
    /// Why.
    pub reason: String,
}

/// Verified pokes, written together by [`Batch::write`].
pub struct Batch<'r> {
    ranges: &'r [Range],
    writer: Writer,
    /// Ranges with a verified poke: writable during the batch.
    touched: Vec<bool>,
    /// The range of the last poke (consecutive sites share one).
    last: usize,
    /// The writes are in ascending address order (the trap table must be).
    sorted: bool,
    /// The writes, one entry each in every vector.
    v: Vectors,
    /// Verified pokes that change no byte: key, site, bytes.
    same: Vec<(u32, usize, Code)>,
    /// Some write has several starts (a bare site): only then does the
    /// write pass collect the bytes before it.
    masked: bool,
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        std::mem::take(&mut self.v).give_back();
    }
}

impl<'r> Batch<'r> {
    /// An empty batch of pokes inside `ranges`, room for `capacity`.
    pub fn new(ranges: &'r [Range], writer: Writer, capacity: usize) -> Batch<'r> {
        Batch {
            ranges,
            writer,
            touched: vec![false; ranges.len()],
            last: 0,
            sorted: true,
            v: Vectors::take(capacity, writer.live),
            same: Vec::new(),
            masked: false,
        }
    }

    /// Verifies `poke` — inside one of the ranges, the bytes it expects
    /// there — and adds it under `key` (at most `u32::MAX`); or says why not.
    #[inline]
    pub fn add(&mut self, key: usize, poke: &Poke) -> Result<(), String> {
        let key = u32::try_from(key).map_err(|_| format!("site {:#x}: batch too large", poke.addr))?;
        let len = poke.new.len();
        let ranges = self.ranges;
        let r = match ranges.get(self.last) {
            Some(range) if range.contains(poke.addr, len) => self.last,
            _ => ranges
                .iter()
                .position(|r| r.contains(poke.addr, len))
                .ok_or_else(|| format!("site {:#x} is outside the module's code", poke.addr))?,
        };
        self.last = r;
        // SAFETY: the range is a mapped executable segment of a loaded
        // module; code is written only under the state's lock, which the
        // caller holds.
        if !unsafe { holds(poke.addr, &poke.old) } {
            // SAFETY: as above.
            let now = unsafe { read(poke.addr, poke.old.len()) };
            return Err(format!(
                "site {:#x}: expected {}, found {}",
                poke.addr,
                hex(poke.old.as_slice()),
                hex(now.as_slice())
            ));
        }
        self.touched[r] = true;
        if poke.old == poke.new {
            self.same.push((key, poke.addr, poke.new));
            return Ok(());
        }
        self.sorted &= self.v.addrs.last().is_none_or(|&a| a < poke.addr);
        self.v.keys.push(key);
        self.v.addrs.push(poke.addr);
        self.v.new.push(poke.new);
        self.v.starts.push(poke.starts);
        self.masked |= poke.starts != 0;
        if self.writer.live {
            self.v.trap.push((poke.addr, poke.resume));
        }
        Ok(())
    }

    /// Writes every poke added: one `mprotect` pair per range, and when
    /// other threads may run the code, the sites' plans phase by phase
    /// (publish the trap table; every site's first write, sync; every
    /// site's second, sync; ...; withdraw the table). Returns the pokes
    /// refused now, by key, ascending; every other poke added is written.
    pub fn write(&mut self, stats: &mut BatchStats) -> Vec<Refused> {
        let writable = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
        let mut refused: Vec<Refused> = Vec::new();
        for r in 0..self.ranges.len() {
            if !self.touched[r] {
                continue;
            }
            let range = self.ranges[r];
            stats.protects += 1;
            if let Err(e) = sys::protect(range.start, range.end, writable) {
                self.touched[r] = false;
                self.drop_range(&range, &e.to_string(), &mut refused);
            }
        }
        refused.sort_unstable_by_key(|r| r.key);
        self.write_all(stats);
        for (range, touched) in self.ranges.iter().zip(&self.touched) {
            if *touched {
                stats.protects += 1;
                // Failing to take the write right back leaves the code
                // writable but correct; nothing better can be done than to
                // say so.
                if let Err(e) = sys::protect(range.start, range.end, range.prot) {
                    eprintln!(
                        "fntrace: cannot restore the protection of {:#x}: {e}",
                        range.start
                    );
                }
            }
        }
        refused
    }

    /// Takes out every poke inside `range` (which cannot be written), as
    /// refused for `why`.
    fn drop_range(&mut self, range: &Range, why: &str, refused: &mut Vec<Refused>) {
        let mut refuse = |key: u32, addr: usize, len: usize| {
            refused.push(Refused {
                key: key as usize,
                // SAFETY: a verified site: mapped, readable code.
                now: unsafe { read(addr, len) },
                reason: format!("site {addr:#x}: cannot make its code writable: {why}"),
            });
        };
        let v = &mut self.v;
        let mut kept = 0;
        for k in 0..v.keys.len() {
            let (key, addr, len) = (v.keys[k], v.addrs[k], v.new[k].len());
            if range.contains(addr, len) {
                refuse(key, addr, len);
                continue;
            }
            v.keys[kept] = key;
            v.addrs[kept] = addr;
            v.new[kept] = v.new[k];
            v.starts[kept] = v.starts[k];
            if self.writer.live {
                v.trap[kept] = v.trap[k];
            }
            kept += 1;
        }
        v.keys.truncate(kept);
        v.addrs.truncate(kept);
        v.new.truncate(kept);
        v.starts.truncate(kept);
        v.trap.truncate(kept);
        self.same.retain(|&(key, addr, code)| {
            let inside = range.contains(addr, code.len());
            if inside {
                refuse(key, addr, code.len());
            }
            !inside
        });
    }

    /// Writes the verified bytes into writable code.
    fn write_all(&mut self, stats: &mut BatchStats) {
        if self.v.addrs.is_empty() {
            return;
        }
        stats.written += self.v.addrs.len();
        let writer = self.writer;
        if !writer.live {
            for (&addr, new) in self.v.addrs.iter().zip(&self.v.new) {
                write(addr, new.as_slice());
            }
            return;
        }
        let mut entries = std::mem::take(&mut self.v.trap);
        if !self.sorted {
            entries.sort_unstable_by_key(|e| e.0);
        }
        trap::publish(trap::Table { entries });
        let sync = |stats: &mut BatchStats| {
            writer.sync.sync(writer.scratch);
            stats.syncs += 1;
        };
        // The sites' plans phase by phase: each site's write of a phase is
        // asked of the arch then (a few word operations), rather than whole
        // plans built or kept for 100,000 sites.
        let patcher = writer.patcher;
        // The bytes before the batch of the sites with several starts (bare
        // sites), which their first phase needs.
        let olds: Vec<Code> = if self.masked {
            (self.v.starts.iter().zip(&self.v.addrs).zip(&self.v.new))
                .filter(|((&starts, _), _)| starts != 0)
                // SAFETY: a verified site: mapped code, written only by us.
                .map(|((_, &addr), new)| unsafe { read(addr, new.len()) })
                .collect()
        } else {
            Vec::new()
        };
        for phase in 0..patcher.phases() {
            let mut old = olds.iter();
            for ((&addr, new), &starts) in self.v.addrs.iter().zip(&self.v.new).zip(&self.v.starts) {
                // Read in place, not copied out: a 16-byte copy of what was
                // just stored as two words stalls store-to-load forwarding.
                let w = if starts == 0 {
                    patcher.phase(addr as u64, new, phase)
                } else {
                    let before = old.next().expect("one per site with starts");
                    patcher.phase_masked(addr as u64, before, new, starts, phase)
                };
                if let Some(w) = w.as_ref() {
                    write(w.addr as usize, w.bytes.as_slice());
                }
            }
            sync(stats);
        }
        if let Some(table) = trap::withdraw() {
            self.v.trap = table.entries;
        }
    }
}
