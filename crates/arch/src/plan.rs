//! The generic patching verbs, for every instruction set: what a site must
//! become, written as an ordered list of single-instruction writes, each of
//! which leaves code that is safe to run.
//!
//! This is the kernel's `ftrace_make_nop` / `ftrace_make_call` /
//! `ftrace_modify_call` in the form the RISC ports use: a site is changed
//! one aligned instruction word at a time, and the order of the words is
//! chosen so that a thread running the function between two writes sees
//! either the old behaviour or the new one, never a mixture that breaks
//! the stack or the arguments. x86-64 sites are longer than one atomically
//! written instruction; its plans are the breakpoint protocol (an `int3` on
//! the first byte, the rest, the first byte: [`crate::BreakpointPatcher::rewrite`]).
//!
//! A [`Plan`] is a list of phases, one write each; before a phase is
//! written, every thread's instruction stream has seen the one before (on
//! x86-64 the cross-modifying sync the `int3` protocol needs, on AArch64
//! and MIPS the cache flush every write needs anyway). Many sites' plans
//! are carried out together phase by phase — the first write of every
//! site, one sync, the second of every site, one sync... — as the kernel's
//! `text_poke_bp_batch` does.

use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::patch::Code;

/// What a site does, in the terms every architecture shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// As the compiler left it: the call to `mcount`/`_mcount`, or the NOPs
    /// of `-fpatchable-function-entry`.
    Original,
    /// Traced by nobody, and ready to be switched on: the function runs as
    /// if it had not been instrumented.
    Off,
    /// Calls the trampoline at `target`. `regs` selects the variant that
    /// hands the callback every register, where the site itself encodes it
    /// (MIPS `li t0, 0|1`); elsewhere the trampoline address does.
    Call {
        /// The trampoline, or a veneer that reaches it.
        target: u64,
        /// The callback gets the register frame.
        regs: bool,
    },
    /// The function's callers end up at `to` instead (a direct call, as
    /// livepatch does): `to` is the replacement itself where the site can
    /// jump anywhere it needs to, else the stub made by
    /// [`Patcher::direct_stub`] for it.
    Redirect {
        /// Where the function's callers go.
        to: u64,
    },
}

/// One write of a plan: `bytes` replace those at `addr`. On AArch64 and
/// MIPS one aligned instruction, so a running thread sees the old word or
/// the new one; on x86-64 a part of a site the breakpoint covers, or the
/// breakpoint itself.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Write {
    /// Address of the first byte.
    pub addr: u64,
    /// The new bytes, in the target's byte order.
    pub bytes: Code,
}

impl fmt::Debug for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}: {}", self.addr, crate::hex(&self.bytes))
    }
}

/// Most writes one plan makes.
pub const MAX_WRITES: usize = 8;

/// The writes that change one site, in order: each one a phase, synced
/// before the next (see the module's documentation). Held in place, without
/// allocation (100,000 sites are planned at once), room for `N` writes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Plan<const N: usize = MAX_WRITES> {
    writes: [Write; N],
    len: u8,
}

impl<const N: usize> Plan<N> {
    /// No write.
    pub const EMPTY: Plan<N> = Plan {
        writes: [Write {
            addr: 0,
            bytes: Code::EMPTY,
        }; N],
        len: 0,
    };

    /// The plan of `writes`, in their order.
    #[inline]
    pub fn of(writes: [Write; N]) -> Plan<N> {
        Plan { writes, len: N as u8 }
    }

    /// Adds `write` as the next phase.
    ///
    /// # Panics
    /// If the plan has `N` writes already (no site form needs more than
    /// [`MAX_WRITES`]).
    pub fn push(&mut self, write: Write) {
        self.writes[self.len as usize] = write;
        self.len += 1;
    }
}

impl<const N: usize> Default for Plan<N> {
    fn default() -> Plan<N> {
        Plan::EMPTY
    }
}

impl<const N: usize> Deref for Plan<N> {
    type Target = [Write];
    fn deref(&self) -> &[Write] {
        &self.writes[..self.len as usize]
    }
}

impl<const N: usize> DerefMut for Plan<N> {
    fn deref_mut(&mut self) -> &mut [Write] {
        &mut self.writes[..self.len as usize]
    }
}

impl<const N: usize> fmt::Debug for Plan<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<const N: usize> FromIterator<Write> for Plan<N> {
    fn from_iter<I: IntoIterator<Item = Write>>(iter: I) -> Plan<N> {
        let mut plan = Plan::EMPTY;
        for write in iter {
            plan.push(write);
        }
        plan
    }
}

impl<const N: usize> IntoIterator for Plan<N> {
    type Item = Write;
    type IntoIter = std::iter::Take<std::array::IntoIter<Write, N>>;
    fn into_iter(self) -> Self::IntoIter {
        self.writes.into_iter().take(self.len as usize)
    }
}

impl<'a, const N: usize> IntoIterator for &'a Plan<N> {
    type Item = &'a Write;
    type IntoIter = std::slice::Iter<'a, Write>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, const N: usize> IntoIterator for &'a mut Plan<N> {
    type Item = &'a mut Write;
    type IntoIter = std::slice::IterMut<'a, Write>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

/// A site, as the plans see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanSite<'a> {
    /// Address of the site's first byte (the runtime address).
    pub addr: u64,
    /// The bytes the compiler left there (the whole sequence: for MIPS
    /// `-pg`, from the first instruction that loads `_mcount`'s address, or
    /// `move at, ra`, to the call's delay slot included).
    pub original: &'a [u8],
    /// The site comes from `-fpatchable-function-entry` (NOPs at the
    /// function's entry), not from `-pg`.
    pub entry: bool,
}

/// Which trampoline to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// For `-pg` sites: entered as `_mcount` is, after the prologue.
    Mcount,
    /// For `-fpatchable-function-entry` sites: entered before the
    /// function's first instruction.
    Entry,
}

/// A trampoline to generate: the callback it calls, and how.
///
/// The callback has the C signature
/// `void callback(unsigned long ip, unsigned long parent_ip, unsigned long *regs)`:
/// `ip` is the site's return address as [`Patcher::return_address`] gives
/// it, `parent_ip` the traced function's return address, `regs` the saved
/// registers (layout per architecture, see `docs/ARCHITECTURE.md`) or null.
/// The trampoline preserves every register the traced function may still
/// need (arguments, callee-saved, return address, stack pointer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrampolineSpec {
    /// The kind of site it serves.
    pub family: Family,
    /// Address of the callback.
    pub callback: u64,
    /// Hand the callback the register frame. Where the site selects it
    /// (MIPS entry sites), the trampoline obeys the site and this is ignored.
    pub regs: bool,
}

/// Why a plan cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// The bytes are not a site form this architecture knows.
    Form(String),
    /// The target is out of reach of the site's call: place a veneer near
    /// the site ([`Patcher::veneer`]) and call that.
    Reach {
        /// Where the call is.
        from: u64,
        /// Where it should go.
        to: u64,
    },
    /// The site cannot take this state (a redirect needs room the site has
    /// not got, say).
    Unsupported(String),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Form(why) => write!(f, "not a patchable site: {why}"),
            PlanError::Reach { from, to } => write!(f, "a call at {from:#x} cannot reach {to:#x}"),
            PlanError::Unsupported(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for PlanError {}

/// The generic patching verbs of one instruction set.
pub trait Patcher: Sync {
    /// The writes that take `site` from state `from` to state `to`, in the
    /// order to make them, each a phase; after each one (and its sync) the
    /// code is safe to run — on x86-64 with the breakpoint protocol's trap
    /// handler. Checks that a call reaches its target ([`PlanError::Reach`]
    /// otherwise).
    fn plan(&self, site: &PlanSite<'_>, from: State, to: State) -> Result<Plan, PlanError>;

    /// Whether the site's call can go straight to `target` (the MIPS
    /// 256 MB region of `jal`, the ±128 MB of AArch64 `bl`, the ±2 GiB of
    /// x86-64 `call rel32`, the 64 KB-aligned 32-bit address of MIPS
    /// `lui at`).
    fn reaches(&self, site: &PlanSite<'_>, target: u64) -> bool;

    /// The return address the site's call leaves for the trampoline: the
    /// `ip` the callback gets.
    fn return_address(&self, site: &PlanSite<'_>) -> Result<u64, PlanError>;

    /// A veneer placed at `at` that continues at `to` with every register
    /// the trampoline needs intact (the kernel's module PLT entries). Its
    /// length is [`Patcher::veneer_len`].
    fn veneer(&self, at: u64, to: u64) -> Result<Vec<u8>, PlanError>;

    /// Length of a veneer.
    fn veneer_len(&self) -> usize;

    /// For [`State::Redirect`]: code placed at `at` that a site's call
    /// reaches and that continues in `replacement` as if the traced
    /// function had been called, or `None` where the site jumps to the
    /// replacement itself.
    fn direct_stub(&self, at: u64, replacement: u64) -> Result<Option<Vec<u8>>, PlanError>;

    /// A trampoline placed at `at`, as machine code.
    fn trampoline(&self, at: u64, spec: &TrampolineSpec) -> Result<Vec<u8>, PlanError>;

    /// The alignment a trampoline of `family` needs (64 KB for MIPS entry
    /// sites, whose `lui at, %hi(caller)` gives no low half).
    fn trampoline_align(&self, family: Family) -> u64;
}
