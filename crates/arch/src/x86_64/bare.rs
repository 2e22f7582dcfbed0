//! Entries of functions no compiler prepared (*bare* sites): what the
//! first instructions of a function are, whether they can be moved, and
//! the detour that runs them elsewhere.
//!
//! At a function `f`, the site starts at `e`: `f`, or `f + 4` after an
//! `endbr64` (which stays: indirect calls land on it). `D = [e, e + L)` is
//! the shortest run of whole instructions with `L >= 5`: the bytes a
//! `jmp rel32` at `e` displaces. Traced, the function's first five bytes
//! become that jump, to a detour: `call *W(%rip)`, then `D` relocated (the
//! *copy*), then `jmp e + L`. Every byte of the jump where one of the
//! function's own instructions starts (an *interior boundary*) must be
//! `int3`, so that a thread continuing there traps and is moved to the same
//! instruction in the copy: the jump's displacement is *punned*
//! ([`landing_fits`], [`next_landing`]).
//!
//! Pure: bytes in, facts and bytes out; the runtime reads and writes.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code as Op, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock, MemoryOperand, Mnemonic, Register,
};

use crate::patch::Code;

/// `endbr64`.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
/// `int3`.
const INT3: u8 = 0xcc;
/// A `jmp rel32`'s length.
const JMP_LEN: usize = 5;
/// Longest detour [`detour`] makes: the call, at most 19 displaced bytes
/// grown to near branches and push/jmp pairs, the jump back, literals.
pub const DETOUR_MAX: usize = 160;

/// Why a function's entry is not patched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Too short for a jump, and no dead padding after it.
    #[error("shorter than 5 bytes, no padding after it")]
    TooShort,
    /// A branch inside the function goes back to its entry: every
    /// iteration would be counted as a call.
    #[error("loops back to its own entry from {from:#x}")]
    LoopsToEntry {
        /// The branch.
        from: u64,
    },
    /// An instruction of the displaced bytes cannot run elsewhere.
    #[error("cannot move `{mnemonic}` at {at:#x}")]
    Unmovable {
        /// Its mnemonic.
        mnemonic: String,
        /// Where it is.
        at: u64,
    },
    /// The displaced bytes are not instructions.
    #[error("cannot decode the instruction at {at:#x}")]
    Undecodable {
        /// Where.
        at: u64,
    },
    /// Another function begins inside the displaced bytes.
    #[error("another function starts at {at:#x}, inside the displaced bytes")]
    NeighbourInside {
        /// Where.
        at: u64,
    },
    /// No place for the detour within reach.
    #[error("no room for its detour within reach")]
    NoRoom,
    /// The copy cannot reach what the original reached.
    #[error("the instructions at {at:#x} cannot be moved to {to:#x}: out of reach")]
    Reach {
        /// The function's entry.
        at: u64,
        /// Where the detour was to be.
        to: u64,
    },
}

/// A function's entry analysed for patching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BareEntry {
    /// The function (`f`).
    pub function: u64,
    /// Where the site starts (`e`).
    pub entry: u64,
    /// Bytes the jump displaces (`L`); the first instruction's length for
    /// a trap site.
    pub len: usize,
    /// Bit `i` (1 to 4): one of the function's instructions starts at
    /// `e + i`.
    pub boundaries: u8,
    /// The `len` original bytes.
    pub displaced: Vec<u8>,
    /// No 5-byte run exists (a function shorter than a jump with no dead
    /// padding after it): the site can only be an `int3`, and `D` is the
    /// first instruction.
    pub trap_only: bool,
    /// Direct branches of the function that land inside `D` after `e`
    /// (correct, through the boundary traps, but a trap each).
    pub branches_into: Vec<u64>,
    /// The instructions to copy, as decoded at their original addresses.
    insns: Vec<Instruction>,
}

fn decode_all(code: &[u8], ip: u64) -> Vec<Instruction> {
    let mut decoder = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut out = Vec::new();
    while decoder.can_decode() {
        let insn = decoder.decode();
        if insn.is_invalid() {
            break;
        }
        out.push(insn);
    }
    out
}

/// Whether the instruction may run anywhere but where it is (once
/// relocated by the block encoder, or, for calls, as [`detour`] emits them).
fn movable(insn: &Instruction) -> bool {
    !matches!(
        insn.mnemonic(),
        Mnemonic::Int3
            | Mnemonic::Int1
            | Mnemonic::Ud0
            | Mnemonic::Ud1
            | Mnemonic::Ud2
            | Mnemonic::Loop
            | Mnemonic::Loope
            | Mnemonic::Loopne
            | Mnemonic::Jrcxz
            | Mnemonic::Jecxz
            | Mnemonic::Xbegin
            | Mnemonic::Iret
            | Mnemonic::Iretd
            | Mnemonic::Iretq
            | Mnemonic::Retf
    ) && !matches!(
        insn.code(),
        Op::Jmp_m1664 | Op::Jmp_m1632 | Op::Call_m1664 | Op::Call_m1632 | Op::Jmpe_rm32 | Op::Jmpe_rm16
    )
}

/// Whether the instruction never falls through to the next.
fn ends_flow(insn: &Instruction) -> bool {
    matches!(
        insn.flow_control(),
        FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch
    )
}

/// Whether `insn` is padding a compiler or linker leaves between functions.
fn is_padding(insn: &Instruction) -> bool {
    matches!(insn.mnemonic(), Mnemonic::Nop | Mnemonic::Int3)
}

/// Analyses the function at `function`, whose bytes from `function` on are
/// `code`: at least `size` bytes, and what follows up to `limit` (the next
/// function or the end of its section), for a short function's padding.
pub fn analyze(code: &[u8], function: u64, size: u64, limit: u64) -> Result<BareEntry, Refusal> {
    let size = (size as usize).min(code.len());
    let avail = (limit.saturating_sub(function) as usize).clamp(size, code.len());
    let skip = if code[..size].starts_with(&ENDBR64) { 4 } else { 0 };
    let entry = function + skip as u64;
    let body = decode_all(&code[skip..size], entry);
    // Every direct branch of the function: none may loop to its entry.
    let mut targets = Vec::new();
    for insn in &body {
        if matches!(
            insn.flow_control(),
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch
        ) {
            let target = insn.near_branch_target();
            if target == function || target == entry {
                return Err(Refusal::LoopsToEntry { from: insn.ip() });
            }
            targets.push((insn.ip(), target));
        }
    }
    let first = body.first().ok_or(Refusal::Undecodable { at: entry })?;
    // D: whole instructions of the function up to 5 bytes.
    let mut d = Vec::new();
    let mut len = 0usize;
    for insn in &body {
        if len >= JMP_LEN {
            break;
        }
        d.push(*insn);
        len += insn.len();
    }
    let mut trap_only = false;
    if len < JMP_LEN {
        // The function ends first: the jump may run into dead padding
        // after it, if the function never runs past its last instruction.
        let end = skip + len;
        let needed = skip + JMP_LEN;
        let tail = decode_all(&code[end..avail.min(end + 16)], entry + len as u64);
        let before = |i: &&Instruction| i.ip() < entry + JMP_LEN as u64;
        let dead = avail >= needed
            && d.last().is_some_and(ends_flow)
            && tail.iter().take_while(before).all(is_padding)
            && tail
                .iter()
                .take_while(before)
                .last()
                .is_some_and(|i| i.next_ip() >= entry + JMP_LEN as u64);
        if dead {
            len = JMP_LEN;
        } else {
            trap_only = true;
            d.truncate(1);
            len = first.len();
        }
    }
    if skip + len > code.len() {
        return Err(Refusal::Undecodable { at: entry });
    }
    if !trap_only && function + (skip + len) as u64 > limit.max(function + size as u64) {
        return Err(Refusal::NeighbourInside { at: limit });
    }
    if let Some(bad) = d.iter().find(|i| !movable(i)) {
        return Err(Refusal::Unmovable {
            mnemonic: format!("{:?}", bad.mnemonic()).to_lowercase(),
            at: bad.ip(),
        });
    }
    let mut boundaries = 0u8;
    for insn in &d[1..] {
        let at = (insn.ip() - entry) as usize;
        if (1..JMP_LEN).contains(&at) && !trap_only {
            boundaries |= 1 << at;
        }
    }
    let end = entry + len as u64;
    let branches_into = targets
        .iter()
        .filter(|&&(_, t)| t > entry && t < end)
        .map(|&(from, _)| from)
        .collect();
    Ok(BareEntry {
        function,
        entry,
        len,
        boundaries,
        displaced: code[skip..skip + len].to_vec(),
        trap_only,
        branches_into,
        insns: d,
    })
}

/// A detour's bytes, placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detour {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// After the `call *W`: the `ip` callbacks see, and the copy's start.
    pub call_return: u64,
    /// `(b, copy(b))` for `e` and every interior boundary, ascending.
    pub resume: Vec<(u64, u64)>,
}

/// The detour of `entry` at `at`, calling through the word at `word`:
/// `call *W(%rip)`, the copy, `jmp e + L` (unless the copy never falls
/// through), then the literals of the displaced calls.
pub fn detour(entry: &BareEntry, at: u64, word: u64) -> Result<Detour, Refusal> {
    let reach = Refusal::Reach {
        at: entry.entry,
        to: at,
    };
    // The code's length does not depend on where the literals are (every
    // form used has a fixed length): encode once to learn it, then with
    // the literals after it.
    let (probe, _) = encode(entry, at, word, at)?;
    let literals = (at + probe.len() as u64).next_multiple_of(8);
    let (mut bytes, resume) = encode(entry, at, word, literals)?;
    if bytes.len() != probe.len() {
        return Err(reach);
    }
    bytes.resize((literals - at) as usize, INT3);
    for insn in entry.insns.iter().filter(|i| is_call(i)) {
        bytes.extend_from_slice(&insn.next_ip().to_le_bytes());
    }
    Ok(Detour {
        bytes,
        call_return: at + 6,
        resume,
    })
}

/// A near call (iced's `FlowControl::Call` also covers `syscall`,
/// `sysenter` and `vmcall`, which push nothing and are copied as they are).
fn is_call(insn: &Instruction) -> bool {
    insn.mnemonic() == Mnemonic::Call
}

/// `(b, copy(b))` pairs.
type Resume = Vec<(u64, u64)>;

/// The detour's code at `at`, its literals at `literals`.
fn encode(entry: &BareEntry, at: u64, word: u64, literals: u64) -> Result<(Vec<u8>, Resume), Refusal> {
    let reach = Refusal::Reach {
        at: entry.entry,
        to: at,
    };
    let mut block = vec![Instruction::with1(
        Op::Call_rm64,
        MemoryOperand::with_base_displ(Register::RIP, word as i64),
    )
    .map_err(|_| reach.clone())?];
    // Index in `block` of each original instruction.
    let mut index = Vec::new();
    let mut calls = 0u64;
    for insn in &entry.insns {
        index.push(block.len());
        if is_call(insn) {
            // The original return address is pushed: nothing returns into
            // the copy.
            let lit = literals + 8 * calls;
            calls += 1;
            let mut push = Instruction::with1(
                Op::Push_rm64,
                MemoryOperand::with_base_displ(Register::RIP, lit as i64),
            )
            .map_err(|_| reach.clone())?;
            push.set_ip(insn.ip());
            block.push(push);
            let jump = match insn.code() {
                Op::Call_rel32_64 => Instruction::with_branch(Op::Jmp_rel32_64, insn.near_branch_target()),
                Op::Call_rm64 if insn.is_ip_rel_memory_operand() => Instruction::with1(
                    Op::Jmp_rm64,
                    MemoryOperand::with_base_displ(Register::RIP, insn.ip_rel_memory_address() as i64),
                ),
                Op::Call_rm64 if !uses_rsp(insn) => {
                    let mut jmp = *insn;
                    jmp.set_code(Op::Jmp_rm64);
                    Ok(jmp)
                }
                _ => {
                    return Err(Refusal::Unmovable {
                        mnemonic: "call".into(),
                        at: insn.ip(),
                    })
                }
            }
            .map_err(|_| reach.clone())?;
            block.push(jump);
        } else {
            block.push(*insn);
        }
    }
    let last = entry.insns.last().expect("D has an instruction");
    if !ends_flow(last) || is_call(last) {
        block.push(
            Instruction::with_branch(Op::Jmp_rel32_64, entry.entry + entry.len as u64)
                .map_err(|_| reach.clone())?,
        );
    }
    let result = BlockEncoder::encode(
        64,
        InstructionBlock::new(&block, at),
        BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS,
    )
    .map_err(|_| reach.clone())?;
    let mut resume = Vec::new();
    for (insn, &i) in entry.insns.iter().zip(&index) {
        let offset = result.new_instruction_offsets[i];
        if offset == u32::MAX {
            return Err(Refusal::Unmovable {
                mnemonic: format!("{:?}", insn.mnemonic()).to_lowercase(),
                at: insn.ip(),
            });
        }
        let b = insn.ip();
        if b == entry.entry || (b - entry.entry) < JMP_LEN as u64 {
            resume.push((b, at + offset as u64));
        }
    }
    // Every instruction must have come out as one (no branch rewritten
    // through memory): the resume points must be exact.
    if result.new_instruction_offsets.contains(&u32::MAX) {
        return Err(reach);
    }
    Ok((result.code_buffer, resume))
}

/// Whether the instruction's memory operand uses `rsp` (its value changes
/// once the return address is pushed).
fn uses_rsp(insn: &Instruction) -> bool {
    insn.memory_base() == Register::RSP || insn.memory_index() == Register::RSP
}

/// The window of displacements (relative to `e + 5`) a jump with these
/// boundaries may have: with an instruction starting at `e + 4`, the top
/// byte is `0xcc` (816–832 MiB below); else every `i32`.
pub fn landing_window(boundaries: u8) -> (i64, i64) {
    if boundaries & 1 << 4 != 0 {
        (-0x3400_0000, -0x3300_0001)
    } else {
        (i32::MIN as i64, i32::MAX as i64)
    }
}

/// The displacement bytes (of four) that must be `0xcc`, as a mask of
/// bits (bit `k` for byte `k`).
fn fixed(boundaries: u8) -> u8 {
    (boundaries >> 1) & 0xf
}

/// Whether `jmp rel32` at `entry` reaches `to` and puns over `boundaries`.
pub fn landing_fits(entry: u64, boundaries: u8, to: u64) -> bool {
    let Ok(rel) = i32::try_from(to.wrapping_sub(entry + JMP_LEN as u64) as i64) else {
        return false;
    };
    let bytes = rel.to_le_bytes();
    (0..4).all(|k| fixed(boundaries) >> k & 1 == 0 || bytes[k] == INT3)
}

/// The smallest `to` in `[from, until)` where [`landing_fits`] holds.
pub fn next_landing(entry: u64, boundaries: u8, from: u64, until: u64) -> Option<u64> {
    let base = entry + JMP_LEN as u64;
    let lo = (from as i128 - base as i128).max(i32::MIN as i128);
    let hi = (until as i128 - base as i128).min(i32::MAX as i128 + 1);
    // The negative displacements, then the others: in each, the i32's bits
    // as a u32 grow with it.
    for (a, b) in [(lo, hi.min(0)), (lo.max(0), hi)] {
        if a >= b {
            continue;
        }
        let (ua, ub) = (a as i32 as u32 as u64, (b - 1) as i32 as u32 as u64);
        if let Some(u) = next_fixed(ua, fixed(boundaries)).filter(|&u| u <= ub) {
            let rel = u as u32 as i32 as i128;
            return Some((base as i128 + rel) as u64);
        }
    }
    None
}

/// The smallest `y >= x` (both under 2^32) whose bytes in `mask` are
/// `0xcc`.
fn next_fixed(x: u64, mask: u8) -> Option<u64> {
    let digit = |v: u64, k: usize| (v >> (8 * k) & 0xff) as u8;
    let fix = |k: usize| mask >> k & 1 != 0;
    // The least `y` whose digits above `k` are `x`'s, digit `k` is `d`, and
    // those below are the least allowed.
    let build = |k: usize, d: u8| {
        let mut y = x >> (8 * (k + 1)) << (8 * (k + 1)) | (d as u64) << (8 * k);
        for j in 0..k {
            if fix(j) {
                y |= (INT3 as u64) << (8 * j);
            }
        }
        y
    };
    // Digits from the top while `y` equals `x`; on the first that cannot,
    // raise the lowest free digit above it (or this one, if free).
    for k in (0..4).rev() {
        let xd = digit(x, k);
        if fix(k) {
            if xd == INT3 {
                continue;
            }
            if xd < INT3 {
                return Some(build(k, INT3));
            }
            return (k + 1..4)
                .find(|&j| !fix(j) && digit(x, j) < 0xff)
                .map(|j| build(j, digit(x, j) + 1));
        }
    }
    Some(x)
}

/// The jump at `entry` to `to` (`e9 rel32`), if it puns over `boundaries`.
pub fn jump(entry: u64, boundaries: u8, to: u64) -> Option<Code> {
    if !landing_fits(entry, boundaries, to) {
        return None;
    }
    let rel = to.wrapping_sub(entry + JMP_LEN as u64) as u32;
    let mut bytes = [0xe9, 0, 0, 0, 0];
    bytes[1..].copy_from_slice(&rel.to_le_bytes());
    Code::new(&bytes)
}

#[cfg(test)]
#[path = "bare_tests.rs"]
mod tests;
