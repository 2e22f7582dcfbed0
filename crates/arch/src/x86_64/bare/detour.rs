//! The detour of a bare entry: `call *W(%rip)`, the displaced instructions
//! relocated with iced-x86's `BlockEncoder`, the jump back, and the
//! literals of displaced calls.
//!
//! The block encoder finds the targets of branches and RIP-relative
//! operands among the block's instructions by their original addresses.
//! Here each instruction gets a made-up address instead, unique and equal
//! to no target: a branch inside `D` is pointed at its target's made-up
//! address (so it stays in the copy), a displaced call's `push` at its
//! literal's, and everything else keeps its absolute target — even one
//! that lies in `D` (`lea rdi, [rip+f]` must still give `f`, not the copy).
//!
//! A library function's detour starts with a guard ([`guarded_detour`]):
//! it skips the call through `W` when the caller's return address lies in
//! one of two ranges kept in words after `W`, so that the same detour
//! traces only the program's calls into the library, or every caller but
//! the library itself and the runtime, by two stores.

use std::collections::BTreeSet;

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code as Op, Decoder, DecoderOptions, Instruction, InstructionBlock,
    MemoryOperand, Register,
};

use super::{check_movable, direct_target, ends_flow, unmovable, BareEntry, Refusal, JUMP_LEN};

/// Longest detour [`detour`] ever makes, in bytes. The bound: the call
/// through the word (6 bytes); at most 5 copied instructions (they all
/// start at `e+4` or before), each at most 15 bytes relocated (an
/// instruction's maximum; a displaced call becomes a 6-byte `push` and a
/// `jmp` of 5 or 6; one the encoder would rewrite as several is
/// refused); the jump back (5); at most 7 bytes of alignment and one
/// 8-byte literal (only the last instruction can be a call: the others
/// are shorter than 5 bytes): 6 + 75 + 5 + 7 + 8 = 101. `detour` checks
/// it all the same.
/// The guard adds at most 90 bytes (15 instructions: 3 loads of 5 bytes,
/// 6 of 7, 3 branches of at most 6, and 4 one-byte ones).
pub const DETOUR_MAX: usize = 224;

/// Where the guard's words are, after `W`: ranges A, B and T, each a start
/// and a length (`W + GUARD_WORDS + 16 * k` and `+ 8`). `r` lies in a
/// range when `r - start < length`, unsigned: a length of 0 is no range,
/// and one that wraps around (`start` above the end) is everything outside
/// `[end, start)`.
pub const GUARD_WORDS: u64 = 32;

/// Length of `call *W(%rip)`.
const CALL_WORD_LEN: u64 = 6;

/// A detour's bytes, placed at a given address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detour {
    /// The code and, after it, its literals.
    pub bytes: Vec<u8>,
    /// The address right after the `call *W` (the `ip` callbacks see):
    /// the detour's address + 6.
    pub call_return: u64,
    /// `(b, copy(b))` for `e` and every interior boundary, ascending by
    /// `b`: where a thread that was at original boundary `b` continues.
    pub resume: Vec<(u64, u64)>,
}

/// One instruction of the detour.
struct Piece {
    insn: Instruction,
    /// The copied instruction it stands for (the first for the call
    /// through the word, the last for the jump back).
    of: usize,
    /// Where a thread at that instruction's original address resumes.
    resume: bool,
}

/// The detour for `entry` at address `at`, calling through the word at
/// `word`. Correct for any `at`; refused ([`Refusal::Reach`]) when a
/// target is out of `rel32` reach of the detour.
pub fn detour(entry: &BareEntry, at: u64, word: u64) -> Result<Detour, Refusal> {
    build(entry, at, word, false)
}

/// [`detour`] with a guard before the call through `word`, which every
/// register but the flags survives (the flags are dead at an entry). The
/// caller, by its return address `r`, is skipped when it lies in range A
/// or B and not in range T (the tracer's return trampolines: a function
/// whose return was hijacked tail-calls here), a range being a start and
/// a length in the words after `W` ([`GUARD_WORDS`]: A, B, T):
///
/// ```text
///     push rax
///     mov  rax, [rsp+8]            ; r
///     sub  rax, [A.start]
///     cmp  rax, [A.length]
///     jb   1f                      ; in A
///     mov  rax, [rsp+8]
///     sub  rax, [B.start]
///     cmp  rax, [B.length]
/// 1:  jae  2f                      ; in neither: traced
///     mov  rax, [rsp+8]
///     sub  rax, [T.start]
///     cmp  rax, [T.length]
///     cmc                          ; CF: not in T
/// 2:  pop  rax                     ; the flags stay
///     jb   copy                    ; skipped
///     call [rip+W]
/// copy: ...
/// ```
pub fn guarded_detour(entry: &BareEntry, at: u64, word: u64) -> Result<Detour, Refusal> {
    build(entry, at, word, true)
}

fn build(entry: &BareEntry, at: u64, word: u64, guard: bool) -> Result<Detour, Refusal> {
    let copied = copied(entry)?;
    let last = copied.len() - 1;
    if !fits(word, at.wrapping_add(CALL_WORD_LEN)) || (guard && !fits(word + GUARD_WORDS + 40, at)) {
        return Err(Refusal::Reach {
            at: entry.entry,
            to: word,
        });
    }
    let back = (!ends_flow(&copied[last])).then(|| copied[last].next_ip());
    let mut names = Names::new(copied.iter().flat_map(targets).chain([word]).chain(back));
    let copy_names: Vec<u64> = copied.iter().map(|_| names.next()).collect();

    let piece = |insn: Instruction, name: u64, of: usize, resume: bool| {
        let mut insn = insn;
        insn.set_ip(name);
        Piece { insn, of, resume }
    };
    let mut code = Vec::new();
    if guard {
        let (pop, check_t) = (names.next(), names.next());
        let (rax, rsp) = (Register::RAX, Register::RSP);
        let ret = MemoryOperand::with_base_displ(rsp, 8);
        let err = |_| Refusal::Undecodable { at };
        let op2 = |op: Op, k: u64| {
            let word = MemoryOperand::with_base_displ(Register::RIP, (word + GUARD_WORDS + 8 * k) as i64);
            Instruction::with2(op, rax, word).map_err(err)
        };
        let branch = |op: Op, to: u64| Instruction::with_branch(op, to).map_err(err);
        let load = Instruction::with2(Op::Mov_r64_rm64, rax, ret).map_err(err)?;
        let guard = [
            (Instruction::with1(Op::Push_r64, rax).map_err(err)?, names.next()),
            (load, names.next()),
            (op2(Op::Sub_r64_rm64, 0)?, names.next()),
            (op2(Op::Cmp_r64_rm64, 1)?, names.next()),
            (branch(Op::Jb_rel32_64, check_t)?, names.next()),
            (load, names.next()),
            (op2(Op::Sub_r64_rm64, 2)?, names.next()),
            (op2(Op::Cmp_r64_rm64, 3)?, names.next()),
            (branch(Op::Jae_rel32_64, pop)?, check_t),
            (load, names.next()),
            (op2(Op::Sub_r64_rm64, 4)?, names.next()),
            (op2(Op::Cmp_r64_rm64, 5)?, names.next()),
            (Instruction::with(Op::Cmc), names.next()),
            (Instruction::with1(Op::Pop_r64, rax).map_err(err)?, pop),
            (branch(Op::Jb_rel32_64, copy_names[0])?, names.next()),
        ];
        code.extend(guard.into_iter().map(|(insn, name)| piece(insn, name, 0, false)));
    }
    let call_at = code.len();
    code.push(piece(memory(Op::Call_rm64, word)?, names.next(), 0, false));
    let mut literals = Vec::new();
    for (k, original) in copied.iter().enumerate() {
        // Each target outside the copy must be in reach.
        let inside = |to: u64| direct_target(original) == Some(to) && copied.iter().any(|c| c.ip() == to);
        for to in targets(original).filter(|&to| !inside(to)) {
            reach(original, to, at)?;
        }
        if original.is_call_near() || original.is_call_near_indirect() {
            // Nothing ever returns into the copy: push the original return
            // address and jump.
            let literal = names.next();
            let value = Instruction::with_declare_qword_1(original.next_ip());
            literals.push(piece(value, literal, k, false));
            code.push(piece(memory(Op::Push_rm64, literal)?, copy_names[k], k, true));
            let jmp = if original.is_call_near() {
                Instruction::with_branch(Op::Jmp_rel32_64, original.near_branch_target())
                    .map_err(|_| unmovable(original))?
            } else {
                let mut jmp = *original;
                jmp.set_code(Op::Jmp_rm64);
                jmp
            };
            code.push(piece(jmp, names.next(), k, false));
            continue;
        }
        let mut insn = *original;
        if let Some(target) = direct_target(original) {
            match copied.iter().position(|c| c.ip() == target) {
                Some(j) => insn.set_near_branch64(copy_names[j]),
                // Inside the jump, where no instruction starts.
                None if target > entry.entry && target < entry.entry.saturating_add(JUMP_LEN as u64) => {
                    return Err(Refusal::Undecodable { at: target })
                }
                None => {}
            }
        }
        code.push(piece(insn, copy_names[k], k, true));
    }
    if let Some(back) = back {
        reach(&copied[last], back, at)?;
        let jmp = Instruction::with_branch(Op::Jmp_rel32_64, back).map_err(|_| unmovable(&copied[last]))?;
        code.push(piece(jmp, names.next(), last, false));
    }

    let code_len = code.len();
    code.extend(literals);
    let (mut bytes, mut offsets) = encode(&code, &copied, at)?;
    if let Some(&offset) = offsets.get(code_len) {
        // Aligned literals: a second encoding with the padding, whose code
        // is the same (the same instructions at the same places).
        let pad = (8 - at.wrapping_add(u64::from(offset)) % 8) % 8;
        let padding = (0..pad).map(|_| piece(Instruction::with(Op::Int3), names.next(), last, false));
        code.splice(code_len..code_len, padding.collect::<Vec<_>>());
        (bytes, offsets) = encode(&code, &copied, at)?;
    }
    if bytes.len() > DETOUR_MAX {
        return Err(unmovable(&copied[0]));
    }
    let resume = code
        .iter()
        .zip(&offsets)
        .filter(|(p, _)| p.resume)
        .map(|(p, &offset)| (copied[p.of].ip(), at.wrapping_add(u64::from(offset))))
        .collect();
    Ok(Detour {
        bytes,
        call_return: at.wrapping_add(u64::from(offsets[call_at + 1])),
        resume,
    })
}

/// The instructions of `D` the detour copies: the one at `e` and those at
/// interior boundaries, up to the one at the last boundary (what follows
/// it in `D` is dead padding). Never empty.
fn copied(entry: &BareEntry) -> Result<Vec<Instruction>, Refusal> {
    let starts = entry.starts();
    let last = starts[starts.len() - 1];
    let mut decoder = Decoder::with_ip(64, &entry.displaced, entry.entry, DecoderOptions::NONE);
    let mut out = Vec::new();
    while decoder.ip() <= last {
        let at = decoder.ip();
        let insn = decoder.decode();
        if insn.is_invalid() || !starts.contains(&at) {
            return Err(Refusal::Undecodable { at });
        }
        check_movable(&insn)?;
        out.push(insn);
    }
    Ok(out)
}

/// The branch target and RIP-relative operand of `insn`.
fn targets(insn: &Instruction) -> impl Iterator<Item = u64> {
    let memory = insn
        .is_ip_rel_memory_operand()
        .then(|| insn.ip_rel_memory_address());
    direct_target(insn).into_iter().chain(memory)
}

/// Whether a `rel32` that ends at `from` reaches `to`.
fn fits(to: u64, from: u64) -> bool {
    i32::try_from(i128::from(to) - i128::from(from)).is_ok()
}

/// `Reach` unless `to` is within `rel32` reach of every address of the
/// detour (the exact place of the instruction that needs it is known only
/// once encoded, and the detour is at most [`DETOUR_MAX`] bytes): then the
/// block encoder never needs to rewrite it. `original` is the instruction
/// it is for.
fn reach(original: &Instruction, to: u64, at: u64) -> Result<(), Refusal> {
    if fits(to, at) && fits(to, at.wrapping_add(DETOUR_MAX as u64)) {
        return Ok(());
    }
    Err(Refusal::Reach {
        at: original.ip(),
        to,
    })
}

/// Made-up instruction addresses: unique, never 0, and none of the real
/// targets.
struct Names {
    taken: BTreeSet<u64>,
    next: u64,
}

impl Names {
    fn new(taken: impl Iterator<Item = u64>) -> Names {
        Names {
            taken: taken.collect(),
            next: 1,
        }
    }

    fn next(&mut self) -> u64 {
        while self.taken.contains(&self.next) {
            self.next += 1;
        }
        self.next += 1;
        self.next - 1
    }
}

/// `op qword ptr [rip+to]`.
fn memory(op: Op, to: u64) -> Result<Instruction, Refusal> {
    Instruction::with1(op, MemoryOperand::with_base_displ(Register::RIP, to as i64))
        .map_err(|_| Refusal::Undecodable { at: to })
}

/// Encodes the pieces at `at`: the bytes and each piece's offset.
fn encode(code: &[Piece], copied: &[Instruction], at: u64) -> Result<(Vec<u8>, Vec<u32>), Refusal> {
    let all: Vec<Instruction> = code.iter().map(|p| p.insn).collect();
    let block = InstructionBlock::new(&all, at);
    let encoded = BlockEncoder::encode(64, block, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)
        .map_err(|_| unmovable(&copied[0]))?;
    // An instruction rewritten as several: where a thread resumes would be
    // ambiguous. Its targets were in reach, so it is one the encoder
    // cannot relocate as it is.
    match encoded
        .new_instruction_offsets
        .iter()
        .position(|&o| o == u32::MAX)
    {
        Some(i) => Err(unmovable(&copied[code[i].of])),
        None => Ok((encoded.code_buffer, encoded.new_instruction_offsets)),
    }
}
