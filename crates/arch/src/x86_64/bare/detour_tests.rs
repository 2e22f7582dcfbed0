//! Detours of real functions, decoded back with iced-x86 and compared
//! instruction by instruction with the originals, at places far below and
//! above the function.

use iced_x86::{Code as Op, Decoder, DecoderOptions, Instruction, Mnemonic, Register};

use super::build::{Module, CONFIGS, GCC, SOURCE};
use super::{
    analyze, detour, ends_flow, guarded_detour, BareEntry, Detour, Refusal, DETOUR_MAX, GUARD_WORDS,
};

/// Where the tests put detours relative to `e`: in the band a jump with
/// a boundary at `e+4` reaches (816–832 MiB below), and above the function.
fn places(entry: &BareEntry) -> [u64; 2] {
    [entry.entry - 0x3380_0000, entry.entry + 0x10_0000]
}

/// The word the detour calls through, near it.
fn word_for(at: u64) -> u64 {
    at + 0x8000
}

fn decode(bytes: &[u8], base: u64, at: u64) -> Instruction {
    let offset = (at - base) as usize;
    let insn = Decoder::with_ip(64, &bytes[offset..], at, DecoderOptions::NONE).decode();
    assert!(
        !insn.is_invalid(),
        "invalid instruction at +{offset} of {bytes:02x?}"
    );
    insn
}

/// The original instructions the detour copies (those at `e` and the
/// boundaries), decoded independently of `detour`.
fn originals(entry: &BareEntry) -> Vec<Instruction> {
    let starts = entry.starts();
    let mut decoder = Decoder::with_ip(64, &entry.displaced, entry.entry, DecoderOptions::NONE);
    let mut out = Vec::new();
    while decoder.can_decode() && decoder.ip() <= *starts.last().unwrap() {
        out.push(decoder.decode());
    }
    assert_eq!(out.iter().map(|i| i.ip()).collect::<Vec<_>>(), starts);
    out
}

/// Makes the detour of `entry` at `at` and checks it: the call through
/// the word; each copied instruction with its original's absolute memory
/// operand and branch target (a branch to another copied instruction goes
/// to its copy); displaced calls as a push of the original return address
/// and a jump; `resume` at each copy; the jump back to `e+L`; then only
/// `int3` padding and the literals.
pub(super) fn verify(entry: &BareEntry, at: u64, word: u64) -> Detour {
    check(entry, at, word, false)
}

/// [`verify`] for a guarded detour: first the guard, exactly as
/// [`guarded_detour`] documents it.
fn verify_guarded(entry: &BareEntry, at: u64, word: u64) -> Detour {
    check(entry, at, word, true)
}

/// The guard at `at`: its instructions, checked one by one; returns where
/// the call through the word is.
fn check_guard(bytes: &[u8], at: u64, word: u64) -> u64 {
    let mut pc = at;
    let mut next = || {
        let insn = decode(bytes, at, pc);
        pc = insn.next_ip();
        insn
    };
    let rip = |insn: &Instruction, code: Op, k: u64| {
        assert_eq!(insn.code(), code, "{insn}");
        assert_eq!(insn.ip_rel_memory_address(), word + GUARD_WORDS + 8 * k);
    };
    let load = |insn: &Instruction| {
        assert_eq!(insn.code(), Op::Mov_r64_rm64);
        assert_eq!(
            (insn.memory_base(), insn.memory_displacement64()),
            (Register::RSP, 8)
        );
    };
    assert_eq!(next().code(), Op::Push_r64);
    load(&next());
    rip(&next(), Op::Sub_r64_rm64, 0);
    rip(&next(), Op::Cmp_r64_rm64, 1);
    let in_a = next();
    assert_eq!(in_a.mnemonic(), Mnemonic::Jb);
    load(&next());
    rip(&next(), Op::Sub_r64_rm64, 2);
    rip(&next(), Op::Cmp_r64_rm64, 3);
    let neither = next();
    assert_eq!(neither.mnemonic(), Mnemonic::Jae);
    assert_eq!(in_a.near_branch_target(), neither.ip());
    load(&next());
    rip(&next(), Op::Sub_r64_rm64, 4);
    rip(&next(), Op::Cmp_r64_rm64, 5);
    assert_eq!(next().code(), Op::Cmc);
    let pop = next();
    assert_eq!((pop.code(), pop.op0_register()), (Op::Pop_r64, Register::RAX));
    assert_eq!(neither.near_branch_target(), pop.ip());
    let skip = next();
    assert_eq!(skip.mnemonic(), Mnemonic::Jb);
    // Past the call through the word: to the copy.
    assert_eq!(skip.near_branch_target(), pc + 6);
    pc
}

fn check(entry: &BareEntry, at: u64, word: u64, guard: bool) -> Detour {
    let made = if guard {
        guarded_detour(entry, at, word)
    } else {
        detour(entry, at, word)
    };
    let d = made.unwrap_or_else(|r| panic!("{:#x}: {r}", entry.entry));
    let bytes = &d.bytes;
    assert!(bytes.len() <= DETOUR_MAX);
    let call_at = if guard { check_guard(bytes, at, word) } else { at };
    let call = decode(bytes, at, call_at);
    assert_eq!((call.code(), call.len()), (Op::Call_rm64, 6));
    assert_eq!(call.ip_rel_memory_address(), word);
    assert_eq!(d.call_return, call_at + 6);

    let originals = originals(entry);
    let (mut pc, mut resume, mut branches, mut literals) = (call_at + 6, Vec::new(), Vec::new(), Vec::new());
    for original in &originals {
        resume.push((original.ip(), pc));
        let copy = decode(bytes, at, pc);
        pc = copy.next_ip();
        if original.is_call_near() || original.is_call_near_indirect() {
            assert_eq!(copy.code(), Op::Push_rm64, "{copy}");
            literals.push((copy.ip_rel_memory_address(), original.next_ip()));
            let jmp = decode(bytes, at, pc);
            pc = jmp.next_ip();
            if original.is_call_near() {
                assert_eq!(jmp.mnemonic(), Mnemonic::Jmp);
                assert_eq!(jmp.near_branch_target(), original.near_branch_target());
            } else {
                assert_eq!(jmp.code(), Op::Jmp_rm64);
                assert_eq!(jmp.ip_rel_memory_address(), original.ip_rel_memory_address());
            }
        } else if original.is_jcc_short_or_near() || original.is_jmp_short_or_near() {
            assert_eq!(copy.mnemonic(), original.mnemonic());
            branches.push((copy.near_branch_target(), original.near_branch_target()));
        } else {
            assert_eq!(copy, *original, "{copy} copies {original}");
            if original.is_ip_rel_memory_operand() {
                assert_eq!(copy.ip_rel_memory_address(), original.ip_rel_memory_address());
            }
        }
    }
    let last = originals.last().unwrap();
    if !ends_flow(last) {
        let back = decode(bytes, at, pc);
        assert_eq!(back.mnemonic(), Mnemonic::Jmp);
        assert_eq!(back.near_branch_target(), last.next_ip());
        assert_eq!(back.near_branch_target(), entry.entry + entry.len as u64);
        pc = back.next_ip();
    }
    assert_eq!(d.resume, resume);
    for (copy_target, original_target) in branches {
        let expected = resume
            .iter()
            .find(|r| r.0 == original_target)
            .map_or(original_target, |r| r.1);
        assert_eq!(copy_target, expected, "branch to {original_target:#x}");
    }
    let end = at + bytes.len() as u64;
    let data = literals.first().map_or(end, |l| l.0);
    assert!(bytes[(pc - at) as usize..(data - at) as usize]
        .iter()
        .all(|&b| b == 0xcc));
    assert_eq!(end - data, 8 * literals.len() as u64);
    for (address, value) in literals {
        assert_eq!(address % 8, 0, "aligned literal");
        let offset = (address - at) as usize;
        assert_eq!(
            u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap()),
            value
        );
    }
    d
}

fn entry_of(module: &Module, name: &str) -> BareEntry {
    let f = module.function(name);
    analyze(f.code, f.addr, f.size, f.limit).unwrap_or_else(|r| panic!("{name}: {r}"))
}

#[test]
fn every_accepted_function_relocates() {
    let mut checked = 0;
    for (compilers, flags) in CONFIGS {
        let Some(m) = Module::build(compilers, flags, SOURCE) else {
            continue;
        };
        for name in m.names() {
            let f = m.function(&name);
            let Ok(entry) = analyze(f.code, f.addr, f.size, f.limit) else {
                continue;
            };
            for at in places(&entry) {
                verify(&entry, at, word_for(at));
                verify_guarded(&entry, at, word_for(at));
            }
            checked += 1;
        }
    }
    if checked > 0 {
        assert!(checked >= 50, "only {checked} detours checked");
    }
}

#[test]
fn a_displaced_call_pushes_its_original_return_address() {
    let Some(m) = Module::build(GCC, CONFIGS[1].1, SOURCE) else {
        return;
    };
    // sub rsp,8; call h@plt.
    let entry = entry_of(&m, "calls");
    for at in places(&entry) {
        let d = verify(&entry, at, word_for(at));
        assert_eq!(d.resume, [(entry.entry, at + 6), (entry.entry + 4, at + 10)]);
        // push [rip+lit]; jmp h; then the literal, the call's return
        // address in the original: e+9.
        let tail = &d.bytes[d.bytes.len() - 8..];
        assert_eq!(u64::from_le_bytes(tail.try_into().unwrap()), entry.entry + 9);
        let jmp = decode(&d.bytes, at, at + 16);
        assert_eq!(jmp.mnemonic(), Mnemonic::Jmp);
    }
    // With -fno-plt: call [rip+h@GOTPCREL] becomes push; jmp [rip+...].
    let Some(m) = Module::build(GCC, CONFIGS[3].1, SOURCE) else {
        return;
    };
    let entry = entry_of(&m, "calls");
    assert_eq!(&entry.displaced[4..6], &[0xff, 0x15]);
    for at in places(&entry) {
        let d = verify(&entry, at, word_for(at));
        assert_eq!(decode(&d.bytes, at, at + 16).code(), Op::Jmp_rm64);
    }
}

#[test]
fn branches_inside_d_stay_in_the_copy() {
    let Some(m) = Module::build(GCC, CONFIGS[1].1, SOURCE) else {
        return;
    };
    for name in ["je_inside", "loop_in_d"] {
        let entry = entry_of(&m, name);
        for at in places(&entry) {
            let d = verify(&entry, at, word_for(at));
            assert!(d
                .resume
                .iter()
                .all(|&(_, copy)| copy >= at && copy < at + d.bytes.len() as u64));
        }
    }
    // loop_in_d: xor; 1: dec edi; jnz 1b — the copied jnz goes to the
    // copied dec, short.
    let entry = entry_of(&m, "loop_in_d");
    let at = places(&entry)[0];
    let d = verify(&entry, at, word_for(at));
    let jnz = decode(&d.bytes, at, d.resume[2].1);
    assert_eq!(
        (jnz.code(), jnz.near_branch_target()),
        (Op::Jne_rel8_64, d.resume[1].1)
    );
}

#[test]
fn what_ends_in_ret_or_jmp_jumps_nowhere_after() {
    let Some(m) = Module::build(GCC, CONFIGS[1].1, SOURCE) else {
        return;
    };
    // add edi,1; jmp g: nothing after the jmp.
    let entry = entry_of(&m, "tail");
    for at in places(&entry) {
        assert_eq!(verify(&entry, at, word_for(at)).bytes.len(), 6 + 3 + 5);
    }
    // xor; ret; mov eax,5 — the ret is not last: the copy goes on (a
    // thread resuming at e+3 runs the copied mov), then jumps to e+8.
    let entry = entry_of(&m, "ret_mid");
    for at in places(&entry) {
        assert_eq!(verify(&entry, at, word_for(at)).resume.len(), 3);
    }
    // tiny: xor eax,eax; ret and padding — the padding is not copied.
    let entry = entry_of(&m, "tiny");
    for at in places(&entry) {
        assert_eq!(&verify(&entry, at, word_for(at)).bytes[6..], &[0x31, 0xc0, 0xc3]);
    }
}

#[test]
fn operands_keep_their_absolute_targets() {
    let Some(m) = Module::build(GCC, CONFIGS[1].1, SOURCE) else {
        return;
    };
    // lea rax,[rip+self_lea]: the function's own address, which is also
    // the copied instruction's original address, must stay the original.
    let entry = entry_of(&m, "self_lea");
    for at in places(&entry) {
        let d = verify(&entry, at, word_for(at));
        let lea = decode(&d.bytes, at, at + 6);
        assert_eq!(lea.ip_rel_memory_address(), entry.function);
    }
    // A trap-only entry gets a detour too (the trap handler may send a
    // thread there): the first instruction, then back.
    let Some(m) = Module::build(GCC, CONFIGS[2].1, SOURCE) else {
        return;
    };
    let entry = entry_of(&m, "tiny");
    assert!(entry.trap_only);
    let at = places(&entry)[0];
    verify(&entry, at, word_for(at));
}

/// The target of the first instruction of `bytes` at `at`: its
/// RIP-relative operand or its branch target.
fn target_of(bytes: &[u8], at: u64) -> u64 {
    let insn = Decoder::with_ip(64, bytes, at, DecoderOptions::NONE).decode();
    if insn.is_ip_rel_memory_operand() {
        insn.ip_rel_memory_address()
    } else {
        insn.near_branch_target()
    }
}

#[test]
fn targets_out_of_reach_are_refused() {
    let Some(m) = Module::build(GCC, CONFIGS[1].1, SOURCE) else {
        return;
    };
    // mov rax,[rip+counter64].
    let entry = entry_of(&m, "load64");
    let e = entry.entry;
    let counter = target_of(&entry.displaced, e);
    // The word out of reach of the call.
    let far = e + 0x9000_0000;
    assert_eq!(detour(&entry, e, far), Err(Refusal::Reach { at: e, to: far }));
    assert!(detour(&entry, e, e + 6 + i32::MAX as u64).is_ok());
    assert!(detour(&entry, e, e + 7 + i32::MAX as u64).is_err());
    // The detour too far from the load's operand.
    assert_eq!(
        detour(&entry, far, far + 0x100),
        Err(Refusal::Reach { at: e, to: counter })
    );
    // In reach from every byte a detour may have, and just not.
    let lowest = counter - i32::MAX as u64;
    verify(&entry, lowest, lowest + 0x100);
    assert!(detour(&entry, lowest - 1, lowest + 0x100).is_err());
    // The jump back, to e+7 (below the operand), is the one that limits
    // the detour's place from above.
    let highest = e + 7 + 0x8000_0000 - DETOUR_MAX as u64;
    verify(&entry, highest, highest + 0x100);
    assert_eq!(
        detour(&entry, highest + 1, highest + 0x100),
        Err(Refusal::Reach { at: e, to: e + 7 })
    );

    // sub rsp,8; call h: the call's target.
    let entry = entry_of(&m, "calls");
    let far = entry.entry + 0x8000_0000;
    let h = target_of(&entry.displaced[4..], entry.entry + 4);
    assert_eq!(
        detour(&entry, far, far + 0x100),
        Err(Refusal::Reach {
            at: entry.entry + 4,
            to: h
        })
    );
    // push r15; push r14; push r13: the jump back, for the last one.
    let entry = entry_of(&m, "many");
    assert_eq!(
        detour(&entry, far, far + 0x100),
        Err(Refusal::Reach {
            at: entry.entry + 4,
            to: entry.entry + 6
        })
    );
}

#[test]
fn an_entry_that_does_not_decode_is_refused() {
    let mut entry = BareEntry {
        function: 0x1000,
        entry: 0x1000,
        len: 5,
        boundaries: 1 << 3,
        displaced: vec![0x31, 0xc0, 0x53, 0x53, 0x53],
        trap_only: false,
        branches_into: Vec::new(),
    };
    // An instruction at e+2 that is not a boundary.
    assert_eq!(
        detour(&entry, 0x10_0000, 0x10_1000),
        Err(Refusal::Undecodable { at: 0x1002 })
    );
    entry.boundaries = 1 << 2 | 1 << 3 | 1 << 4;
    assert!(detour(&entry, 0x10_0000, 0x10_1000).is_ok());
    entry.displaced[2] = 0x06;
    assert_eq!(
        detour(&entry, 0x10_0000, 0x10_1000),
        Err(Refusal::Undecodable { at: 0x1002 })
    );
    entry.displaced = vec![0x31, 0xc0, 0xcc, 0x53, 0x53];
    assert_eq!(
        detour(&entry, 0x10_0000, 0x10_1000),
        Err(Refusal::Unmovable {
            mnemonic: "int3".into(),
            at: 0x1002
        })
    );
}
