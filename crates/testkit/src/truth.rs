//! Independent readings of compiled files, made with binutils and LLVM's
//! own tools, for comparison with what fntrace discovers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use crate::{require, run};

/// One instruction as `objdump -d -w` shows it.
#[derive(Debug, Clone)]
pub struct Insn {
    pub bytes: Vec<u8>,
    pub text: String,
    pub section: String,
}

/// The disassembly of a file.
#[derive(Debug, Default)]
pub struct Disasm {
    /// Symbol labels (`0000000000001139 <leaf>:`) by address.
    pub labels: BTreeMap<u64, String>,
    /// Instructions by address.
    pub insns: BTreeMap<u64, Insn>,
}

/// Disassembles the code sections of `path` with `objdump -d -w`.
pub fn objdump(path: &Path) -> Disasm {
    require("objdump");
    let out = run(Command::new("objdump").args(["-d", "-w"]).arg(path));
    let mut d = Disasm::default();
    let mut section = String::new();
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("Disassembly of section ") {
            section = rest.trim_end_matches(':').to_string();
        } else if !line.starts_with(' ') {
            let Some((addr, rest)) = line.split_once(" <") else {
                continue;
            };
            if let (Ok(addr), Some(name)) = (u64::from_str_radix(addr, 16), rest.strip_suffix(">:")) {
                d.labels.insert(addr, name.to_string());
            }
        } else if line.starts_with(' ') {
            let mut parts = line.splitn(3, '\t');
            let (Some(addr), Some(bytes)) = (parts.next(), parts.next()) else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr.trim().trim_end_matches(':'), 16) else {
                continue;
            };
            let bytes = bytes
                .split_whitespace()
                .filter_map(|b| u8::from_str_radix(b, 16).ok())
                .collect();
            let text = parts.next().unwrap_or("").trim().to_string();
            d.insns.insert(
                addr,
                Insn {
                    bytes,
                    text,
                    section: section.clone(),
                },
            );
        }
    }
    d
}

impl Disasm {
    /// Addresses of the call instructions to one of `hooks` (`__fentry__`,
    /// `mcount`), outside the PLT.
    pub fn hook_calls(&self, hooks: &[&str]) -> BTreeSet<u64> {
        self.insns
            .iter()
            .filter(|(_, i)| !i.section.starts_with(".plt") && i.text.starts_with("call"))
            .filter(|(_, i)| {
                hooks
                    .iter()
                    .any(|h| i.text.contains(&format!("<{h}@")) || i.text.contains(&format!("<{h}>")))
            })
            .map(|(a, _)| *a)
            .collect()
    }

    /// The label at or before `address`: (its address, its name).
    pub fn function_at(&self, address: u64) -> Option<(u64, &str)> {
        self.labels
            .range(..=address)
            .next_back()
            .map(|(a, n)| (*a, n.as_str()))
    }

    /// The bytes of the instructions that start at `address` and cover
    /// `len` bytes.
    pub fn bytes(&self, address: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for (_, insn) in self.insns.range(address..) {
            if out.len() >= len {
                break;
            }
            out.extend_from_slice(&insn.bytes);
        }
        out.truncate(len);
        out
    }

    /// The instruction at exactly `address`.
    pub fn insn(&self, address: u64) -> Option<&Insn> {
        self.insns.get(&address)
    }
}

/// The 64-bit little-endian words of section `name`, from `readelf -x`,
/// each replaced by the addend of the `R_X86_64_RELATIVE` relocation that
/// `readelf -r` shows at its address, if any (the linker may leave the word
/// itself zero); empty if there is no such section.
pub fn table(path: &Path, name: &str) -> Vec<u64> {
    require("readelf");
    let out = Command::new("readelf")
        .args(["-x", name])
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut start = None;
    let mut bytes = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if !line.starts_with("0x") {
            continue;
        }
        // "0x00002008 c9110000 00000000 e4110000 00000000 ................"
        let mut groups = line.split(' ');
        let address = u64::from_str_radix(groups.next().unwrap().trim_start_matches("0x"), 16).unwrap();
        start.get_or_insert(address);
        for group in groups.take(4) {
            if group.len() != 8 || !group.bytes().all(|b| b.is_ascii_hexdigit()) {
                break;
            }
            bytes.extend((0..4).map(|i| u8::from_str_radix(&group[2 * i..2 * i + 2], 16).unwrap()));
        }
    }
    let relative = relative_addends(path);
    let start = start.unwrap_or(0);
    bytes
        .chunks_exact(8)
        .enumerate()
        .map(|(i, c)| {
            let word = u64::from_le_bytes(c.try_into().unwrap());
            relative.get(&(start + 8 * i as u64)).copied().unwrap_or(word)
        })
        .collect()
}

/// Addends of the `R_X86_64_RELATIVE` dynamic relocations, by offset.
fn relative_addends(path: &Path) -> BTreeMap<u64, u64> {
    let out = run(Command::new("readelf").args(["-rW"]).arg(path));
    out.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() == 4 && fields[2] == "R_X86_64_RELATIVE" {
                Some((
                    u64::from_str_radix(fields[0], 16).ok()?,
                    u64::from_str_radix(fields[3], 16).ok()?,
                ))
            } else {
                None
            }
        })
        .collect()
}

/// An XRay sled as `llvm-xray extract` reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Sled {
    pub address: u64,
    pub function: u64,
    /// In fntrace's words: xray-entry, xray-exit, xray-tail.
    pub kind: String,
}

/// The sleds of `path`, read by LLVM's own `llvm-xray extract`.
pub fn xray_sleds(path: &Path, llvm_xray: &str) -> Vec<Sled> {
    require(llvm_xray);
    let out = run(Command::new(llvm_xray).arg("extract").arg(path));
    let field = |line: &str, key: &str| -> Option<String> {
        let start = line.find(&format!(" {key}: "))? + key.len() + 3;
        let rest = &line[start..];
        Some(rest[..rest.find([',', ' ', '}']).unwrap_or(rest.len())].to_string())
    };
    let num = |s: String| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    out.lines()
        .filter(|l| l.starts_with("- {"))
        .map(|l| Sled {
            address: num(field(l, "address").unwrap()),
            function: num(field(l, "function").unwrap()),
            kind: match field(l, "kind").unwrap().as_str() {
                "function-enter" | "log-args-enter" => "xray-entry",
                "function-exit" => "xray-exit",
                "tail-exit" => "xray-tail",
                other => panic!("unexpected sled kind {other}"),
            }
            .to_string(),
        })
        .collect()
}

/// A relocation as `readelf -rW` shows it.
#[derive(Debug, Clone)]
pub struct Reloc {
    /// The section it applies to (`.text` for `.rela.text`).
    pub section: String,
    pub offset: u64,
    pub r_type: String,
    /// Symbol name (a section name for section symbols).
    pub symbol: String,
    pub addend: i64,
}

/// Relocations of a relocatable object, from `readelf -rW`.
pub fn relocations(path: &Path) -> Vec<Reloc> {
    require("readelf");
    let out = run(Command::new("readelf").args(["-rW"]).arg(path));
    let mut section = String::new();
    let mut found = Vec::new();
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("Relocation section '") {
            let name = &rest[..rest.find('\'').unwrap()];
            section = name
                .strip_prefix(".rela")
                .or(name.strip_prefix(".rel"))
                .unwrap_or(name)
                .to_string();
            continue;
        }
        // "0000000000000002  0000000600000029 R_X86_64_GOTPCRELX  0000000000000000 __fentry__ - 4"
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() >= 7 && fields[2].starts_with("R_") {
            let Ok(offset) = u64::from_str_radix(fields[0], 16) else {
                continue;
            };
            let magnitude = i64::from_str_radix(fields[6], 16).unwrap();
            found.push(Reloc {
                section: section.clone(),
                offset,
                r_type: fields[2].to_string(),
                symbol: fields[4].to_string(),
                addend: if fields[5] == "-" { -magnitude } else { magnitude },
            });
        }
    }
    found
}

/// A section header as `readelf -SW` shows it.
#[derive(Debug, Clone)]
pub struct SectionHeader {
    pub index: usize,
    pub name: String,
    pub address: u64,
    /// Offset of its contents in the file.
    pub offset: u64,
    pub size: u64,
    /// `X` among its flags.
    pub exec: bool,
}

/// The section headers of `path`, from `readelf -SW`.
pub fn sections(path: &Path) -> Vec<SectionHeader> {
    require("readelf");
    let out = run(Command::new("readelf").arg("-SW").arg(path));
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    out.lines()
        .filter_map(|line| {
            // "  [15] .text  PROGBITS  0000000000001070 001070 000335 00  AX  0   0 16"
            let (index, rest) = line.trim_start().strip_prefix('[')?.split_once(']')?;
            let index = index.trim().parse().ok()?;
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.len() < 9 {
                return None;
            }
            // No flags: one field fewer.
            let flags = if f.len() >= 10 { f[6] } else { "" };
            Some(SectionHeader {
                index,
                name: f[0].to_string(),
                address: hex(f[2]),
                offset: hex(f[3]),
                size: hex(f[4]),
                exec: flags.contains('X'),
            })
        })
        .collect()
}

/// A symbol as `readelf -sW` shows it.
#[derive(Debug, Clone)]
pub struct Symbol {
    pub address: u64,
    pub size: u64,
    /// `FUNC`, `IFUNC`, `OBJECT`...
    pub kind: String,
    /// `GLOBAL`, `WEAK`, `LOCAL`.
    pub bind: String,
    /// Section index; `None` for `UND`, `ABS`...
    pub section: Option<usize>,
    /// Without a version (`@GLIBC_2.2.5`).
    pub name: String,
}

/// The symbols of `path`'s `.symtab` (`dynamic`: `.dynsym`), from
/// `readelf -sW`.
pub fn symbols(path: &Path, dynamic: bool) -> Vec<Symbol> {
    require("readelf");
    let out = run(Command::new("readelf").arg("-sW").arg(path));
    let wanted = if dynamic { "'.dynsym'" } else { "'.symtab'" };
    let mut inside = false;
    let mut found = Vec::new();
    for line in out.lines() {
        if line.starts_with("Symbol table ") {
            inside = line.contains(wanted);
            continue;
        }
        // "    43: 00000000000010b0   167 FUNC    GLOBAL DEFAULT   15 main"
        let f: Vec<&str> = line.split_whitespace().collect();
        if !inside || f.len() < 8 || !f[0].ends_with(':') {
            continue;
        }
        let Ok(address) = u64::from_str_radix(f[1], 16) else {
            continue;
        };
        let size = match f[2].strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
            None => f[2].parse().unwrap(),
        };
        found.push(Symbol {
            address,
            size,
            kind: f[3].to_string(),
            bind: f[4].to_string(),
            section: f[6].parse().ok(),
            name: f[7].split('@').next().unwrap().to_string(),
        });
    }
    found
}

/// A frame description entry as `readelf --debug-dump=frames-interp`
/// shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub start: u64,
    pub end: u64,
    /// Its first row is the frame a call leaves: CFA `rsp+8`, `ra` at
    /// `c-8`, every other register `u` (undefined) or `s` (same value).
    /// An FDE shown without a table has its CIE's first row.
    pub called: bool,
}

/// The FDEs of `path`'s `.eh_frame`, from `readelf --debug-dump=frames-interp`.
pub fn frames(path: &Path) -> Vec<Frame> {
    require("readelf");
    // `-wN`: not the FDEs of the separate debug file a link names (where
    // `.eh_frame` is `NOBITS`, which makes readelf fail).
    let out = run(Command::new("readelf")
        .args(["-wN", "--debug-dump=frames-interp"])
        .arg(path));
    // The first row of each CIE, by offset; the FDEs with their CIE and
    // their own first row, if shown.
    let mut cies: BTreeMap<String, bool> = BTreeMap::new();
    let mut fdes: Vec<(Frame, String, Option<bool>)> = Vec::new();
    // The entry whose table is being read: a CIE's offset, or an FDE.
    enum Current {
        Cie(String),
        Fde,
        None,
    }
    let mut current = Current::None;
    let mut columns: Vec<String> = Vec::new();
    let mut first_row = false;
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 4 && f[3] == "CIE" {
            current = Current::Cie(f[0].to_string());
        } else if f.len() >= 6 && f[3] == "FDE" {
            let cie = f[4].strip_prefix("cie=").unwrap().to_string();
            let (start, end) = f[5].strip_prefix("pc=").unwrap().split_once("..").unwrap();
            let frame = Frame {
                start: u64::from_str_radix(start, 16).unwrap(),
                end: u64::from_str_radix(end, 16).unwrap(),
                called: false,
            };
            fdes.push((frame, cie, None));
            current = Current::Fde;
        } else if f.first() == Some(&"LOC") {
            columns = f.iter().map(|c| c.to_string()).collect();
            first_row = true;
        } else if first_row && f.len() == columns.len() && u64::from_str_radix(f[0], 16).is_ok() {
            first_row = false;
            let called = columns.iter().zip(&f).all(|(c, v)| match c.as_str() {
                "LOC" => true,
                "CFA" => *v == "rsp+8",
                "ra" => *v == "c-8",
                _ => *v == "u" || *v == "s",
            }) && columns.iter().any(|c| c == "ra");
            match &current {
                Current::Cie(offset) => {
                    cies.insert(offset.clone(), called);
                }
                Current::Fde => fdes.last_mut().unwrap().2 = Some(called),
                Current::None => {}
            }
        }
    }
    fdes.into_iter()
        .map(|(mut frame, cie, own)| {
            frame.called = own.unwrap_or_else(|| cies.get(&cie).copied().unwrap_or(false));
            frame
        })
        .collect()
}
