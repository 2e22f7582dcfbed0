//! The breakpoint-protocol patching verbs of an instruction set: what a
//! site looks like off, on (calling a trampoline), and what a thread that
//! meets a site mid-patch
//! must do instead — the kernel's `ftrace_make_nop`, `ftrace_make_call` and
//! `ftrace_modify_call`, reduced to bytes. Writing them is the runtime's job.

use std::fmt;

use crate::plan::{Plan, Write};

/// Longest site the patching verbs handle (an x86-64 instruction's maximum).
pub const MAX_SITE_LEN: usize = 15;

/// How a site is switched, decided by the kind of site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// Off: one NOP as long as the site. On: the call sits at the very end of
    /// the site, so the return address is the first byte after the site and
    /// a thread returning from the trampoline never lands inside bytes that
    /// a later patch rewrites.
    Inline,
    /// An exit sled that starts with the function's return (XRay's `ret` +
    /// NOPs). Off: return, with a second return where the call ends. On: a
    /// call at the start, then that second return.
    ReturnSled,
    /// A run of one-byte NOPs (gcc's `-fpatchable-function-entry`) in a
    /// process whose threads may be anywhere in it: no instruction boundary
    /// of the run may move. On: a call at the end of the run whose four
    /// displacement bytes are each a one-byte instruction that changes
    /// nothing a function's entry needs, so that a thread resuming at any
    /// byte of the run still runs whole instructions. Off: the same run with
    /// a one-byte NOP where the call's opcode is. The call's target is fixed
    /// by the displacement: `disp` bytes after the run, where a *mirror* of
    /// the code jumps on to the real trampoline.
    Punned {
        /// The call's displacement.
        disp: i32,
    },
    /// The first bytes of a function no compiler prepared (a *bare* site,
    /// `docs/RUNTIME.md`, "Functions no compiler prepared"). Off: the
    /// function's own bytes. On: a `jmp rel32` to the function's detour
    /// whose displacement has `int3` at every byte where an original
    /// instruction starts (`boundaries`, bit `i` for the site's byte `i`,
    /// 1 to 4), so that a thread resuming at any original instruction
    /// traps and is moved into the detour's copy of it; or, for `trap`,
    /// an `int3` on the first byte only, the rest the function's own.
    Bare {
        /// Where the function's own instructions start inside the jump.
        boundaries: u8,
        /// On is an `int3`, not a jump.
        trap: bool,
    },
}

/// A site's bytes, without allocation (100,000 sites are patched at once):
/// up to [`MAX_SITE_LEN`] bytes, zero after the last, and their number in
/// the last byte — one 16-byte value, built, copied and compared whole.
/// Byte-aligned, so that a record holding one needs no padding (the
/// copies and compares are unaligned 16-byte moves, as fast).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Code {
    bytes: [u8; MAX_SITE_LEN + 1],
}

impl Code {
    /// No bytes.
    pub const EMPTY: Code = Code {
        bytes: [0; MAX_SITE_LEN + 1],
    };

    /// The bytes of `slice`; `None` if it is longer than [`MAX_SITE_LEN`].
    pub fn new(slice: &[u8]) -> Option<Code> {
        if slice.len() > MAX_SITE_LEN {
            return None;
        }
        let mut bytes = [0; MAX_SITE_LEN + 1];
        bytes[..slice.len()].copy_from_slice(slice);
        bytes[MAX_SITE_LEN] = slice.len() as u8;
        Some(Code { bytes })
    }

    /// The `len` bytes of `word`, little-endian (first byte lowest), which
    /// must be zero from byte `len` on; without a copy.
    #[inline]
    pub(crate) fn from_word(word: u128, len: usize) -> Code {
        debug_assert!(len <= MAX_SITE_LEN && word >> (8 * len) == 0);
        Code {
            bytes: (word | (len as u128) << (8 * MAX_SITE_LEN)).to_le_bytes(),
        }
    }

    /// The bytes as one little-endian word (first byte lowest), zero after
    /// the last; without a copy.
    #[inline]
    pub(crate) fn word(&self) -> u128 {
        u128::from_le_bytes(self.bytes) & !(0xff << (8 * MAX_SITE_LEN))
    }

    /// The bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len()]
    }

    /// Number of bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.bytes[MAX_SITE_LEN] as usize
    }

    /// True if there are no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::ops::Deref for Code {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::hex(self.as_slice()))
    }
}

/// What a thread that traps on a site mid-patch does instead of executing
/// it: the effect of the site's new instruction, emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Continue at this address (the site is a NOP).
    At(u64),
    /// Push `ret` and continue at `target` (the site calls).
    Call {
        /// The trampoline.
        target: u64,
        /// The return address the call pushes.
        ret: u64,
    },
    /// Return: pop the address to continue at (an XRay exit sled, off).
    Return,
}

/// Why a site cannot be switched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchError {
    /// No instruction form of this length for this shape.
    Length(usize),
    /// The shape is not switched by this verb (a bare site's off form is
    /// its own bytes: [`BreakpointPatcher::make_bare`]).
    Shape,
    /// The target is out of reach of the call.
    Reach {
        /// Where the call instruction would be.
        from: u64,
        /// Where it should go.
        to: u64,
    },
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchError::Length(len) => write!(f, "no patchable form for a site of {len} bytes"),
            PatchError::Shape => f.write_str("a bare site is switched by make_bare"),
            PatchError::Reach { from, to } => {
                write!(f, "a call at {from:#x} cannot reach {to:#x}")
            }
        }
    }
}

impl std::error::Error for PatchError {}

/// The layout of a trampoline slot: a few instructions that load the slot's
/// `data` word into a scratch register and jump through its `target` word.
/// The code of a slot never changes once written; only the two aligned words
/// do, which a thread reads atomically whatever moment it runs the slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotLayout {
    /// The slot's code, position-independent.
    pub code: Vec<u8>,
    /// Offset of the 8-byte data word (the ops) in the slot.
    pub data: usize,
    /// Offset of the 8-byte jump target word (the common routine).
    pub target: usize,
    /// Size of one slot (a power of two).
    pub size: usize,
}

impl SlotLayout {
    /// A slot's bytes: the code, then `data` and `target` in their words
    /// (little-endian); any gap is zero.
    pub fn slot(&self, data: u64, target: u64) -> Vec<u8> {
        let mut bytes = vec![0; self.size];
        bytes[..self.code.len()].copy_from_slice(&self.code);
        bytes[self.data..self.data + 8].copy_from_slice(&data.to_le_bytes());
        bytes[self.target..self.target + 8].copy_from_slice(&target.to_le_bytes());
        bytes
    }
}

/// The patching verbs of an instruction set whose sites are longer than
/// one atomically written instruction (x86-64): a breakpoint on the site's
/// first byte while the rest changes, then the first byte (the kernel's
/// `text_poke_bp`). What the runtime uses on the machine it runs on; the
/// generic verbs every architecture has are [`crate::Patcher`].
pub trait BreakpointPatcher: Sync {
    /// The plan that makes the site at `addr` hold `new` while threads may
    /// run it: the breakpoint on its first byte, the rest of `new`, then
    /// its first byte, three phases. A thread that meets the breakpoint
    /// meanwhile is steered as [`BreakpointPatcher::resume`] says.
    fn rewrite(&self, addr: u64, new: &Code) -> Plan<3> {
        let mut plan = Plan::EMPTY;
        for phase in 0..self.phases() {
            if let Some(write) = self.phase(addr, new, phase) {
                plan.push(write);
            }
        }
        plan
    }

    /// How many phases [`BreakpointPatcher::rewrite`]'s plans have (a batch
    /// makes each phase's write at every site, then syncs).
    fn phases(&self) -> usize;

    /// The write that phase `phase` of the plan making the site at `addr`
    /// hold `new` makes, if any: the one definition of the protocol's order,
    /// asked by a batch site by site and phase by phase (cheaper than
    /// building or keeping whole plans for 100,000 sites).
    fn phase(&self, addr: u64, new: &Code, phase: usize) -> Option<Write>;

    /// [`BreakpointPatcher::phase`] for a site where instructions start at
    /// more bytes than the first (`starts`, bit `i` for byte `i`; bit 0 is
    /// implied), old or new: a thread may resume at each of them. Every
    /// start gets the breakpoint first, with the other bytes as they are
    /// (`old`); then the other bytes change; then the starts (the general
    /// form of the kernel's order).
    fn phase_masked(&self, addr: u64, old: &Code, new: &Code, starts: u8, phase: usize) -> Option<Write>;

    /// The bytes of a bare site ([`Shape::Bare`]) at `addr` whose own first
    /// bytes are `original`: those when `target` is `None`, else the jump to
    /// `target` (or the `int3`, for a trap site).
    fn make_bare(
        &self,
        shape: Shape,
        addr: u64,
        original: &Code,
        target: Option<u64>,
    ) -> Result<Code, PatchError>;

    /// Canonical "off" bytes of a site of `len` bytes: one instruction.
    fn make_nop(&self, shape: Shape, len: usize) -> Result<Code, PatchError>;

    /// Whether a site of `len` bytes has room for a call.
    fn call_fits(&self, shape: Shape, len: usize) -> bool;

    /// "On" bytes of the site at `addr`: a call to `target`.
    fn make_call(&self, shape: Shape, addr: u64, len: usize, target: u64) -> Result<Code, PatchError>;

    /// The return address the site's call pushes: the `ip` callbacks see.
    fn return_address(&self, shape: Shape, addr: u64, len: usize) -> u64;

    /// What a thread that meets the breakpoint must do so that it behaves as
    /// if the site's new form were already there: the call to `target`, or
    /// the NOP when `target` is `None`.
    fn resume(&self, shape: Shape, addr: u64, len: usize, target: Option<u64>) -> Resume;

    /// Whether a call at `from` reaches `to`.
    fn reaches(&self, from: u64, to: u64) -> bool;

    /// The trampoline slot layout.
    fn slot_layout(&self) -> SlotLayout;
}
