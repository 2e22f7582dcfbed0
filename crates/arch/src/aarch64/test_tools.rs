//! The real AArch64 toolchain as the tests' independent truth: GNU `as`
//! and `ld` to encode, `objdump` to decode. A test skips (with a note on
//! stderr) when the cross tools are not installed.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

const AS: &str = "aarch64-linux-gnu-as";
const LD: &str = "aarch64-linux-gnu-ld";
const OBJCOPY: &str = "aarch64-linux-gnu-objcopy";
const OBJDUMP: &str = "aarch64-linux-gnu-objdump";

/// A fresh scratch directory.
pub fn scratch() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "fntrace-a64-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a tool; `None` if it is not installed, a panic if it fails.
pub fn run(cmd: &mut Command) -> Option<Vec<u8>> {
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // CI installs the cross tools (.ci/run): missing there is a failure.
            assert!(std::env::var_os("CI").is_none(), "{cmd:?} is not installed");
            // Written to stderr directly: the test harness shows it (it
            // captures `eprintln!`).
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!("SKIPPED: {cmd:?} is not installed (.ci/run installs it)\n"),
            );
            return None;
        }
        Err(e) => panic!("{cmd:?}: {e}"),
    };
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(out.stdout)
}

/// Assembles `source` and links it with `.text` at `base` and the symbols
/// `defsyms` (`name`, address) defined, so branches to them are resolved
/// by the linker: the instruction words of `.text`.
pub fn assemble(source: &str, base: u64, defsyms: &[(String, u64)]) -> Option<Vec<u32>> {
    let dir = scratch();
    let (s, o, elf, bin) = (dir.join("t.s"), dir.join("t.o"), dir.join("t"), dir.join("t.bin"));
    std::fs::write(&s, format!("\t.text\n\t.globl _start\n_start:\n{source}\n")).unwrap();
    run(Command::new(AS).arg(&s).arg("-o").arg(&o))?;
    run(Command::new(LD)
        .arg(format!("-Ttext={base:#x}"))
        .arg("--no-relax")
        .args(
            defsyms
                .iter()
                .map(|(name, addr)| format!("--defsym={name}={addr:#x}")),
        )
        .arg(&o)
        .arg("-o")
        .arg(&elf))?;
    run(Command::new(OBJCOPY)
        .args(["-O", "binary", "-j", ".text"])
        .arg(&elf)
        .arg(&bin))?;
    let bytes = std::fs::read(&bin).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    Some(
        bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    )
}

/// One disassembled instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insn {
    /// Its address.
    pub addr: u64,
    /// Its word.
    pub word: u32,
    /// `mnemonic operands`, single-spaced, without objdump's comments and
    /// symbol names (`ldr x16, 0x1010`, `stp x29, x30, [sp, #272]`).
    pub text: String,
}

/// Disassembles `code` placed at `at` with objdump.
pub fn disassemble(code: &[u8], at: u64) -> Option<Vec<Insn>> {
    let dir = scratch();
    let bin = dir.join("code.bin");
    std::fs::write(&bin, code).unwrap();
    let out = run(Command::new(OBJDUMP)
        .args(["-D", "-b", "binary", "-m", "aarch64"])
        .arg(format!("--adjust-vma={at:#x}"))
        .arg(&bin))?;
    std::fs::remove_dir_all(&dir).ok();
    let mut insns = Vec::new();
    for line in String::from_utf8(out).unwrap().lines() {
        let mut fields = line.splitn(3, '\t');
        let (Some(addr), Some(word), Some(text)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let Some(addr) = addr.trim().strip_suffix(':') else {
            continue;
        };
        let (Ok(addr), Ok(word)) = (
            u64::from_str_radix(addr, 16),
            u32::from_str_radix(word.trim(), 16),
        ) else {
            continue;
        };
        let text = text.split("//").next().unwrap();
        let text = text.split(" <").next().unwrap();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        insns.push(Insn { addr, word, text });
    }
    Some(insns)
}

/// The texts of the instructions of `code` at `at` (the words before
/// `code_len`, leaving out a trailing literal).
pub fn texts(code: &[u8], at: u64, code_len: usize) -> Option<Vec<String>> {
    let insns = disassemble(&code[..code_len], at)?;
    Some(insns.into_iter().map(|i| i.text).collect())
}
