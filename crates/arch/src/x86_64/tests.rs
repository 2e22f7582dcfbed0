//! Byte sequences below are copied from `objdump -d` of gcc 12 and clang 14/16
//! output (see `docs/SITES.md`); the integration tests in `crates/cli/tests`
//! check the same forms on freshly compiled programs.

use super::*;

const X: X86_64 = X86_64;

#[test]
fn direct_call_to_plt() {
    // clang -pg -mfentry: 11e0: call 1070 <__fentry__@plt>
    let call = X.decode_call(&[0xe8, 0x8b, 0xfe, 0xff, 0xff], 0x11e0).unwrap();
    assert_eq!(call.len, 5);
    assert_eq!(call.target, CallTarget::Direct(0x1070));
}

#[test]
fn indirect_call_through_got() {
    // gcc -pg -mfentry (PIE): 11e4: call *0x2df6(%rip)  # 3fe0 <__fentry__>
    let call = X
        .decode_call(&[0xff, 0x15, 0xf6, 0x2d, 0x00, 0x00], 0x11e4)
        .unwrap();
    assert_eq!(call.len, 6);
    assert_eq!(call.target, CallTarget::Memory(0x3fe0));
}

#[test]
fn non_calls_and_short_input_are_not_calls() {
    assert_eq!(X.decode_call(&[0x55], 0), None); // push %rbp
    assert_eq!(X.decode_call(&[0xe8, 0x00, 0x00], 0), None); // cut short
    assert_eq!(X.decode_call(&[], 0), None);
    // call *%rax is not a call through a slot we can name
    assert_eq!(X.decode_call(&[0xff, 0xd0], 0), None);
}

#[test]
fn calls_in_a_function_body() {
    // clang -pg: push %rbp; mov %rsp,%rbp; push %rbx; push %rax; mov %edi,%ebx;
    // call 1060 <mcount@plt>; add $0x3,%ebx
    let code = [
        0x55, 0x48, 0x89, 0xe5, 0x53, 0x50, 0x89, 0xfb, 0xe8, 0x73, 0xfe, 0xff, 0xff, 0x83, 0xc3, 0x03,
    ];
    let mut calls = Vec::new();
    X.for_each_call(&code, 0x11e0, &mut |at, call| calls.push((at, call.target)));
    assert_eq!(calls, vec![(0x11e8, CallTarget::Direct(0x1060))]);
}

#[test]
fn nop_runs() {
    // gcc -fpatchable-function-entry=5: five one-byte NOPs, then lea
    let gcc = [0x90, 0x90, 0x90, 0x90, 0x90, 0x8d, 0x47, 0x03];
    assert_eq!(X.nop_run(&gcc, 64), (5, 5));
    // clang -fpatchable-function-entry=5,2: 90 90 | 0f 1f 00, then lea
    let clang = [0x90, 0x90, 0x0f, 0x1f, 0x00, 0x8d, 0x47, 0x03];
    assert_eq!(X.nop_run(&clang, 64), (3, 5));
    // -mnop-mcount
    assert_eq!(X.nop_run(&[0x0f, 0x1f, 0x44, 0x00, 0x00, 0x55], 64), (1, 5));
    // 66 90 (xchg %ax,%ax) counts as a NOP; the limit is respected
    assert_eq!(X.nop_run(&[0x66, 0x90, 0x90, 0x90], 3), (2, 3));
    assert_eq!(X.nop_run(&[0x55], 64), (0, 0));
    // a NOP cut short is not a NOP
    assert_eq!(X.nop_run(&[0x0f, 0x1f, 0x44], 64), (0, 0));
}

#[test]
fn landing_pad() {
    assert_eq!(X.landing_pad_len(&[0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x15]), 4);
    assert_eq!(X.landing_pad_len(&[0xf3, 0x0f, 0x1e]), 0);
    assert_eq!(X.landing_pad_len(&[0x90]), 0);
}

#[test]
fn plt_stubs_lazy_and_ibt() {
    // lazy .plt: PLT0, then one stub per function
    let lazy = [
        0xff, 0x35, 0xca, 0x2f, 0x00, 0x00, // push GOT+8
        0xff, 0x25, 0xcc, 0x2f, 0x00, 0x00, // jmp *GOT+16
        0x0f, 0x1f, 0x40, 0x00, // nopl
        0xff, 0x25, 0xca, 0x2f, 0x00, 0x00, // 1030: jmp *0x4000
        0x68, 0x00, 0x00, 0x00, 0x00, // push $0
        0xe9, 0xe0, 0xff, 0xff, 0xff, // jmp 1020
    ];
    let mut stubs = Vec::new();
    X.for_each_plt_stub(&lazy, 0x1020, &mut |stub, slot| stubs.push((stub, slot)));
    assert_eq!(stubs, vec![(0x1026, 0x3ff8), (0x1030, 0x4000)]);

    // .plt.sec with IBT: endbr64; bnd jmp *slot(%rip); nop
    let ibt = [
        0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x1f, 0x44, 0x00, 0x00,
    ];
    let mut stubs = Vec::new();
    X.for_each_plt_stub(&ibt, 0x2000, &mut |stub, slot| stubs.push((stub, slot)));
    assert_eq!(stubs, vec![(0x2000, 0x300b)]);
}

#[test]
fn xray_sleds() {
    let entry = [0xeb, 0x09, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x02, 0x00, 0x00];
    assert_eq!(X.xray_sled(SledKind::Entry, &entry), Ok(11));
    assert_eq!(X.xray_sled(SledKind::Tail, &entry), Ok(11));
    assert!(X.xray_sled(SledKind::Exit, &entry).is_err());
    let exit = [0xc3, 0x2e, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x02, 0x00, 0x00];
    assert_eq!(X.xray_sled(SledKind::Exit, &exit), Ok(11));
    assert!(X.xray_sled(SledKind::Entry, &exit).is_err());
    assert!(X.xray_sled(SledKind::Exit, &exit[..6]).is_err());
}

#[test]
fn relocated_calls_in_objects() {
    // gcc -pg -mfentry -c: ff 15 at 0, R_X86_64_GOTPCRELX at 2
    let got = [0xff, 0x15, 0, 0, 0, 0, 0x55];
    assert_eq!(
        X.reloc_call(R_X86_64_GOTPCRELX, 2, &got),
        Some(RelocCall { offset: 0, len: 6 })
    );
    // clang -pg -mfentry -c: e8 at 0, R_X86_64_PLT32 at 1
    let plt = [0xe8, 0, 0, 0, 0];
    assert_eq!(
        X.reloc_call(R_X86_64_PLT32, 1, &plt),
        Some(RelocCall { offset: 0, len: 5 })
    );
    // wrong opcode, out of range, underflow, wrong type
    assert_eq!(X.reloc_call(R_X86_64_PLT32, 1, &[0xe9, 0, 0, 0, 0]), None);
    assert_eq!(X.reloc_call(R_X86_64_PLT32, 3, &plt), None);
    assert_eq!(X.reloc_call(R_X86_64_PLT32, 0, &plt), None);
    assert_eq!(X.reloc_call(R_X86_64_64, 1, &plt), None);
    assert_eq!(X.reloc_call(R_X86_64_PLT32, u64::MAX, &plt), None);
}

#[test]
fn pointer_relocs() {
    assert_eq!(X.pointer_reloc(R_X86_64_64), Some(PointerReloc::Absolute));
    assert_eq!(X.pointer_reloc(R_X86_64_PC64), Some(PointerReloc::PcRelative));
    assert_eq!(X.pointer_reloc(R_X86_64_RELATIVE), Some(PointerReloc::Relative));
    assert_eq!(X.pointer_reloc(R_X86_64_PLT32), None);
}
