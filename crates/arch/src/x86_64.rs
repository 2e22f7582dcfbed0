//! x86-64: the instruction forms that gcc and clang emit for patchable
//! sites, decoded with `iced-x86`.
//!
//! The forms, as real compilers emit them (see `docs/SITES.md`):
//! - `call __fentry__` / `call mcount`: `e8 rel32` (5 bytes), or in PIC code
//!   from gcc `ff 15 disp32`, `call *__fentry__@GOTPCREL(%rip)` (6 bytes);
//! - `-mnop-mcount` and `-minstrument-return=nop5`: `0f 1f 44 00 00`;
//! - `-fpatchable-function-entry=N`: N one-byte `90` from gcc, multi-byte
//!   NOPs from clang;
//! - XRay sleds (11 bytes): entry and tail `eb 09` + 9 bytes of NOP, exit
//!   `c3` + 10 bytes of NOP.

use iced_x86::{Code, Decoder, DecoderOptions, Instruction, Mnemonic, Register};

use crate::hex;
use crate::isa::{Call, CallTarget, Isa, PointerReloc, RelocCall, SledKind};

/// `R_X86_64_64`: `S + A`, 64 bits.
pub const R_X86_64_64: u32 = 1;
/// `R_X86_64_PC32`: `S + A - P`, 32 bits.
pub const R_X86_64_PC32: u32 = 2;
/// `R_X86_64_PLT32`: `L + A - P`, 32 bits.
pub const R_X86_64_PLT32: u32 = 4;
/// `R_X86_64_RELATIVE`: `B + A`, 64 bits.
pub const R_X86_64_RELATIVE: u32 = 8;
/// `R_X86_64_GOTPCREL`: `G + GOT + A - P`, 32 bits.
pub const R_X86_64_GOTPCREL: u32 = 9;
/// `R_X86_64_PC64`: `S + A - P`, 64 bits.
pub const R_X86_64_PC64: u32 = 24;
/// `R_X86_64_GOTPCRELX`: relaxable `R_X86_64_GOTPCREL`.
pub const R_X86_64_GOTPCRELX: u32 = 41;

/// Length of every XRay sled on x86-64.
pub const XRAY_SLED_LEN: usize = 11;

/// The x86-64 instruction layer.
#[derive(Debug, Clone, Copy, Default)]
pub struct X86_64;

fn decoder(code: &[u8], addr: u64) -> Decoder<'_> {
    Decoder::with_ip(64, code, addr, DecoderOptions::NONE)
}

/// Decodes one instruction; `None` if the bytes are not a valid instruction
/// (including when they are cut short).
fn decode_one(code: &[u8], addr: u64) -> Option<Instruction> {
    let insn = decoder(code, addr).decode();
    (!insn.is_invalid()).then_some(insn)
}

fn is_rip_relative(insn: &Instruction) -> bool {
    insn.memory_base() == Register::RIP && insn.memory_index() == Register::None
}

fn call_of(insn: &Instruction) -> Option<Call> {
    let target = match insn.code() {
        Code::Call_rel32_64 => CallTarget::Direct(insn.near_branch64()),
        Code::Call_rm64 if is_rip_relative(insn) => CallTarget::Memory(insn.ip_rel_memory_address()),
        _ => return None,
    };
    Some(Call {
        len: insn.len() as u8,
        target,
    })
}

impl Isa for X86_64 {
    fn name(&self) -> &'static str {
        "x86_64"
    }

    fn pointer_size(&self) -> usize {
        8
    }

    fn decode_call(&self, code: &[u8], addr: u64) -> Option<Call> {
        quick::call(code, addr).or_else(|| call_of(&decode_one(code, addr)?))
    }

    fn for_each_call(&self, code: &[u8], addr: u64, found: &mut dyn FnMut(u64, Call)) {
        let mut decoder = decoder(code, addr);
        let mut insn = Instruction::default();
        while decoder.can_decode() {
            decoder.decode_out(&mut insn);
            if let Some(call) = call_of(&insn) {
                found(insn.ip(), call);
            }
        }
    }

    fn may_call(&self, code: &[u8], addr: u64, wanted: &mut dyn FnMut(CallTarget) -> bool) -> bool {
        quick::may_call(code, addr, wanted)
    }

    fn nop_run(&self, code: &[u8], max_bytes: usize) -> (usize, usize) {
        let code = &code[..code.len().min(max_bytes)];
        let (mut count, mut bytes) = (0, 0);
        while bytes < code.len() {
            let rest = &code[bytes..];
            // gcc's runs of one-byte NOPs, at once.
            let ones = rest.iter().take_while(|&&b| b == 0x90).count();
            if ones > 0 {
                count += ones;
                bytes += ones;
                continue;
            }
            if quick::not_nop(rest) {
                break;
            }
            let len = match quick::nop_len(rest) {
                Some(len) => len,
                None => match decode_one(rest, 0) {
                    Some(insn) if insn.mnemonic() == Mnemonic::Nop => insn.len(),
                    _ => break,
                },
            };
            count += 1;
            bytes += len;
        }
        (count, bytes)
    }

    fn landing_pad_len(&self, code: &[u8]) -> usize {
        match code {
            // endbr64
            [0xf3, 0x0f, 0x1e, 0xfa, ..] => 4,
            _ => 0,
        }
    }

    fn for_each_plt_stub(&self, code: &[u8], addr: u64, found: &mut dyn FnMut(u64, u64)) {
        let mut decoder = decoder(code, addr);
        let mut insn = Instruction::default();
        // Start of the instruction run that forms the current stub: an
        // `endbr64` opens a stub (IBT PLTs), otherwise the jump itself does.
        let mut pad_start = None;
        while decoder.can_decode() {
            decoder.decode_out(&mut insn);
            match insn.code() {
                Code::Endbr64 => pad_start = Some(insn.ip()),
                Code::Jmp_rm64 if is_rip_relative(&insn) => {
                    let stub = pad_start.take().unwrap_or(insn.ip());
                    found(stub, insn.ip_rel_memory_address());
                }
                _ => pad_start = None,
            }
        }
    }

    fn xray_sled(&self, kind: SledKind, code: &[u8]) -> Result<usize, String> {
        let (head, nops): (&[u8], usize) = match kind {
            SledKind::Entry | SledKind::Tail => (&[0xeb, 0x09], 9),
            SledKind::Exit => (&[0xc3], 10),
        };
        if !code.starts_with(head) {
            return Err(format!("expected {} at the start of the sled", hex(head)));
        }
        let (_, bytes) = self.nop_run(&code[head.len()..], nops);
        if bytes != nops {
            return Err(format!("expected {nops} bytes of NOP after {}", hex(head)));
        }
        Ok(XRAY_SLED_LEN)
    }

    fn reloc_call(&self, r_type: u32, r_offset: u64, section: &[u8]) -> Option<RelocCall> {
        let (opcode, len): (&[u8], u8) = match r_type {
            R_X86_64_PC32 | R_X86_64_PLT32 => (&[0xe8], 5),
            R_X86_64_GOTPCREL | R_X86_64_GOTPCRELX => (&[0xff, 0x15], 6),
            _ => return None,
        };
        let start = r_offset.checked_sub(opcode.len() as u64)?;
        let end = start.checked_add(u64::from(len))?;
        let insn = section.get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)?;
        insn.starts_with(opcode)
            .then_some(RelocCall { offset: start, len })
    }

    fn pointer_reloc(&self, r_type: u32) -> Option<PointerReloc> {
        match r_type {
            R_X86_64_64 => Some(PointerReloc::Absolute),
            R_X86_64_PC64 => Some(PointerReloc::PcRelative),
            R_X86_64_RELATIVE => Some(PointerReloc::Relative),
            _ => None,
        }
    }

    fn absolute_pointer_reloc(&self) -> (u32, bool) {
        (R_X86_64_64, true)
    }
}

pub mod bare;
mod encode;
pub use encode::{pun_displacements, INT3, PUN_BYTES};
mod plan;
mod quick;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod encode_tests;
