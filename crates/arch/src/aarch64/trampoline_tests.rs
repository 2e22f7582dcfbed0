//! The trampolines through objdump: what they save, what they pass, how
//! they call and return.

use super::super::trampoline::{FRAME_SIZE, OUR_RECORD, PC_SLOT, REGS_SLOTS, SITE_RECORD, SP_SLOT};
use super::super::Aarch64;
use super::test_tools::disassemble;
use crate::plan::{Family, Patcher, TrampolineSpec};

const CALLBACK: u64 = 0x7f12_3456_789c;

/// The trampoline's instructions (the literal left out), after checking
/// the literal holds the callback and is what `blr x16` calls.
fn listing(at: u64, spec: &TrampolineSpec) -> Option<Vec<String>> {
    let code = Aarch64.trampoline(at, spec).unwrap();
    let lit = code.len() - 8;
    assert_eq!((at + lit as u64) % 8, 0, "literal aligned");
    assert_eq!(code[lit..], spec.callback.to_le_bytes());
    let insns = disassemble(&code[..lit], at)?;
    let mut texts: Vec<String> = insns.iter().map(|i| i.text.clone()).collect();
    while texts.last().is_some_and(|t| t == "nop") {
        texts.pop();
    }
    let call = texts.iter().position(|t| t == "blr x16").expect("blr x16");
    assert_eq!(texts[call - 1], format!("ldr x16, {:#x}", at + lit as u64));
    assert_eq!(texts.iter().filter(|t| t.starts_with("blr")).count(), 1);
    Some(texts)
}

/// `needles` appear in `texts` in this order.
fn in_order(texts: &[String], needles: &[String]) {
    let mut from = 0;
    for n in needles {
        match texts[from..].iter().position(|t| t == n) {
            Some(i) => from += i + 1,
            None => panic!("`{n}` missing (in order) in\n{}", texts.join("\n")),
        }
    }
}

fn s(text: &str) -> String {
    text.to_string()
}

/// Pairs `x{r}, x{r+1}` stored/loaded at their slots: `stp x0, x1, [sp]`.
fn pairs(op: &str, last: u32) -> Vec<String> {
    (0..=last)
        .step_by(2)
        .map(|r| match r {
            0 => format!("{op} x0, x1, [sp]"),
            _ => format!("{op} x{r}, x{}, [sp, #{}]", r + 1, 8 * r),
        })
        .collect()
}

/// No instruction writes a callee-saved register or `sp`, except the
/// frame's allocation and release and `x29`'s frame record.
fn callee_saved_untouched(texts: &[String]) {
    let frame = format!("{FRAME_SIZE:#x}");
    for t in texts {
        let (mnemonic, ops) = t.split_once(' ').unwrap_or((t, ""));
        if ["stp", "str", "blr", "ret", "br"].contains(&mnemonic) || ops.is_empty() {
            assert!(!ops.contains("]!") && !ops.contains("], #"), "`{t}` moves sp");
            continue;
        }
        let dests: Vec<&str> = match mnemonic {
            "ldp" => ops.split(", ").take(2).collect(),
            _ => ops.split(", ").take(1).collect(),
        };
        for d in dests {
            let callee = (19..=28).any(|r| d == format!("x{r}"));
            assert!(!callee, "`{t}` writes a callee-saved register");
            if d == "sp" {
                assert!(ops.ends_with(&frame) && ops.starts_with("sp, sp, #"), "`{t}`");
            }
        }
    }
}

#[test]
fn frame_layout_is_consistent() {
    assert_eq!(FRAME_SIZE % 16, 0);
    assert_eq!((SP_SLOT, PC_SLOT, REGS_SLOTS), (31, 32, 33));
    assert!(REGS_SLOTS as i32 * 8 <= OUR_RECORD && OUR_RECORD + 16 <= SITE_RECORD);
    assert_eq!(SITE_RECORD as u32 + 16, FRAME_SIZE);
    assert_eq!(Aarch64.trampoline_align(Family::Entry), 16);
    assert!(Aarch64.trampoline(0x1002, &spec(Family::Entry, false)).is_err());
}

fn spec(family: Family, regs: bool) -> TrampolineSpec {
    TrampolineSpec {
        family,
        callback: CALLBACK,
        regs,
    }
}

#[test]
fn entry_trampolines() {
    for at in [0x7f00_0000_0000u64, 0x7f00_0000_0010, 0x4000_0004] {
        for regs in [false, true] {
            let Some(t) = listing(at, &spec(Family::Entry, regs)) else {
                return;
            };
            assert_eq!(t[..2], [s("bti c"), format!("sub sp, sp, #{FRAME_SIZE:#x}")]);
            let call = t.iter().position(|x| x == "blr x16").unwrap();
            let (before, after) = t.split_at(call);
            in_order(before, &pairs("stp", if regs { 28 } else { 8 }));
            let site_record = [
                s("stp x29, x9, [sp, #288]"),
                s("add x29, sp, #0x120"),
                s("stp x29, x30, [sp, #272]"),
                s("add x29, sp, #0x110"),
                s("mov x0, x30"),
                s("mov x1, x9"),
            ];
            in_order(before, &site_record);
            if regs {
                in_order(
                    before,
                    &[
                        s("str x9, [sp, #240]"),
                        format!("add x16, sp, #{FRAME_SIZE:#x}"),
                        s("str x16, [sp, #248]"),
                        s("sub x16, x0, #0x8"),
                        s("str x16, [sp, #256]"),
                        s("mov x2, sp"),
                    ],
                );
            } else {
                in_order(before, &[s("str x29, [sp, #232]"), s("mov x2, xzr")]);
            }
            in_order(after, &pairs("ldp", 8));
            let n = after.len();
            in_order(&after[n - 5..], &[s("ldr x29, [sp, #232]")]);
            assert!(after.contains(&s("ldr x16, [sp, #280]")));
            assert_eq!(
                after[n - 3..],
                [
                    s("mov x30, x9"),
                    format!("add sp, sp, #{FRAME_SIZE:#x}"),
                    s("ret x16")
                ]
            );
            callee_saved_untouched(&t);
        }
    }
}

#[test]
fn mcount_trampolines() {
    for at in [0x7f00_0000_0000u64, 0x4000_0004] {
        for regs in [false, true] {
            let Some(t) = listing(at, &spec(Family::Mcount, regs)) else {
                return;
            };
            assert_eq!(t[..2], [s("bti c"), format!("sub sp, sp, #{FRAME_SIZE:#x}")]);
            let call = t.iter().position(|x| x == "blr x16").unwrap();
            let (before, after) = t.split_at(call);
            in_order(before, &pairs("stp", if regs { 28 } else { 8 }));
            in_order(
                before,
                &[
                    s("stp x29, x30, [sp, #272]"),
                    s("mov x0, x30"),
                    s("ldr x30, [x29, #8]"),
                    s("xpaclri"),
                    s("mov x1, x30"),
                    s("add x29, sp, #0x110"),
                ],
            );
            assert!(!before.iter().any(|x| x.contains("#288")), "no stand-in record");
            if regs {
                in_order(
                    before,
                    &[
                        s("str x1, [sp, #240]"),
                        s("str x16, [sp, #248]"),
                        s("sub x16, x0, #0x4"),
                        s("str x16, [sp, #256]"),
                        s("mov x2, sp"),
                    ],
                );
            } else {
                in_order(before, &[s("str x29, [sp, #232]"), s("mov x2, xzr")]);
            }
            in_order(after, &pairs("ldp", 8));
            let n = after.len();
            assert_eq!(
                after[n - 3..],
                [
                    s("ldp x29, x30, [sp, #272]"),
                    format!("add sp, sp, #{FRAME_SIZE:#x}"),
                    s("ret")
                ]
            );
            callee_saved_untouched(&t);
        }
    }
}
