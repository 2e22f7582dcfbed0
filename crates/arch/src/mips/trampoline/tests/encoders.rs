//! The encoders of `encode.rs` against GNU `as`: each line of a `.s` file
//! assembled, `.text` extracted with `objcopy -O binary`, compared word by
//! word with what the encoder gives.

use super::{have, scratch};
use crate::mips::encode::{reg::*, *};
use crate::mips::{Mips, MIPS32_BE, MIPS32_LE, MIPS64_BE, MIPS64_LE};
use std::process::Command;

/// `(assembler text, encoder's word)`, MIPS32 instructions. Branch offsets
/// are written as `.+4+4*off`, as the encoders count them from the delay
/// slot. Registers are numbered, for no ABI's names to get in the way.
fn mips32() -> Vec<(&'static str, u32)> {
    vec![
        ("lui $25, 0x8001", lui(T9, 0x8001)),
        ("lui $1, 0", lui(AT, 0)),
        ("addiu $29, $29, -168", addiu(SP, SP, -168)),
        ("addiu $3, $3, 0x7fff", addiu(V1, V1, 0x7fff)),
        ("addiu $6, $29, 16", addiu(6, SP, 16)),
        ("ori $25, $25, 0xbeef", ori(T9, T9, 0xbeef)),
        ("lw $31, 140($29)", lw(RA, 140, SP)),
        ("lw $8, -4($4)", lw(T0_O32, -4, A0)),
        ("sw $28, 128($29)", sw(GP, 128, SP)),
        ("sw $0, 16($29)", sw(ZERO, 16, SP)),
        ("jr $31", jr(RA)),
        ("jr $1", jr(AT)),
        ("jalr $25", jalr(RA, T9)),
        ("jalr $1, $31", jalr(AT, RA)),
        ("move $31, $1", move_(RA, AT)),
        ("or $1, $31, $0", move_(AT, RA)),
        ("addu $4, $5, $6", addu(4, 5, 6)),
        ("b .+4+4*4", b(4)),
        ("b .+4-4*3", b(-3)),
        ("beq $4, $0, .+4+4*7", beq(A0, ZERO, 7)),
        ("bne $8, $0, .+4+4*40", bne(T0_O32, ZERO, 40)),
        ("bnel $12, $0, .+4+4*2", bnel(T0_N64, ZERO, 2)),
        ("addiu $8, $0, 1", li(T0_O32, 1)),
        ("addiu $12, $0, 0", li(T0_N64, 0)),
        ("jal 0x3001000", jal(0x0300_1000)),
        ("jal 0xffffffc", jal(0x0fff_fffc)),
        ("j 0x400100", j(0x0040_0100)),
        ("sdc1 $f12, 152($29)", sdc1(12, 152, SP)),
        ("sdc1 $f14, 160($29)", sdc1(14, 160, SP)),
        ("ldc1 $f12, 152($29)", ldc1(12, 152, SP)),
        ("ldc1 $f14, -8($4)", ldc1(14, -8, A0)),
        ("nop", NOP),
    ]
}

/// MIPS64 instructions (added to the MIPS32 ones).
fn mips64() -> Vec<(&'static str, u32)> {
    vec![
        ("daddiu $29, $29, -336", daddiu(SP, SP, -336)),
        ("daddiu $25, $25, -32768", daddiu(T9, T9, -32768)),
        ("daddu $2, $3, $4", daddu(2, 3, 4)),
        ("ld $31, 248($29)", ld(RA, 248, SP)),
        ("ld $12, -16($29)", ld(T0_N64, -16, SP)),
        ("sd $30, 240($29)", sd(FP, 240, SP)),
        ("sd $11, 88($29)", sd(11, 88, SP)),
        ("dsll $25, $25, 16", dsll(T9, T9, 16)),
        ("dsll $3, $3, 0", dsll(V1, V1, 0)),
        ("dsll32 $3, $3, 0", dsll32(V1, V1, 0)),
        ("dsll32 $25, $4, 16", dsll32(T9, A0, 16)),
        ("sdc1 $f19, 320($29)", sdc1(19, 320, SP)),
        ("ldc1 $f17, 304($29)", ldc1(17, 304, SP)),
    ]
}

/// Assembles `lines` for `m` and returns the words of `.text`.
fn assemble(m: &Mips, lines: &[&str]) -> Option<Vec<u32>> {
    let prefix = if m.n64 {
        "mips64el-linux-gnuabi64"
    } else if m.big_endian {
        "mips-linux-gnu"
    } else {
        "mipsel-linux-gnu"
    };
    let (as_, objcopy) = (format!("{prefix}-as"), format!("{prefix}-objcopy"));
    if !have(&as_) || !have(&objcopy) {
        return None;
    }
    let dir = scratch("as");
    // Non-PIC (`pic0`), for `jal`/`j` to stay themselves.
    let src = format!(
        ".option pic0\n.set noreorder\n.set noat\n.text\n{}\n",
        lines.join("\n")
    );
    std::fs::write(dir.join("t.s"), src).unwrap();
    let arch: &[&str] = if m.n64 {
        &["-march=mips64r2", "-mabi=64"]
    } else {
        &["-march=mips32r2", "-mabi=32"]
    };

    let st = Command::new(&as_)
        .args(arch)
        .arg(if m.big_endian { "-EB" } else { "-EL" })
        .args(["-o", "t.o", "t.s"])
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(st.success(), "{as_} failed on:\n{}", lines.join("\n"));
    let st = Command::new(&objcopy)
        .args(["-O", "binary", "-j", ".text", "t.o", "t.bin"])
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(st.success(), "{objcopy} failed");
    let bytes = std::fs::read(dir.join("t.bin")).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    Some(m.words(&bytes))
}

#[test]
fn encoders_match_gnu_as() {
    for m in [MIPS32_BE, MIPS32_LE, MIPS64_BE, MIPS64_LE] {
        let mut cases = mips32();
        if m.n64 {
            cases.extend(mips64());
        }
        let lines: Vec<&str> = cases.iter().map(|c| c.0).collect();
        let Some(words) = assemble(&m, &lines) else {
            continue;
        };
        // One word per line; `.text` is padded to its alignment with nops.
        assert!(
            words.len() >= cases.len() && words[cases.len()..].iter().all(|w| *w == NOP),
            "{m:?}: {words:x?}"
        );
        for ((text, ours), theirs) in cases.iter().zip(words) {
            assert_eq!(
                *ours, theirs,
                "{m:?} `{text}`: ours {ours:#010x}, as {theirs:#010x}"
            );
        }
        // And the byte order of `Mips::code`.
        let code = m.code(&[lui(T9, 0x1234)]);
        assert_eq!(
            code,
            if m.big_endian {
                vec![0x3c, 0x19, 0x12, 0x34]
            } else {
                vec![0x34, 0x12, 0x19, 0x3c]
            }
        );
    }
}
