//! The trampolines and veneers read back with the real disassembler
//! (binutils' `objdump`), and the encoders checked against the real
//! assembler. The trampolines run under `qemu-user` in `crates/emu`
//! (`tests/mips_trampolines.rs`).
//!
//! Tests that need a cross tool say so on stderr and pass when it is
//! missing.

use super::*;
use crate::mips::{MIPS32_BE, MIPS32_LE, MIPS64_BE, MIPS64_LE};
use std::path::PathBuf;
use std::process::Command;

mod encoders;

const ALL: [Mips; 4] = [MIPS32_BE, MIPS32_LE, MIPS64_BE, MIPS64_LE];

/// The binutils prefix that disassembles `m` (either byte order).
fn binutils(m: &Mips) -> &'static str {
    match (m.n64, m.big_endian) {
        (true, _) => "mips64el-linux-gnuabi64",
        (false, true) => "mips-linux-gnu",
        (false, false) => "mipsel-linux-gnu",
    }
}

/// Whether `prog` runs; says on stderr that a test is skipped if not.
pub(super) fn have(prog: &str) -> bool {
    let ok = Command::new(prog)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        // CI installs the cross tools (.ci/run): missing there is a failure.
        assert!(std::env::var_os("CI").is_none(), "{prog} is not installed");
        // Written to stderr directly: the test harness shows it (it
        // captures `eprintln!`).
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!("SKIPPED: {prog} is not installed (.ci/run installs it)\n"),
        );
    }
    ok
}

/// A fresh scratch directory.
pub(super) fn scratch(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("fntrace-mips-{}-{name}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One disassembled instruction.
#[derive(Debug, Clone)]
struct Insn {
    addr: u64,
    op: String,
    args: Vec<String>,
}

impl Insn {
    fn is(&self, text: &str) -> bool {
        let (op, args) = text.split_once(' ').unwrap_or((text, ""));
        self.op == op && self.args.join(",") == args
    }
}

/// `code` placed at `at`, as `objdump -D -b binary` reads it.
fn disassemble(m: &Mips, at: u64, code: &[u8]) -> Option<Vec<Insn>> {
    let tool = format!("{}-objdump", binutils(m));
    if !have(&tool) {
        return None;
    }
    let dir = scratch("dis");
    let file = dir.join("code.bin");
    std::fs::write(&file, code).unwrap();
    let out = Command::new(&tool)
        .args([
            "-D",
            "-z",
            "-b",
            "binary",
            "-m",
            if m.n64 { "mips:isa64r2" } else { "mips:isa32r2" },
        ])
        .arg(if m.big_endian { "-EB" } else { "-EL" })
        .arg(format!("--adjust-vma={at:#x}"))
        .args(["-M", if m.n64 { "gpr-names=64" } else { "gpr-names=32" }])
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "{tool}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let insns: Vec<Insn> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.trim_start().splitn(4, '\t');
            let addr = u64::from_str_radix(f.next()?.strip_suffix(':')?, 16).ok()?;
            let _word = f.next()?;
            let op = f.next()?.trim().to_string();
            let args = f
                .next()
                .map(|a| a.split(',').map(|s| s.trim().to_string()).collect())
                .unwrap_or_default();
            Some(Insn { addr, op, args })
        })
        .collect();
    assert_eq!(insns.len() * 4, code.len(), "{text}");
    assert!(insns.iter().all(|i| i.op != ".word"), "undecodable word:\n{text}");
    Some(insns)
}

/// An immediate as objdump prints it (`0x1234` or `-42`).
fn imm(s: &str) -> i64 {
    match s.strip_prefix("0x") {
        Some(h) => i64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

/// The value `insns` build in register `r` (`lui`, `addiu`, `daddiu`,
/// `ori`, `dsll`) as `m`'s registers hold it.
fn built(m: &Mips, insns: &[Insn], r: &str) -> u64 {
    let mut v: i64 = 0;
    let writes =
        |i: &&Insn| i.args.first().map(String::as_str) == Some(r) && !["sw", "sd"].contains(&i.op.as_str());
    for i in insns.iter().filter(writes) {
        let a = |k: usize| i.args[k].as_str();
        v = match i.op.as_str() {
            "lui" => (imm(a(1)) << 16) as i32 as i64,
            "addiu" if a(1) == r => v.wrapping_add(imm(a(2))) as i32 as i64,
            "daddiu" if a(1) == r => v.wrapping_add(imm(a(2))),
            "ori" if a(1) == r => v | imm(a(2)),
            "dsll" if a(1) == r => v << imm(a(2)),
            _ => panic!("unexpected write of {r}: {i:?}"),
        };
    }
    if m.n64 {
        v as u64
    } else {
        v as u32 as u64
    }
}

/// ABI register names, as objdump prints them.
fn names(m: &Mips) -> [&'static str; 32] {
    let mut n = [
        "zero", "at", "v0", "v1", "a0", "a1", "a2", "a3", "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7",
        "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "t8", "t9", "k0", "k1", "gp", "sp", "s8", "ra",
    ];
    if m.n64 {
        n[8..16].copy_from_slice(&["a4", "a5", "a6", "a7", "t0", "t1", "t2", "t3"]);
    }
    n
}

/// What the trampolines promise to preserve, written out independently
/// of [`preserved`].
fn promised(m: &Mips) -> Vec<&'static str> {
    let mut v = vec!["at", "v0", "v1", "a0", "a1", "a2", "a3"];
    v.extend(if m.n64 {
        ["a4", "a5", "a6", "a7", "t0", "t3"].as_slice()
    } else {
        &["t0", "t7"]
    });
    v.extend(["t9", "gp", "s8", "ra"]);
    v
}

const CB32: u64 = 0x0040_1234;
const CB64: u64 = 0x0000_0001_2003_8ac8;

fn check_trampoline(m: &Mips, family: Family, regs: bool, callback: u64) {
    let at = if m.n64 { 0x7fff_0000 } else { 0x3001_0000 };
    let spec = TrampolineSpec {
        family,
        callback,
        regs,
    };
    let code = trampoline(m, at, &spec).unwrap();
    let Some(d) = disassemble(m, at, &code) else {
        return;
    };
    let ctx = format!("{m:?} {spec:?}:\n{d:#?}");
    let (add, st, ldi, w) = if m.n64 {
        ("daddiu", "sd", "ld", 8)
    } else {
        ("addiu", "sw", "lw", 4)
    };
    let size = if m.n64 { 336 } else { 168 };
    let base = if m.n64 { 0 } else { 16 };
    let regs_at = |i: i64| format!("{}(sp)", base + w * i);
    let call = d.iter().position(|i| i.is("jalr t9")).expect(&ctx);
    let (before, after) = (&d[..call], &d[call + 1..]);
    assert!(d[0].is(&format!("{add} sp,sp,-{size}")), "{ctx}");
    // The callback's address in t9 and the arguments.
    assert_eq!(built(m, before, "t9"), callback, "{ctx}");
    // Before the call: in its delay slot, `ra` is already overwritten.
    let (ip, parent) = if family == Family::Mcount {
        ("ra", "at")
    } else {
        ("at", "ra")
    };
    assert!(d[call - 2].is(&format!("move a0,{ip}")), "{ctx}");
    assert!(d[call - 1].is(&format!("move a1,{parent}")), "{ctx}");
    assert!(d[call + 1].is("nop"), "{ctx}");
    // Every promised register saved before the call and reloaded after it,
    // from its regs slot; the FP argument registers likewise.
    let n = names(m);
    for r in promised(m) {
        let slot = regs_at(n.iter().position(|x| *x == r).unwrap() as i64);
        let saves = before
            .iter()
            .filter(|i| i.is(&format!("{st} {r},{slot}")))
            .count();
        let loads = after
            .iter()
            .filter(|i| i.is(&format!("{ldi} {r},{slot}")))
            .count();
        assert_eq!((saves, loads), (1, 1), "{r} at {slot}: {ctx}");
    }
    let fprs: &[u32] = if m.n64 {
        &[12, 13, 14, 15, 16, 17, 18, 19]
    } else {
        &[12, 14]
    };
    let fpr_base = if m.n64 { 264 } else { 152 };
    for (k, f) in fprs.iter().enumerate() {
        let at = format!("$f{f},{}(sp)", fpr_base + 8 * k);
        assert_eq!(
            before.iter().filter(|i| i.is(&format!("sdc1 {at}"))).count(),
            1,
            "{at}: {ctx}"
        );
        assert_eq!(
            after.iter().filter(|i| i.is(&format!("ldc1 {at}"))).count(),
            1,
            "{at}: {ctx}"
        );
    }
    // Nothing but loads after the call until the return, and sp back.
    let tail = &after[1..];
    let loads = tail
        .iter()
        .filter(|i| i.op == "lw" || i.op == "ld" || i.op == "ldc1")
        .count();
    assert_eq!(loads, tail.len() - 3, "{ctx}");
    let k = d.len();
    match family {
        Family::Mcount => {
            let back = if m.n64 { size } else { size + 8 };
            assert!(d[k - 3].is(&format!("{add} sp,sp,{back}")), "{ctx}");
            assert!(d[k - 2].is("jr ra") && d[k - 1].is("move ra,at"), "{ctx}");
        }
        Family::Entry => {
            assert!(d[k - 3].is(&format!("{add} sp,sp,{size}")), "{ctx}");
            assert!(d[k - 2].is("jr at") && d[k - 1].is("nop"), "{ctx}");
        }
    }
    // Where the regs frame is filled, and when.
    let a2 = before
        .iter()
        .rposition(|i| i.args.first().map(String::as_str) == Some("a2"))
        .unwrap();
    let regs_frame = if family == Family::Entry {
        // `t0` is $8 in o32's names and $12 in n64's: the flag register.
        let b = before.iter().position(|i| i.op == "bnez").expect(&ctx);
        assert!(
            before[b].args[0] == "t0" && before[b + 1].is("move a2,zero"),
            "{ctx}"
        );
        let target = imm(&before[b].args[1]) as u64;
        let lui = before
            .iter()
            .find(|i| i.op == "lui" && i.args[0] == "t9")
            .expect(&ctx);
        assert_eq!(target, lui.addr, "the no-regs branch goes to the call: {ctx}");
        Some(&before[b + 2..])
    } else if regs {
        Some(before)
    } else {
        assert!(before[a2].is("move a2,zero"), "{ctx}");
        None
    };
    if let Some(part) = regs_frame {
        assert!(part.iter().any(|i| i.is(&format!("{add} a2,sp,{base}"))), "{ctx}");
        for (r, name) in n.iter().enumerate().filter(|(r, _)| *r != 29) {
            let stored = before
                .iter()
                .any(|i| i.is(&format!("{st} {name},{}", regs_at(r as i64))));
            assert!(stored, "{name} not in regs: {ctx}");
        }
        let adjust = if family == Family::Mcount && !m.n64 {
            size + 8
        } else {
            size
        };
        let sp = part
            .iter()
            .position(|i| i.is(&format!("{add} a0,sp,{adjust}")))
            .expect(&ctx);
        assert!(part[sp + 1].is(&format!("{st} a0,{}", regs_at(29))), "{ctx}");
        assert!(
            part.iter().any(|i| i.is(&format!("{st} {ip},{}", regs_at(32)))),
            "pc: {ctx}"
        );
    }
}

#[test]
fn trampolines_disassemble_as_designed() {
    for m in &ALL {
        for family in [Family::Mcount, Family::Entry] {
            for regs in [false, true] {
                check_trampoline(m, family, regs, CB32);
                if m.n64 {
                    check_trampoline(m, family, regs, CB64);
                    check_trampoline(m, family, regs, 0xffff_ffff_8001_0000);
                    check_trampoline(m, family, regs, 0xc000_0000_dead_beec);
                } else {
                    check_trampoline(m, family, regs, 0xfffe_8ffc);
                }
            }
        }
    }
}

#[test]
fn entry_trampolines_need_a_64k_aligned_lui_address() {
    let spec = TrampolineSpec {
        family: Family::Entry,
        callback: CB32,
        regs: true,
    };
    for m in &ALL {
        assert!(trampoline(m, 0x3001_0000, &spec).is_ok());
        assert!(trampoline(m, 0x3001_0010, &spec).is_err());
        assert!(trampoline(m, 0xffff_ffff_8000_0000, &spec).is_ok() == m.n64);
    }
    assert!(trampoline(&MIPS64_LE, 0x1_2000_0000, &spec).is_err());
    let far = TrampolineSpec {
        callback: 0x1_0000_0000,
        family: Family::Mcount,
        ..spec
    };
    assert!(trampoline(&MIPS32_LE, 0x1000, &far).is_err());
    assert!(trampoline(&MIPS64_LE, 0x1000, &far).is_ok());
    let odd = TrampolineSpec {
        callback: 0x1002,
        ..far
    };
    assert!(trampoline(&MIPS64_LE, 0x1000, &odd).is_err());
}

#[test]
fn veneers_jump_through_v1() {
    let cases: [(Mips, u64); 7] = [
        (MIPS32_BE, 0x3000_0000),
        (MIPS32_LE, 0x7fff_8000),
        (MIPS32_LE, 0x8000_8004),
        (MIPS64_BE, 0x7fff_8000),
        (MIPS64_LE, 0xffff_ffff_8000_1000),
        (MIPS64_LE, 0x0000_00ff_f7ff_8000),
        (MIPS64_BE, 0x8000_7fff_8000_8000),
    ];
    for (m, to) in cases {
        let at = 0x1000_0000;
        let code = veneer(&m, at, to).unwrap();
        assert_eq!(code.len(), veneer_len(&m));
        assert_eq!(veneer_len(&m), if m.n64 { 32 } else { 16 });
        let Some(d) = disassemble(&m, at, &code) else {
            continue;
        };
        let jr = d.iter().position(|i| i.is("jr v1")).expect("jr v1");
        assert_eq!(built(&m, &d[..jr], "v1"), to, "{m:?} {d:#?}");
        assert!(d[jr + 1..].iter().all(|i| i.is("nop")), "{d:#?}");
        let short = !m.n64 || fits_hi_lo(to);
        assert_eq!(jr, if short { 2 } else { 6 }, "{d:#?}");
    }
    assert!(veneer(&MIPS32_BE, 0, 0x1_0000_0000).is_err());
    assert!(veneer(&MIPS64_BE, 0, 0x1002).is_err());
}

/// The entry sites' `jalr at, at`, which gas refuses to assemble (`rd ==
/// rs` is UNPREDICTABLE in the ISA: were an exception taken in the delay
/// slot, the re-executed `jalr` would jump to the clobbered `at`), read
/// back by the disassembler.
#[test]
fn jalr_at_at_disassembles() {
    for m in &ALL {
        let word = jalr(AT, AT);
        assert_eq!(word, 0x0020_0809);
        let Some(d) = disassemble(m, 0x1000, &m.code(&[word, li(m.t0(), 1)])) else {
            continue;
        };
        assert!(d[0].is("jalr at,at") && d[1].is("li t0,1"), "{d:?}");
    }
}

/// The frame as the module documentation gives it.
#[test]
fn frame_layout() {
    for m in &ALL {
        let f = frame(m);
        let (w, regs, fpr, size) = if m.n64 {
            (8, 0, 264, 336)
        } else {
            (4, 16, 152, 168)
        };
        assert_eq!((f.word, f.regs, f.fpr, f.size), (w, regs, fpr, size));
        assert_eq!(f.slot(REGS_PC), regs + 32 * w);
        assert!(f.slot(REGS_SLOTS) <= f.fpr && f.fpr % 8 == 0);
        assert!(f.fpr + 8 * f.fprs.len() as i16 <= f.size);
        assert_eq!(f.size % if m.n64 { 16 } else { 8 }, 0);
    }
}
