//! Bare sites: the entries of functions that no compiler prepared (plain
//! `-O2` code), patched with a jump to a per-function *detour*
//! (`docs/design/UNPREPARED.md`, sections 1, 3 and 4).
//!
//! At a function `f` the patch starts at `e`: `f`, or `f + 4` after an
//! `endbr64` (which stays, for indirect calls). `D = [e, e+L)` is the
//! shortest run of whole instructions with `L >= 5`. Traced, the 5 bytes
//! at `e` become `jmp rel32` to the detour:
//!
//! ```text
//! detour:  call *W(%rip)   ; W: a data word holding the trampoline's address
//! copy:    I0' I1' ... Ik' ; D relocated (a displaced call pushes its original return address)
//!          jmp e+L         ; left out when D ends in `ret` or `jmp`
//!          literals        ; the original return addresses of displaced calls
//! ```
//!
//! The jump is *punned*: each of its bytes `e+i` (`i` in 1..=4) where an
//! original instruction starts (an *interior boundary*) is `int3`, so a
//! thread that continues there (preempted, returning, jumping in) traps,
//! and the runtime moves it to the same instruction in the copy
//! ([`Detour::resume`]). Those fixed bytes of `rel32` restrict where the
//! detour may lie: [`landing_fits`], [`next_landing`], [`landing_window`].
//!
//! Everything here is pure: bytes and addresses in, facts and bytes out.
//! [`analyze`] decides whether and how an entry can be patched,
//! [`detour()`] encodes the detour for a place, [`jump`] the patch.

use iced_x86::{Decoder, DecoderOptions, Encoder, FlowControl, Instruction, Mnemonic, OpKind, Register};
use thiserror::Error;

mod detour;
mod landing;

pub use detour::{detour, guarded_detour, Detour, DETOUR_MAX, GUARD_WORDS};
pub use landing::{jump, landing_fits, landing_window, next_landing};

/// `endbr64`, skipped: the patch starts after it.
pub const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
/// Length of the patch, `jmp rel32`.
pub const JUMP_LEN: usize = 5;

/// Why a function's entry is not patched, or not with a jump.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refusal {
    /// The function has no instruction to patch at its entry (its size is
    /// 0, or it is only an `endbr64`). A function whose instructions are
    /// shorter than 5 bytes is not refused: it gets the jump into the dead
    /// padding after it, or else [`BareEntry::trap_only`].
    #[error("shorter than 5 bytes, no padding after it")]
    TooShort,
    /// A direct `jmp` or `jcc` in the function goes to `f` or `e`: with
    /// the patch, each iteration would be counted as a call.
    #[error("loops back to its own entry from {from:#x}")]
    LoopsToEntry {
        /// The branch.
        from: u64,
    },
    /// An instruction of `D` that cannot run anywhere else: `int3`,
    /// `int n`, `ud2`, `loop`, `jrcxz`, `xbegin`, far branches, a call
    /// through `rsp`, a 16-bit branch, or one the encoder would rewrite
    /// as several instructions.
    #[error("cannot move `{mnemonic}` at {at:#x}")]
    Unmovable {
        /// Its mnemonic, lower case.
        mnemonic: String,
        /// Its address.
        at: u64,
    },
    /// The bytes at `at` in `D` are not an instruction, or are missing
    /// (fewer bytes than the function's size, or a function that runs to
    /// the end of the address space). Also: a direct branch goes to `at`, inside a displaced instruction
    /// under the jump, so the instruction that starts there is not one a
    /// linear decoding sees.
    #[error("cannot decode the instruction at {at:#x}")]
    Undecodable {
        /// Where.
        at: u64,
    },
    /// The next function (or the end of the section) comes before `e+L`.
    #[error("another function starts at {at:#x}, inside the displaced bytes")]
    NeighbourInside {
        /// Where it starts.
        at: u64,
    },
    /// No place for the detour within reach (the runtime's verdict).
    #[error("no room for its detour within reach")]
    NoRoom,
    /// The detour would hold an instruction whose branch target or
    /// RIP-relative operand `to` is out of `rel32` reach. `at` is the
    /// original address the instruction stands for: the displaced
    /// instruction for its copy, `e` for the call through the word, the
    /// last displaced instruction for the jump back.
    #[error("the code for {at:#x} cannot reach {to:#x} from the detour")]
    Reach {
        /// The original instruction.
        at: u64,
        /// The target.
        to: u64,
    },
}

/// A function's entry analysed for patching (pure: bytes in, facts out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BareEntry {
    /// `f`, the function's address.
    pub function: u64,
    /// `e`: `f`, or `f + 4` after `endbr64`.
    pub entry: u64,
    /// `L`, the number of displaced bytes: at least 5 for the jump form;
    /// with [`trap_only`](Self::trap_only), the first instruction's length.
    /// When the function is shorter than 5 bytes and dead padding follows
    /// it, `D` ends in the padding (whole padding instructions).
    pub len: usize,
    /// Bit `i` (`i` in 1..=4) set: an instruction of the function starts
    /// at `e + i`. Padding instructions are not boundaries (nothing runs
    /// them), so their bytes of the jump are free.
    pub boundaries: u8,
    /// The `L` original bytes of `D`.
    pub displaced: Vec<u8>,
    /// No 5-byte `D` exists (the function is shorter and no dead padding
    /// follows it): `D` is the first instruction only, `boundaries` is 0,
    /// and the runtime writes an `int3` at `e` instead of a jump (its
    /// handler can still send the thread to a detour).
    pub trap_only: bool,
    /// Addresses of the direct branches (`jmp`, `jcc`, `call`) in the
    /// function whose target lies in `(e, e+L)`. Those that land on an
    /// interior boundary trap into the copy when the jump is on (a branch
    /// inside `D` itself stays in the copy instead); the runtime counts
    /// them.
    pub branches_into: Vec<u64>,
}

impl BareEntry {
    /// `e` and the interior boundaries, ascending: the instructions the
    /// detour copies and where a thread may continue.
    pub fn starts(&self) -> Vec<u64> {
        std::iter::once(self.entry)
            .chain(
                (1..JUMP_LEN as u8)
                    .filter(|i| self.boundaries >> i & 1 != 0)
                    .map(|i| self.entry.wrapping_add(u64::from(i))),
            )
            .collect()
    }
}

/// Analyses the function at `function` whose code is `code`: the bytes
/// from `function` on, at least `size` of them (with fewer, the first
/// missing one is [`Refusal::Undecodable`]), possibly followed by what comes after the function up to
/// `limit` (the next function's start or the section's end), so that dead
/// padding after a short function can be displaced. A `limit` at or below
/// `function` is read as "nothing after the function".
///
/// The whole function is decoded: every direct branch is checked (a stretch
/// of undecodable bytes ends that check, it is not a refusal unless it is
/// in `D`).
pub fn analyze(code: &[u8], function: u64, size: u64, limit: u64) -> Result<BareEntry, Refusal> {
    let fn_end = match function.checked_add(size) {
        // Room for the longest `D` past the end of the address space.
        Some(end) if end.checked_add(32).is_some() => end,
        _ => return Err(Refusal::Undecodable { at: function }),
    };
    let Some(body) = usize::try_from(size).ok().and_then(|size| code.get(..size)) else {
        // Fewer bytes than the function has.
        return Err(Refusal::Undecodable {
            at: function + code.len() as u64,
        });
    };
    let skip = if body.starts_with(&ENDBR64) {
        ENDBR64.len()
    } else {
        0
    };
    let entry = function.wrapping_add(skip as u64);
    if size <= skip as u64 {
        return Err(Refusal::TooShort);
    }
    let limit = if limit > function { limit } else { fn_end };
    let scan = Scan::new(body, function, entry);
    let Some(first) = scan.head.first() else {
        // Nothing decodes at `e`, inside the function.
        return Err(Refusal::Undecodable { at: entry });
    };
    let last = scan.head.last().unwrap_or(first);
    let end = last.next_ip();
    let (len, boundaries, trap_only) = if end >= entry + JUMP_LEN as u64 {
        (end - entry, interior(&scan.head, entry), false)
    } else if end < fn_end {
        return Err(Refusal::Undecodable { at: end });
    } else {
        let pad = ends_flow(last)
            .then(|| {
                padding_end(
                    code,
                    (end - function) as usize,
                    skip + JUMP_LEN,
                    (limit - function) as usize,
                )
            })
            .flatten();
        match pad {
            Some(pad_end) => ((pad_end - skip) as u64, interior(&scan.head, entry), false),
            None => (first.len() as u64, 0, true),
        }
    };
    if limit < entry + len {
        return Err(Refusal::NeighbourInside { at: limit });
    }
    let copied = if trap_only {
        &scan.head[..1]
    } else {
        &scan.head[..]
    };
    for insn in copied {
        check_movable(insn)?;
    }
    let mut branches_into = Vec::new();
    for &(from, target, is_call) in &scan.branches {
        if !is_call && (target == function || target == entry) {
            return Err(Refusal::LoopsToEntry { from });
        }
        if target > entry && target < entry + len {
            let i = target - entry;
            if !trap_only && i < JUMP_LEN as u64 && boundaries >> i & 1 == 0 {
                return Err(Refusal::Undecodable { at: target });
            }
            branches_into.push(from);
        }
    }
    let len = len as usize;
    let displaced = code
        .get(skip..skip + len)
        .ok_or(Refusal::Undecodable { at: entry })?
        .to_vec();
    Ok(BareEntry {
        function,
        entry,
        len,
        boundaries,
        displaced,
        trap_only,
        branches_into,
    })
}

/// What one pass over a function finds.
struct Scan {
    /// The instructions that start in `[e, e+5)`, in order.
    head: Vec<Instruction>,
    /// `(branch, target, is a call)` for every direct branch.
    branches: Vec<(u64, u64, bool)>,
}

impl Scan {
    fn new(body: &[u8], function: u64, entry: u64) -> Scan {
        let mut decoder = Decoder::with_ip(64, body, function, DecoderOptions::NONE);
        let mut insn = Instruction::default();
        let (mut head, mut branches) = (Vec::new(), Vec::new());
        while decoder.can_decode() {
            decoder.decode_out(&mut insn);
            if insn.is_invalid() {
                break;
            }
            if insn.ip() >= entry && insn.ip() < entry + JUMP_LEN as u64 {
                head.push(insn);
            }
            if let Some(target) = direct_target(&insn) {
                branches.push((insn.ip(), target, insn.is_call_near()));
            }
        }
        Scan { head, branches }
    }
}

/// The target of a direct near branch (`jmp`, `jcc`, `call`, `loop`,
/// `jrcxz`, `xbegin`).
fn direct_target(insn: &Instruction) -> Option<u64> {
    matches!(
        insn.op0_kind(),
        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
    )
    .then(|| insn.near_branch_target())
}

/// The interior-boundary mask of the instructions `head` that start at
/// `entry` on.
fn interior(head: &[Instruction], entry: u64) -> u8 {
    head.iter()
        .map(|insn| insn.ip() - entry)
        .filter(|&i| i > 0 && i < JUMP_LEN as u64)
        .fold(0, |mask, i| mask | 1 << i)
}

/// Whether `insn` never falls through: a near or far `ret`, a direct or
/// indirect `jmp`.
fn ends_flow(insn: &Instruction) -> bool {
    matches!(insn.mnemonic(), Mnemonic::Ret | Mnemonic::Retf | Mnemonic::Jmp)
}

/// Where the dead padding that starts at offset `from` of `code` ends, once
/// it reaches `need`: whole units of `int3`, `nop`, zero bytes and
/// multi-byte NOPs, all before `limit`; `None` if something else comes
/// first.
fn padding_end(code: &[u8], from: usize, need: usize, limit: usize) -> Option<usize> {
    let code = &code[..limit.min(code.len())];
    let mut at = from;
    while at < need {
        at += match *code.get(at)? {
            0xcc | 0x90 | 0x00 => 1,
            _ => {
                let insn = Decoder::with_ip(64, &code[at..], 0, DecoderOptions::NONE).decode();
                if insn.is_invalid() || insn.mnemonic() != Mnemonic::Nop {
                    return None;
                }
                insn.len()
            }
        };
    }
    Some(at)
}

/// `Ok` if `insn` can run relocated in a detour.
fn check_movable(insn: &Instruction) -> Result<(), Refusal> {
    let through_rsp = insn.is_call_near_indirect()
        && (insn.memory_base() == Register::RSP
            || (insn.op0_kind() == OpKind::Register && insn.op0_register() == Register::RSP));
    let stuck = matches!(
        insn.flow_control(),
        FlowControl::Interrupt | FlowControl::Exception
    ) || insn.is_loop()
        || insn.is_loopcc()
        || insn.is_jcx_short()
        || insn.mnemonic() == Mnemonic::Xbegin
        || insn.is_jmp_far()
        || insn.is_call_far()
        || insn.is_jmp_far_indirect()
        || insn.is_call_far_indirect()
        || insn.op0_kind() == OpKind::NearBranch16
        || (insn.is_call_near_indirect() && insn.code() != iced_x86::Code::Call_rm64)
        || through_rsp
        || Encoder::new(64).encode(insn, insn.ip()).is_err();
    if stuck {
        return Err(unmovable(insn));
    }
    Ok(())
}

/// The refusal of `insn`.
fn unmovable(insn: &Instruction) -> Refusal {
    Refusal::Unmovable {
        mnemonic: format!("{:?}", insn.mnemonic()).to_lowercase(),
        at: insn.ip(),
    }
}

#[cfg(test)]
mod analyze_tests;
#[cfg(test)]
mod build;
#[cfg(test)]
mod detour_tests;
#[cfg(test)]
mod landing_tests;
