//! The bytes each site had before the runtime took it over, put back when
//! `fntrace attach` detaches (and taken over again when it attaches once
//! more): a process we attached to is left with the code it had — `call
//! __fentry__`, `call mcount`, an XRay sled's jump — not with our NOPs.
//!
//! Only sites whose original form differs from the canonical NOP are kept
//! (`-fpatchable-function-entry` NOPs are already canonical). Both ways go
//! through a live [`Batch`]: each site is verified, then written with the
//! breakpoint protocol while the program's threads run.

use fntrace_arch::Code;

use crate::state::State;
use crate::text::{self, Batch, Poke};

/// What `State::set_original` did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swapped {
    /// Sites written.
    pub written: usize,
    /// Sites left as they were (not in the expected form, or refused).
    pub refused: usize,
}

impl State {
    /// `original`: puts the original bytes back on every site that had
    /// other bytes than its canonical NOP (every site must be a NOP: no ops
    /// registered); else makes those sites canonical NOPs again.
    pub fn set_original(&mut self, original: bool) -> Swapped {
        let mut done = Swapped::default();
        let patcher = self.patcher;
        let mut writer = self.writer;
        writer.live = true;
        for module in self.mods.iter_mut().flatten() {
            if module.originals.is_empty() {
                continue;
            }
            let ranges = text::ranges(&module.loaded);
            let mut batch = Batch::new(&ranges, writer, module.originals.len());
            let mut keys = Vec::with_capacity(module.originals.len());
            for &(addr, orig) in &module.originals {
                let Ok(i) = module.sites.binary_search_by_key(&addr, |s| s.addr) else {
                    continue;
                };
                let site = module.sites[i];
                let Ok(nop) = patcher.make_nop(site.shape, site.cur.len()) else {
                    continue;
                };
                let (old, new): (Code, Code) = if original { (nop, orig) } else { (orig, nop) };
                if site.cur != old {
                    done.refused += 1;
                    continue;
                }
                let poke = Poke {
                    addr,
                    old,
                    new,
                    resume: patcher.resume(site.shape, addr as u64, site.cur.len(), None),
                };
                match batch.add(i, &poke) {
                    Ok(()) => {
                        module.sites[i].cur = new;
                        keys.push(i);
                    }
                    Err(_) => done.refused += 1,
                }
            }
            let refused = batch.write(&mut self.stats.batch);
            for r in &refused {
                module.sites[r.key].cur = r.now;
            }
            done.refused += refused.len();
            done.written += keys.len() - refused.len();
        }
        done
    }
}
