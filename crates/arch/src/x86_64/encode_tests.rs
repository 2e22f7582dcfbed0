//! The patching verbs' bytes, checked by decoding them with iced-x86.

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, Register};

use super::X86_64;
use crate::patch::{BreakpointPatcher, PatchError, Resume, Shape};

fn decode_all(code: &[u8], ip: u64) -> Vec<Instruction> {
    let mut decoder = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut out = Vec::new();
    while decoder.can_decode() {
        let insn = decoder.decode();
        assert!(!insn.is_invalid(), "invalid instruction in {code:02x?}");
        out.push(insn);
    }
    out
}

#[test]
fn every_nop_is_one_instruction_of_its_length() {
    for len in 1..=15 {
        let nop = X86_64.make_nop(Shape::Inline, len).unwrap();
        assert_eq!(nop.len(), len);
        let insns = decode_all(nop.as_slice(), 0x1000);
        assert_eq!(insns.len(), 1, "length {len}: {nop:?}");
        assert_eq!(insns[0].mnemonic(), Mnemonic::Nop, "length {len}: {nop:?}");
    }
    assert_eq!(X86_64.make_nop(Shape::Inline, 0), Err(PatchError::Length(0)));
    assert_eq!(X86_64.make_nop(Shape::Inline, 16), Err(PatchError::Length(16)));
}

#[test]
fn inline_call_sits_at_the_end_of_the_site() {
    for len in 5..=15 {
        let addr = 0x5555_0000_1000;
        let target = addr + 0x7000_0000;
        let code = X86_64.make_call(Shape::Inline, addr, len, target).unwrap();
        let insns = decode_all(code.as_slice(), addr);
        let call = insns.last().unwrap();
        assert_eq!(call.mnemonic(), Mnemonic::Call);
        assert_eq!(call.near_branch_target(), target);
        assert_eq!(call.next_ip(), addr + len as u64);
        assert_eq!(X86_64.return_address(Shape::Inline, addr, len), call.next_ip());
        assert!(insns.len() <= 2, "at most one NOP before the call: {code:?}");
        assert!(insns[..insns.len() - 1]
            .iter()
            .all(|i| i.mnemonic() == Mnemonic::Nop));
    }
    assert_eq!(
        X86_64.make_call(Shape::Inline, 0x1000, 4, 0x2000),
        Err(PatchError::Length(4))
    );
    assert!(!X86_64.call_fits(Shape::Inline, 4) && X86_64.call_fits(Shape::Inline, 5));
    assert!(!X86_64.call_fits(Shape::ReturnSled, 5) && X86_64.call_fits(Shape::ReturnSled, 6));
    assert!(!X86_64.call_fits(Shape::Inline, 16));
}

#[test]
fn call_reach_is_plus_minus_two_gib() {
    let addr = 0x5555_0000_0000u64;
    let near = addr + 5 + i32::MAX as u64;
    assert!(X86_64.make_call(Shape::Inline, addr, 5, near).is_ok());
    assert!(X86_64.reaches(addr, near));
    let far = near + 1;
    assert_eq!(
        X86_64.make_call(Shape::Inline, addr, 5, far),
        Err(PatchError::Reach { from: addr, to: far })
    );
    let low = addr + 5 - (1u64 << 31);
    assert!(X86_64.reaches(addr, low));
    assert!(!X86_64.reaches(addr, low - 1));
    // A library 40 TiB away (a PIE at 0x55…, a library at 0x7f…).
    assert!(!X86_64.reaches(addr, 0x7f00_0000_0000));
}

#[test]
fn return_sled_keeps_a_return_where_the_call_ends() {
    let addr = 0x40_1000;
    let off = X86_64.make_nop(Shape::ReturnSled, 11).unwrap();
    assert_eq!(off.as_slice()[0], 0xc3);
    assert_eq!(off.as_slice()[5], 0xc3);
    let insns = decode_all(off.as_slice(), addr);
    assert_eq!(insns[0].mnemonic(), Mnemonic::Ret);
    let on = X86_64.make_call(Shape::ReturnSled, addr, 11, 0x50_0000).unwrap();
    let insns = decode_all(on.as_slice(), addr);
    assert_eq!(insns[0].mnemonic(), Mnemonic::Call);
    assert_eq!(insns[0].near_branch_target(), 0x50_0000);
    assert_eq!(insns[1].mnemonic(), Mnemonic::Ret);
    assert_eq!(insns[1].ip(), X86_64.return_address(Shape::ReturnSled, addr, 11));
    assert_eq!(X86_64.resume(Shape::ReturnSled, addr, 11, None), Resume::Return);
}

#[test]
fn resume_emulates_the_new_form() {
    assert_eq!(X86_64.resume(Shape::Inline, 0x1000, 6, None), Resume::At(0x1006));
    assert_eq!(
        X86_64.resume(Shape::Inline, 0x1000, 6, Some(0x9000)),
        Resume::Call {
            target: 0x9000,
            ret: 0x1006
        }
    );
}

#[test]
fn slot_loads_its_data_word_and_jumps_through_its_target_word() {
    let layout = X86_64.slot_layout();
    assert!(layout.size.is_power_of_two());
    assert!(layout.data.is_multiple_of(8) && layout.target.is_multiple_of(8));
    assert!(layout.code.len() <= layout.data && layout.target + 8 <= layout.size);
    let slot = 0x7000_0000u64;
    let insns = decode_all(&layout.code, slot);
    assert_eq!(insns[0].mnemonic(), Mnemonic::Mov);
    assert_eq!(insns[0].op0_register(), Register::R11);
    assert_eq!(insns[0].memory_displacement64(), slot + layout.data as u64);
    assert_eq!(insns[1].mnemonic(), Mnemonic::Jmp);
    assert_eq!(insns[1].memory_displacement64(), slot + layout.target as u64);
    assert!(insns[2..].iter().all(|i| i.mnemonic() == Mnemonic::Int3));
}

#[test]
fn punned_runs_keep_every_byte_an_instruction_boundary() {
    // A thread stopped anywhere in gcc's run of one-byte NOPs resumes at
    // that byte: in the off and the on form alike, decoding from every
    // byte must give whole instructions that end exactly at the run's end,
    // and that do nothing but the call (or change flags only).
    let harmless = [
        Mnemonic::Nop,
        Mnemonic::Clc,
        Mnemonic::Stc,
        Mnemonic::Cmc,
        Mnemonic::Cld,
        Mnemonic::Sahf,
    ];
    let displacements: Vec<i32> = super::pun_displacements().collect();
    assert_eq!(displacements.len(), 6usize.pow(4));
    assert_eq!(displacements[0], i32::from_le_bytes([0x90; 4]));
    let mut sorted = displacements.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), displacements.len(), "distinct");
    assert!(displacements.iter().all(|&d| d < -(48 << 20)));
    for &disp in displacements.iter().step_by(97).chain([displacements[0]].iter()) {
        for len in 5..=15 {
            let addr = 0x5555_0000_1000u64;
            let shape = Shape::Punned { disp };
            let mirror = (addr + len as u64).wrapping_add(disp as i64 as u64);
            let off = X86_64.make_nop(shape, len).unwrap();
            let on = X86_64.make_call(shape, addr, len, mirror).unwrap();
            assert_eq!(off.as_slice()[len - 5], 0x90);
            // Off and on differ in the call's opcode only.
            let differ: Vec<usize> = (0..len)
                .filter(|&i| off.as_slice()[i] != on.as_slice()[i])
                .collect();
            assert_eq!(differ, [len - 5], "{disp:#x} {len}: {off:?} {on:?}");
            for code in [off, on] {
                for k in 0..len {
                    let insns = decode_all(&code.as_slice()[k..], addr + k as u64);
                    let end = insns.last().map_or(0, |i| i.next_ip());
                    assert_eq!(end, addr + len as u64, "{code:?} from byte {k}");
                    for i in &insns {
                        let call_to_mirror = i.mnemonic() == Mnemonic::Call && i.near_branch64() == mirror;
                        assert!(
                            harmless.contains(&i.mnemonic()) && i.len() == 1 || call_to_mirror,
                            "{code:?} from byte {k}: {i}"
                        );
                    }
                }
            }
            assert_eq!(
                X86_64.make_call(shape, addr, len, mirror + 16),
                Err(PatchError::Reach {
                    from: addr + len as u64 - 5,
                    to: mirror + 16
                })
            );
            assert_eq!(X86_64.return_address(shape, addr, len), addr + len as u64);
            assert_eq!(
                X86_64.resume(shape, addr, len, None),
                Resume::At(addr + len as u64)
            );
        }
    }
}
