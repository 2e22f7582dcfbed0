//! The MIPS patch plans: the 004 seed's (`-pg`: `jal _mcount` ↔ NOP for
//! code within the 256 MB region, `b 1f` over a `-mlong-calls` sequence),
//! and the 001 seed's (`-fpatchable-function-entry=3/4`: `lui at,
//! %hi(ftrace_regs_caller)` / `jalr at, at` / `li t0, 0|1`, and the direct
//! call to a replacement through four NOPs) — every change one aligned
//! instruction write, each intermediate state safe to run.
//!
//! One deviation, forced by the o32 ABI: gcc puts `addiu sp, sp, -8` in the
//! delay slot of `jal _mcount` (or just before `jalr t9`), and `_mcount`
//! undoes it. A plain NOP for the call would leave the stack 8 bytes off —
//! the problem the 001 seed names for MIPS32 ("we can not atomically change
//! both"). The off form here is still one instruction: `bnel zero, zero`,
//! a branch-likely that is never taken and so annuls its delay slot, or
//! `addiu sp, sp, 8` where the adjust came before the call.

use super::encode::{self as e, reg};
use super::{trampoline, Mips};
use crate::patch::Code;
use crate::plan::{Family, Patcher, Plan, PlanError, PlanSite, State, TrampolineSpec, Write};

/// A site's form, from its original words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// `-pg` with the call in one word (`jal _mcount`, PIC `jalr t9`, or
    /// the `bal` GNU ld relaxes that to) at index `call`, its delay slot
    /// last.
    CallWord {
        /// Index of the call word.
        call: usize,
        /// How the site turns off without upsetting the stack.
        off: u32,
    },
    /// `-pg -mlong-calls`: `addr` words build `_mcount`'s address in `v1`,
    /// then `move at, ra; jalr v1; <delay>`.
    LongCall {
        /// Number of address-building words.
        addr: usize,
    },
    /// `-fpatchable-function-entry=N`: `n` NOPs at the entry.
    Entry {
        /// Number of NOPs.
        n: usize,
    },
}

impl Mips {
    /// The site's form, checked word by word.
    pub(super) fn form(&self, site: &PlanSite<'_>) -> Result<Form, PlanError> {
        let w = self.words(site.original);
        let bad = |why: &str| Err(PlanError::Form(format!("{why}: {}", crate::hex(site.original))));
        if !site.original.len().is_multiple_of(4) || !site.addr.is_multiple_of(4) || w.is_empty() {
            return bad("not whole aligned instructions");
        }
        if site.entry {
            if w.len() < 3 || w.iter().any(|&x| x != e::NOP) {
                return bad("an entry site is 3 or more NOPs");
            }
            return Ok(Form::Entry { n: w.len() });
        }
        let Some(mv) = w.iter().position(|&x| e::is_move(x, reg::AT, reg::RA)) else {
            return bad("no `move at, ra`");
        };
        if w.len() < mv + 3 {
            return bad("no call after `move at, ra`");
        }
        let call = w.len() - 2;
        let delay = w[call + 1];
        let between = &w[mv + 1..call];
        let direct = e::is_jal(w[call]) || e::is_bal(w[call]);
        match (direct, e::jalr_ra(w[call])) {
            (true, _) | (false, Some(reg::T9)) if mv == 0 => {
                let before = between.iter().find_map(|&x| e::sp_adjust(x).map(|imm| (x, imm)));
                let off = match (e::sp_adjust(delay), before) {
                    (Some(_), _) => e::bnel(reg::ZERO, reg::ZERO, 1),
                    (None, Some((word, imm))) => (word & 0xffff_0000) | (imm.wrapping_neg() as u16 as u32),
                    (None, None) => e::NOP,
                };
                if delay != e::NOP && e::sp_adjust(delay).is_none() {
                    return bad("unexpected delay slot");
                }
                Ok(Form::CallWord { call, off })
            }
            (false, Some(reg::V1)) if call == mv + 1 && (mv == 2 || (self.n64 && mv == 6)) => {
                Ok(Form::LongCall { addr: mv })
            }
            _ => bad("not a `-pg` call sequence"),
        }
    }

    fn write(&self, site: &PlanSite<'_>, index: usize, word: u32) -> Write {
        Write {
            addr: site.addr + 4 * index as u64,
            bytes: Code::new(&self.bytes(word)).expect("one word"),
        }
    }

    /// The address-building words of a long-call sequence, rebuilt for
    /// `target` from the original ones (same registers, new immediates).
    fn long_call_words(&self, original: &[u32], target: u64) -> Result<Vec<u32>, PlanError> {
        let with = |word: u32, imm: u16| (word & 0xffff_0000) | imm as u32;
        if original.len() == 2 {
            // `lui` sign-extends; a 64-bit `daddiu` after it cannot make
            // 0x7fff8000..0x7fffffff (an o32 `addiu` can).
            let built = (i64::from(e::hi(target) as i16) << 16) + i64::from(e::lo(target));
            let daddiu = e::opcode(original[1]) == 0x19;
            if !e::fits_hi_lo(target) || (daddiu && built != target as i64) {
                return Err(PlanError::Reach { from: 0, to: target });
            }
            return Ok(vec![
                with(original[0], e::hi(target)),
                with(original[1], e::lo(target) as u16),
            ]);
        }
        // n64: lui v1,%highest; lui at,%hi; daddiu v1,v1,%higher;
        // daddiu at,at,%lo; dsll32 v1,v1,0; daddu v1,v1,at.
        let [highest, higher, hi, lo] = e::parts64(target);
        let imms = [Some(highest), Some(hi), Some(higher), Some(lo), None, None];
        Ok(original
            .iter()
            .zip(imms)
            .map(|(&word, imm)| imm.map_or(word, |imm| with(word, imm)))
            .collect())
    }

    /// The words of the site in `state`, and the index of the word whose
    /// write switches it (written last when switching on, first when off).
    fn words_in(&self, site: &PlanSite<'_>, form: Form, state: State) -> Result<Vec<u32>, PlanError> {
        let mut w = self.words(site.original);
        let unsupported = |why: &str| Err(PlanError::Unsupported(why.to_string()));
        match (form, state) {
            (_, State::Original) => {}
            (Form::CallWord { call, off }, State::Off) => w[call] = off,
            (Form::CallWord { call, .. }, State::Call { target, .. }) => {
                let at = site.addr + 4 * call as u64;
                if !e::jal_reaches(at, target) {
                    return Err(PlanError::Reach { from: at, to: target });
                }
                w[call] = e::jal(target);
            }
            (Form::LongCall { .. }, State::Off) => w[0] = e::b((w.len() - 1) as i16),
            (Form::LongCall { addr }, State::Call { target, .. }) => {
                let words = self
                    .long_call_words(&w[..addr], target)
                    .map_err(|_| PlanError::Reach {
                        from: site.addr,
                        to: target,
                    })?;
                w[..addr].copy_from_slice(&words);
            }
            (Form::Entry { .. }, State::Off) => {}
            (Form::Entry { .. }, State::Call { target, regs }) => {
                if !self.reaches(site, target) {
                    return Err(PlanError::Reach {
                        from: site.addr,
                        to: target,
                    });
                }
                w[0] = e::lui(reg::AT, e::hi(target));
                w[1] = e::jalr(reg::AT, reg::AT);
                w[2] = e::li(self.t0(), if regs { 0 } else { 1 });
            }
            (Form::Entry { n }, State::Redirect { to }) => {
                if n < 4 {
                    return unsupported(
                        "a redirect needs 4 NOPs (-fpatchable-function-entry=4): with 3 it would \
                         overwrite the function's first instruction",
                    );
                }
                if !e::fits_hi_lo(to) {
                    return Err(PlanError::Reach { from: site.addr, to });
                }
                w[0] = e::lui(reg::AT, e::hi(to));
                // `addiu` on n64 too: it adds in 32 bits and sign-extends,
                // as `lui`'s sign-extended half needs (0x7fff8000.. would
                // come out wrong with `daddiu`).
                w[1] = e::addiu(reg::AT, reg::AT, e::lo(to));
                w[2] = e::jr(reg::AT);
                w[3] = e::NOP;
            }
            (_, State::Redirect { .. }) => {
                return unsupported("a `-pg` site comes after the prologue: it cannot redirect the function")
            }
        }
        Ok(w)
    }
}

impl Patcher for Mips {
    fn plan(&self, site: &PlanSite<'_>, from: State, to: State) -> Result<Plan, PlanError> {
        let form = self.form(site)?;
        let new = self.words_in(site, form, to)?;
        let old = self.words_in(site, form, from)?;
        let mut writes = Plan::EMPTY;
        match form {
            Form::CallWord { call, .. } => {
                if old[call] != new[call] {
                    writes.push(self.write(site, call, new[call]));
                }
            }
            Form::LongCall { addr } => {
                // 004: `b 1f` over the sequence while its address words
                // change (the first of them runs in the branch's delay
                // slot, harmlessly: v1 and at are scratch here); the first
                // word last.
                let off = e::b((new.len() - 1) as i16);
                if old[..addr] != new[..addr] {
                    if old[0] != off {
                        writes.push(self.write(site, 0, off));
                    }
                    for i in 1..addr {
                        if old[i] != new[i] {
                            writes.push(self.write(site, i, new[i]));
                        }
                    }
                    if new[0] != off {
                        writes.push(self.write(site, 0, new[0]));
                    }
                }
            }
            Form::Entry { .. } => writes = entry_writes(self, site, from, to, &old, &new),
        }
        Ok(writes)
    }

    fn reaches(&self, site: &PlanSite<'_>, target: u64) -> bool {
        match self.form(site) {
            Ok(Form::CallWord { call, .. }) => e::jal_reaches(site.addr + 4 * call as u64, target),
            Ok(Form::LongCall { .. }) => self.n64 || e::fits_hi_lo(target),
            // `lui at, %hi(caller)` then `jalr at, at`: no low half.
            Ok(Form::Entry { .. }) => target & 0xffff == 0 && e::fits_hi_lo(target),
            Err(_) => false,
        }
    }

    fn return_address(&self, site: &PlanSite<'_>) -> Result<u64, PlanError> {
        Ok(match self.form(site)? {
            // After the call's delay slot, which ends the site.
            Form::CallWord { .. } | Form::LongCall { .. } => site.addr + site.original.len() as u64,
            // After `li t0`, the delay slot of `jalr at, at`.
            Form::Entry { .. } => site.addr + 12,
        })
    }

    fn veneer(&self, at: u64, to: u64) -> Result<Vec<u8>, PlanError> {
        trampoline::veneer(self, at, to)
    }

    fn veneer_len(&self) -> usize {
        trampoline::veneer_len(self)
    }

    fn direct_stub(&self, _at: u64, _replacement: u64) -> Result<Option<Vec<u8>>, PlanError> {
        Ok(None)
    }

    fn trampoline(&self, at: u64, spec: &TrampolineSpec) -> Result<Vec<u8>, PlanError> {
        trampoline::trampoline(self, at, spec)
    }

    fn trampoline_align(&self, family: Family) -> u64 {
        match family {
            Family::Entry => 0x10000,
            Family::Mcount => 8,
        }
    }
}

/// The 001 seed's write orders for an entry site.
fn entry_writes(m: &Mips, site: &PlanSite<'_>, from: State, to: State, old: &[u32], new: &[u32]) -> Plan {
    let mut writes = Plan::EMPTY;
    // The words now: `old`, except where an earlier plan left harmless
    // words that `Off` does not describe (`lui at` and `li t0` stay after
    // a disable): those are rewritten whatever they hold.
    let mut cur: Vec<Option<u32>> = old.iter().map(|&w| Some(w)).collect();
    if from == State::Off {
        cur[0] = None;
        cur[2] = None;
        if cur.len() > 3 {
            cur[3] = None;
        }
    }
    let mut put = |cur: &mut Vec<Option<u32>>, i: usize, word: u32| {
        if cur[i] != Some(word) {
            writes.push(m.write(site, i, word));
            cur[i] = Some(word);
        }
    };
    // 1. Stop what the site does now: a call by its `jalr` (001: "take
    //    jalr at, at into nop"), a redirect by its `jr at`.
    let same_caller = matches!((from, to), (State::Call { target: a, .. }, State::Call { target: b, .. }) if e::hi(a) == e::hi(b));
    if matches!(from, State::Call { .. }) && !same_caller {
        put(&mut cur, 1, e::NOP);
    }
    if matches!(from, State::Redirect { .. }) && to != from {
        put(&mut cur, 2, e::NOP);
        put(&mut cur, 1, e::NOP);
    }
    match to {
        State::Original | State::Off => {
            if to == State::Original {
                for (i, &w) in new.iter().enumerate() {
                    put(&mut cur, i, w);
                }
            }
        }
        State::Call { .. } => {
            // `lui at` and `li t0` first (harmless while the `jalr` is a
            // NOP; a regs switch is this one `li t0` write), `jalr` last.
            put(&mut cur, 0, new[0]);
            put(&mut cur, 2, new[2]);
            for (i, &word) in new.iter().enumerate().skip(3) {
                put(&mut cur, i, word);
            }
            put(&mut cur, 1, new[1]);
        }
        State::Redirect { .. } => {
            // 001: nop, then B' high, B' low, the NOP after, `jr at` last.
            put(&mut cur, 1, e::NOP);
            put(&mut cur, 0, new[0]);
            put(&mut cur, 1, new[1]);
            put(&mut cur, 3, new[3]);
            put(&mut cur, 2, new[2]);
        }
    }
    writes
}

#[cfg(test)]
mod tests;
