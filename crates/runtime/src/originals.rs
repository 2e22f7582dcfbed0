//! The bytes each site had before the runtime took it over, put back when
//! `fntrace attach` detaches (and taken over again when it attaches once
//! more): a process we attached to is left with the code it had — `call
//! __fentry__`, `call mcount`, an XRay sled's jump — not with our NOPs.
//!
//! The sites whose original form differs from the canonical NOP have their
//! original bytes in their module's sparse `ModState::originals`; only they
//! are written (`-fpatchable-function-entry` NOPs are already canonical). Both ways go
//! through a live [`Batch`]: each site is verified, then written with the
//! breakpoint protocol while the program's threads run.

use fntrace_arch::{BreakpointPatcher, Code};

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
        let ids: Vec<usize> = self.core.modules().map(|(m, _)| m).collect();
        for m in ids {
            let (Some(module), Some(records)) = (self.mods[m].as_ref(), self.core.module(m)) else {
                continue;
            };
            let ranges = text::ranges(&module.loaded);
            let mut batch = Batch::new(&ranges, writer, 0);
            // (site, bytes written) of the pokes the batch took.
            let mut taken: Vec<(usize, Code)> = Vec::new();
            for &(i, orig) in &module.originals {
                let i = i as usize;
                let Some(site) = records.sites.get(i).map(|r| &r.data) else {
                    continue;
                };
                let Ok(nop) = patcher.make_nop(site.shape, site.cur.len()) else {
                    continue;
                };
                let (old, new): (Code, Code) = if original { (nop, orig) } else { (orig, nop) };
                if site.cur != old {
                    done.refused += 1;
                    continue;
                }
                let poke = Poke {
                    addr: site.addr,
                    old,
                    new,
                    resume: patcher.resume(site.shape, site.addr as u64, site.cur.len(), None),
                    starts: 0,
                };
                match batch.add(i, &poke) {
                    Ok(()) => taken.push((i, new)),
                    Err(_) => done.refused += 1,
                }
            }
            if taken.is_empty() {
                continue;
            }
            let refused = batch.write(&mut self.stats.batch);
            for (i, new) in &taken {
                let now = refused.iter().find(|r| r.key == *i).map_or(*new, |r| r.now);
                if let Some(d) = self.core.site_data_mut(m, *i) {
                    d.cur = now;
                }
            }
            done.refused += refused.len();
            done.written += taken.len() - refused.len();
        }
        done
    }
}
