//! x86-64 patching verbs: canonical NOPs, `call rel32`, trampoline slots.

use crate::patch::{Code, PatchError, Patcher, Resume, Shape, SlotLayout, MAX_SITE_LEN};

use super::X86_64;

/// `int3`.
const INT3: u8 = 0xcc;
/// `call rel32` opcode and length.
const CALL: u8 = 0xe8;
const CALL_LEN: usize = 5;
/// `ret`.
const RET: u8 = 0xc3;

/// The recommended single-instruction NOPs of 1 to 9 bytes (Intel SDM,
/// "Recommended Multi-Byte Sequence of NOP Instruction"); longer ones add
/// `66` prefixes and a `cs` prefix to the 9-byte form, as binutils does.
const NOPS: [&[u8]; 9] = [
    &[0x90],
    &[0x66, 0x90],
    &[0x0f, 0x1f, 0x00],
    &[0x0f, 0x1f, 0x40, 0x00],
    &[0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
    &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
];

/// Writes one NOP instruction of `len` bytes (1 to 15) into `out`.
fn nop_into(out: &mut [u8]) {
    let len = out.len();
    if len <= NOPS.len() {
        out.copy_from_slice(NOPS[len - 1]);
        return;
    }
    // 66 × k, 2e, then the 8-byte `nopl 0x0(%rax,%rax,1)`.
    let prefixes = len - 9;
    out[..prefixes].fill(0x66);
    out[prefixes] = 0x2e;
    out[prefixes + 1..].copy_from_slice(NOPS[7]);
}

/// The displacement of a `rel32` branch at `from` (instruction start) of
/// `len` bytes to `to`, if it fits.
fn rel32(from: u64, len: usize, to: u64) -> Option<i32> {
    let next = from.wrapping_add(len as u64);
    i32::try_from(to.wrapping_sub(next) as i64).ok()
}

impl Patcher for X86_64 {
    fn breakpoint(&self) -> u8 {
        INT3
    }

    fn make_nop(&self, shape: Shape, len: usize) -> Result<Code, PatchError> {
        let mut bytes = [0; MAX_SITE_LEN];
        match shape {
            Shape::Inline if (1..=MAX_SITE_LEN).contains(&len) => nop_into(&mut bytes[..len]),
            // ret, NOP up to where the call ends, ret, NOP to the end.
            Shape::ReturnSled if (CALL_LEN + 1..=MAX_SITE_LEN).contains(&len) => {
                bytes[0] = RET;
                nop_into(&mut bytes[1..CALL_LEN]);
                bytes[CALL_LEN] = RET;
                if len > CALL_LEN + 1 {
                    nop_into(&mut bytes[CALL_LEN + 1..len]);
                }
            }
            _ => return Err(PatchError::Length(len)),
        }
        Ok(Code::new(&bytes[..len]).expect("len checked"))
    }

    fn call_fits(&self, shape: Shape, len: usize) -> bool {
        len <= MAX_SITE_LEN
            && match shape {
                Shape::Inline => len >= CALL_LEN,
                Shape::ReturnSled => len > CALL_LEN,
            }
    }

    fn make_call(&self, shape: Shape, addr: u64, len: usize, target: u64) -> Result<Code, PatchError> {
        if !self.call_fits(shape, len) {
            return Err(PatchError::Length(len));
        }
        let mut code = self.make_nop(shape, len)?;
        let at = match shape {
            Shape::Inline => len - CALL_LEN,
            Shape::ReturnSled => 0,
        };
        let from = addr + at as u64;
        let disp = rel32(from, CALL_LEN, target).ok_or(PatchError::Reach { from, to: target })?;
        let mut bytes = [0; MAX_SITE_LEN];
        bytes[..len].copy_from_slice(code.as_slice());
        if at > 0 {
            nop_into(&mut bytes[..at]);
        }
        bytes[at] = CALL;
        bytes[at + 1..at + CALL_LEN].copy_from_slice(&disp.to_le_bytes());
        code = Code::new(&bytes[..len]).expect("len checked");
        Ok(code)
    }

    fn return_address(&self, shape: Shape, addr: u64, len: usize) -> u64 {
        match shape {
            Shape::Inline => addr + len as u64,
            Shape::ReturnSled => addr + CALL_LEN as u64,
        }
    }

    fn resume(&self, shape: Shape, addr: u64, len: usize, target: Option<u64>) -> Resume {
        match (shape, target) {
            (_, Some(target)) => Resume::Call {
                target,
                ret: self.return_address(shape, addr, len),
            },
            (Shape::Inline, None) => Resume::At(addr + len as u64),
            (Shape::ReturnSled, None) => Resume::Return,
        }
    }

    fn reaches(&self, from: u64, to: u64) -> bool {
        rel32(from, CALL_LEN, to).is_some()
    }

    fn slot_layout(&self) -> SlotLayout {
        // 0: mov 16(%rip), %r11    4c 8b 1d <disp32 = 16 - 7>
        // 7: jmp *24(%rip)         ff 25 <disp32 = 24 - 13>
        // 13: int3 × 3; 16: data word; 24: target word.
        let mut code = vec![0x4c, 0x8b, 0x1d];
        code.extend_from_slice(&(16i32 - 7).to_le_bytes());
        code.extend_from_slice(&[0xff, 0x25]);
        code.extend_from_slice(&(24i32 - 13).to_le_bytes());
        code.extend_from_slice(&[INT3; 3]);
        SlotLayout {
            code,
            data: 16,
            target: 24,
            size: 32,
        }
    }
}
