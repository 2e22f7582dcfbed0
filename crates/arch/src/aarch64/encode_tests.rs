//! Every encoder against GNU `as`: a list of instructions is assembled and
//! linked at a fixed address, and each word must equal the encoder's.

use super::super::encode::*;
use super::test_tools::assemble;

const BASE: u64 = 0x4000_0000;

/// Instructions in assembler syntax and the encoders' words, laid out from
/// `BASE` one word each.
struct Listing {
    lines: Vec<(String, u32)>,
    defsyms: Vec<(String, u64)>,
}

impl Listing {
    /// Address of the next instruction.
    fn pc(&self) -> u64 {
        BASE + 4 * self.lines.len() as u64
    }

    fn add(&mut self, text: impl Into<String>, word: u32) {
        self.lines.push((text.into(), word));
    }

    /// A PC-relative instruction to an absolute target, through a symbol.
    fn to(&mut self, text: &str, target: u64, word: impl FnOnce(u64) -> Option<u32>) {
        let n = self.lines.len();
        let word = word(self.pc()).unwrap_or_else(|| panic!("{text} {target:#x} out of reach"));
        self.defsyms.push((format!("T{n}"), target));
        self.add(format!("{text}T{n}"), word);
    }

    fn check(&self) {
        let source: String = self.lines.iter().map(|(t, _)| format!("\t{t}\n")).collect();
        let Some(words) = assemble(&source, BASE, &self.defsyms) else {
            return;
        };
        assert_eq!(words.len(), self.lines.len());
        for ((text, ours), theirs) in self.lines.iter().zip(words) {
            assert_eq!(
                *ours,
                theirs,
                "`{}`: ours {ours:#010x}, as {theirs:#010x}",
                text.trim()
            );
        }
    }
}

#[test]
fn encoders_match_the_assembler() {
    use reg::*;
    let mut l = Listing {
        lines: Vec::new(),
        defsyms: Vec::new(),
    };
    l.add("nop", NOP);
    l.add("bti c", BTI_C);
    l.add("xpaclri", XPACLRI);
    l.add("hint #34", hint(34));
    l.add("brk #0x3e8", brk(1000));
    l.add("mov x9, x30", mov(X9, LR));
    l.add("mov x30, x9", mov(LR, X9));
    l.add("mov x2, xzr", mov(X2, XZR));
    l.add("mov x0, x30", mov(X0, LR));
    l.add("mov x29, sp", mov_sp(FP, SP));
    l.add("mov sp, x29", mov_sp(SP, FP));
    l.add("mov x2, sp", mov_sp(X2, SP));
    l.add("add x16, sp, #304", add_imm(X16, SP, 304));
    l.add("sub sp, sp, #304", sub_imm(SP, SP, 304));
    l.add("add sp, sp, #304", add_imm(SP, SP, 304));
    l.add("add x0, x1, #4095", add_imm(X0, X1, 4095));
    l.add("add x0, x1, #1, lsl #12", add_imm(X0, X1, 4096));
    l.add("sub x3, x4, #0xfff, lsl #12", sub_imm(3, 4, 0xfff000));
    l.add("sub x16, x0, #8", sub_imm(X16, X0, 8));
    l.add("movz x16, #0x1234, lsl #16", movz(X16, 0x1234, 16));
    l.add("movz x0, #0", movz(X0, 0, 0));
    l.add("movk x16, #0xbeef, lsl #48", movk(X16, 0xbeef, 48));
    l.add("movk x17, #0xffff", movk(X17, 0xffff, 0));
    for (i, w) in mov_imm64(X17, 0xdead_0000_beef_1234).into_iter().enumerate() {
        let text = [
            "movz x17, #0x1234",
            "movk x17, #0xbeef, lsl #16",
            "movk x17, #0xdead, lsl #48",
        ][i];
        l.add(text, w);
    }
    l.add("br x16", br(X16));
    l.add("blr x16", blr(X16));
    l.add("ret", RET);
    l.add("ret x16", ret(X16));
    l.add("ldr x16, [sp, #280]", ldr(X16, SP, 280, Index::Offset));
    l.add("ldr x30, [x29, #8]", ldr(LR, FP, 8, Index::Offset));
    l.add("ldr x0, [x1, #32760]", ldr(X0, X1, 32760, Index::Offset));
    l.add("str x29, [sp, #232]", str(FP, SP, 232, Index::Offset));
    l.add("str x1, [sp, #-16]!", str(X1, SP, -16, Index::Pre));
    l.add("ldr x1, [sp], #16", ldr(X1, SP, 16, Index::Post));
    l.add("ldr x2, [x3, #-256]!", ldr(X2, 3, -256, Index::Pre));
    l.add("str x4, [x5], #255", str(4, 5, 255, Index::Post));
    l.add("stp x29, x30, [sp, #-32]!", stp(FP, LR, SP, -32, Index::Pre));
    l.add("ldp x29, x30, [sp], #32", ldp(FP, LR, SP, 32, Index::Post));
    l.add("stp x0, x1, [sp]", stp(X0, X1, SP, 0, Index::Offset));
    l.add("stp x28, x29, [sp, #224]", stp(28, FP, SP, 224, Index::Offset));
    l.add("ldp x8, x9, [sp, #64]", ldp(X8, X9, SP, 64, Index::Offset));
    l.add("stp x1, x2, [x3, #-512]", stp(X1, X2, 3, -512, Index::Offset));
    l.add("ldp x1, x2, [x3, #504]!", ldp(X1, X2, 3, 504, Index::Pre));
    l.add("stp x29, x9, [sp, #288]", stp(FP, X9, SP, 288, Index::Offset));

    // Branches and PC-relative forms at their limits.
    for delta in [0i64, 4, -4, 0x7ff_fffc, -0x800_0000, 0x123_4560] {
        let t = (l.pc() as i64 + delta) as u64;
        l.to("bl ", t, |pc| bl(pc, t));
        let t = (l.pc() as i64 + delta) as u64;
        l.to("b ", t, |pc| b(pc, t));
    }
    for delta in [8i64, -8, 0xf_fffc, -0x10_0000] {
        let t = (l.pc() as i64 + delta) as u64;
        l.to("ldr x16, ", t, |pc| ldr_literal(X16, pc, t));
        let t = (l.pc() as i64 + delta + 1) as u64;
        l.to("adr x1, ", t, |pc| adr(X1, pc, t));
    }
    for delta in [0x1234i64, -0x1000, 0xffff_f000 - 0x4000_0000, -0x4000_0000] {
        let t = (l.pc() as i64 + delta) as u64;
        l.to("adrp x16, ", t, |pc| adrp(X16, pc, t));
    }
    l.check();
}

#[test]
fn out_of_reach_and_misaligned_targets_are_refused() {
    let pc = 0x7f00_0000_1000u64;
    assert!(bl(pc, pc + BRANCH_MAX_FORWARD).is_some());
    assert!(bl(pc, pc - BRANCH_MAX_BACKWARD).is_some());
    assert!(bl(pc, pc + BRANCH_MAX_FORWARD + 4).is_none());
    assert!(bl(pc, pc - BRANCH_MAX_BACKWARD - 4).is_none());
    assert!(bl(pc, pc + 2).is_none());
    assert!(bl(pc + 2, pc + 8).is_none());
    assert!(b(pc, 0).is_none());
    assert!(ldr_literal(16, pc, pc + 0x10_0000).is_none());
    assert!(ldr_literal(16, pc, pc - 0x10_0004).is_none());
    assert!(ldr_literal(16, pc, pc + 6).is_none());
    assert!(adr(0, pc, pc + 0x10_0000).is_none());
    assert!(adrp(0, pc, pc + (1 << 32)).is_none());
    assert!(adrp(0, pc, pc - (1 << 32)).is_some());
    assert!(adrp(0, pc, pc - (1 << 32) - 0x1000).is_none());
}

#[test]
fn bl_decodes_back() {
    let pc = 0xffff_8000_0000u64;
    for t in [pc, pc + 4, pc - BRANCH_MAX_BACKWARD, pc + BRANCH_MAX_FORWARD] {
        assert_eq!(decode_bl(bl(pc, t).unwrap(), pc), Some(t));
    }
    assert_eq!(decode_bl(b(pc, pc + 8).unwrap(), pc), None);
    assert_eq!(decode_bl(NOP, pc), None);
}
