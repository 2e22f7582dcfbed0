//! The AArch64 patch plans, as the kernel's arm64 ftrace makes them.
//!
//! Entry sites (`-fpatchable-function-entry=2`, two NOPs before the
//! prologue) take the forms
//!
//! | state                 | word 0        | word 1      |
//! |-----------------------|---------------|-------------|
//! | `Original`            | `nop`         | `nop`       |
//! | `Off`                 | `mov x9, x30` | `nop`       |
//! | `Call { target }`     | `mov x9, x30` | `bl target` |
//! | `Redirect { to }`     | `mov x9, x30` | `bl to`     |
//!
//! (`Off` is `ftrace_init_nop`: the `mov` runs harmlessly, `x9` being a
//! temporary at a function's entry, and from then on switching the site is
//! a single-word write.) The `bl` leaves the function's own return address
//! in `x9` for the trampoline, which returns with `x30 = x9`. A redirect's
//! `to` is a [`Patcher::direct_stub`] that moves `x9` back into `x30`.
//!
//! `-pg` sites are the `bl _mcount` after the prologue: `Off` is a `nop`,
//! `Call { target }` a `bl target`; they cannot redirect (the prologue has
//! already run).
//!
//! A plan writes the words that change, one aligned word at a time, so that
//! no thread ever runs a `bl` whose `mov x9, x30` is missing: when the
//! second word becomes a `nop` it goes first, otherwise the first word goes
//! first. `Call { regs }` is ignored: the trampoline's address says whether
//! it hands over the registers, so switching is one `bl` rewrite.

use super::encode::{bl, br, decode_bl, ldr_literal, mov, reg, NOP};
use super::Aarch64;
use crate::patch::Code;
use crate::plan::{Family, Patcher, Plan, PlanError, PlanSite, State, TrampolineSpec, Write};

/// `mov x9, x30`, the first word of an enabled entry site.
pub const MOV_X9_LR: u32 = mov(reg::X9, reg::LR);

/// Length of an entry site (`-fpatchable-function-entry=2`).
pub const ENTRY_SITE_LEN: usize = 8;
/// Length of a `-pg` site (`bl _mcount`).
pub const MCOUNT_SITE_LEN: usize = 4;

/// Length of a veneer: `ldr x16, <literal>; br x16; .quad to`.
pub const VENEER_LEN: usize = 16;

impl Aarch64 {
    /// Checks that `site.original` is a form the plans know.
    fn check_form(site: &PlanSite<'_>) -> Result<(), PlanError> {
        let words: Vec<u32> = site.original.chunks(4).filter_map(Aarch64::word).collect();
        if site.addr & 3 != 0 {
            return Err(PlanError::Form(format!(
                "site at {:#x} is not word-aligned",
                site.addr
            )));
        }
        let ok = if site.entry {
            site.original.len() == ENTRY_SITE_LEN && words == [NOP, NOP]
        } else {
            site.original.len() == MCOUNT_SITE_LEN && decode_bl(words[0], site.addr).is_some()
        };
        if ok {
            Ok(())
        } else {
            let want = if site.entry { "nop; nop" } else { "bl _mcount" };
            Err(PlanError::Form(format!(
                "expected `{want}` at {:#x}, found {}",
                site.addr,
                crate::hex(site.original)
            )))
        }
    }

    /// Address of the site's `bl` (its last word).
    fn call_addr(site: &PlanSite<'_>) -> u64 {
        if site.entry {
            site.addr + 4
        } else {
            site.addr
        }
    }

    /// `bl to` at the site's call word, or [`PlanError::Reach`].
    fn site_bl(site: &PlanSite<'_>, to: u64) -> Result<u32, PlanError> {
        let from = Self::call_addr(site);
        bl(from, to).ok_or(PlanError::Reach { from, to })
    }

    /// The words of `site` in `state` (the site's form already checked).
    fn words_in(site: &PlanSite<'_>, state: State) -> Result<Vec<u32>, PlanError> {
        if site.entry {
            Ok(match state {
                State::Original => vec![NOP, NOP],
                State::Off => vec![MOV_X9_LR, NOP],
                State::Call { target, .. } => vec![MOV_X9_LR, Self::site_bl(site, target)?],
                State::Redirect { to } => vec![MOV_X9_LR, Self::site_bl(site, to)?],
            })
        } else {
            Ok(match state {
                State::Original => vec![Aarch64::word(site.original).unwrap_or(NOP)],
                State::Off => vec![NOP],
                State::Call { target, .. } => vec![Self::site_bl(site, target)?],
                State::Redirect { .. } => {
                    return Err(PlanError::Unsupported(format!(
                        "the -pg site at {:#x} runs after the prologue and cannot redirect",
                        site.addr
                    )))
                }
            })
        }
    }

    /// `ldr x16, <literal>; br x16` placed at `at` after `prefix`, then the
    /// literal `to`, 8-aligned (a `nop` pads it when needed), so one 8-byte
    /// store can retarget it atomically.
    pub(super) fn jump_via_x16(at: u64, prefix: &[u32], to: u64) -> Result<Vec<u8>, PlanError> {
        if at & 3 != 0 {
            return Err(PlanError::Unsupported(format!(
                "code at {at:#x} is not word-aligned"
            )));
        }
        let mut words = prefix.to_vec();
        let ldr_at = at + 4 * words.len() as u64;
        let mut lit = ldr_at + 8;
        let pad = lit & 7 != 0;
        if pad {
            lit += 4;
        }
        words.push(ldr_literal(reg::X16, ldr_at, lit).expect("literal is near"));
        words.push(br(reg::X16));
        if pad {
            words.push(NOP);
        }
        let mut code = Aarch64::code(&words);
        code.extend_from_slice(&to.to_le_bytes());
        Ok(code)
    }
}

impl Patcher for Aarch64 {
    fn plan(&self, site: &PlanSite<'_>, from: State, to: State) -> Result<Plan, PlanError> {
        Self::check_form(site)?;
        let old = Self::words_in(site, from)?;
        let new = Self::words_in(site, to)?;
        let mut writes: Plan = old
            .iter()
            .zip(&new)
            .enumerate()
            .filter(|(_, (o, n))| o != n)
            .map(|(i, (_, n))| Write {
                addr: site.addr + 4 * i as u64,
                bytes: Code::new(&n.to_le_bytes()).expect("one word"),
            })
            .collect();
        // Entry sites: the `bl` (word 1) must never run without the
        // `mov x9, x30` (word 0) before it. Write word 0 first, except when
        // word 1 becomes a `nop` (disabling: the `bl` goes first).
        if site.entry && new[1] == NOP {
            writes.reverse();
        }
        Ok(writes)
    }

    fn reaches(&self, site: &PlanSite<'_>, target: u64) -> bool {
        bl(Self::call_addr(site), target).is_some()
    }

    fn return_address(&self, site: &PlanSite<'_>) -> Result<u64, PlanError> {
        Self::check_form(site)?;
        Ok(Self::call_addr(site) + 4)
    }

    /// `ldr x16, #8; br x16; .quad to`, at an 8-aligned `at` (so the
    /// literal is aligned; [`PlanError::Unsupported`] otherwise).
    ///
    /// The literal form rather than the kernel's `adrp x16; add x16; br x16`:
    /// in a process the trampolines live in the tracer's own mapping, which
    /// may be farther than the ±4 GiB of `adrp` from the traced code (shared
    /// libraries and executables sit terabytes apart on 48-bit layouts); the
    /// literal reaches any address, does not depend on where the veneer is
    /// copied, and can be retargeted with one aligned 8-byte store. It
    /// clobbers only `x16`, the register the ABI gives veneers, and keeps
    /// `x9` (the parent's return address) and `x30` (the return into the
    /// traced function).
    fn veneer(&self, at: u64, to: u64) -> Result<Vec<u8>, PlanError> {
        if at & 7 != 0 {
            return Err(PlanError::Unsupported(format!(
                "a veneer at {at:#x} is not 8-aligned"
            )));
        }
        Self::jump_via_x16(at, &[], to)
    }

    fn veneer_len(&self) -> usize {
        VENEER_LEN
    }

    /// `mov x30, x9; ldr x16, <literal>; br x16; nop; .quad replacement`
    /// (24 bytes at an 8-aligned `at`). Entered from an entry site's `bl`
    /// with `x9` = the caller's return address: the replacement runs with
    /// the caller's `x30`, arguments and stack, and returns to the caller.
    /// `br x16` lands on a `bti c` of a replacement built with BTI.
    fn direct_stub(&self, at: u64, replacement: u64) -> Result<Option<Vec<u8>>, PlanError> {
        Self::jump_via_x16(at, &[mov(reg::LR, reg::X9)], replacement).map(Some)
    }

    fn trampoline(&self, at: u64, spec: &TrampolineSpec) -> Result<Vec<u8>, PlanError> {
        super::trampoline::trampoline(at, spec)
    }

    fn trampoline_align(&self, _family: Family) -> u64 {
        16
    }
}

#[cfg(test)]
#[path = "test_tools.rs"]
mod test_tools;

#[cfg(test)]
#[path = "encode_tests.rs"]
mod encode_tests;

#[cfg(test)]
#[path = "plan_tests.rs"]
mod plan_tests;

#[cfg(test)]
#[path = "trampoline_tests.rs"]
mod trampoline_tests;
