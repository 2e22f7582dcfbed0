//! `fntrace list` on MIPS (o32 big- and little-endian, n64 little-endian)
//! and AArch64 files from Debian's cross compilers: every `-pg` and
//! `-fpatchable-function-entry` form, in executables and objects, checked
//! against the cross binutils (`objdump -dr`, `readelf -A` for the MIPS GOT,
//! `readelf -x` for the table). The programs are compiled, never run.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_fails, fntrace_output, hex_u64, program, require, run, Work};
use serde_json::Value;

/// The functions that every build instruments, and the one it must not.
const INSTRUMENTED: [&str; 5] = ["helper", "leaf", "many", "fib", "main"];
const PLAIN: &str = "plain";

#[derive(Clone, Copy, PartialEq)]
enum Arch {
    Mips32,
    Mips64,
    Aarch64,
}

struct Target {
    triple: &'static str,
    arch: Arch,
    big_endian: bool,
}

const MIPS: Target = Target {
    triple: "mips-linux-gnu",
    arch: Arch::Mips32,
    big_endian: true,
};
const MIPSEL: Target = Target {
    triple: "mipsel-linux-gnu",
    arch: Arch::Mips32,
    big_endian: false,
};
const MIPS64EL: Target = Target {
    triple: "mips64el-linux-gnuabi64",
    arch: Arch::Mips64,
    big_endian: false,
};
const AARCH64: Target = Target {
    triple: "aarch64-linux-gnu",
    arch: Arch::Aarch64,
    big_endian: false,
};

impl Target {
    fn tool(&self, name: &str) -> String {
        let tool = format!("{}-{name}", self.triple);
        require(&tool);
        tool
    }

    fn ptr(&self) -> usize {
        if self.arch == Arch::Mips32 {
            4
        } else {
            8
        }
    }

    /// Compiles `source` with `flags` into `out` (`-c` in flags for objects).
    fn cc(&self, source: &Path, out: &Path, flags: &[&str]) {
        run(Command::new(self.tool("gcc"))
            .args(["-O2", "-w"])
            .args(flags)
            .arg(source)
            .arg("-o")
            .arg(out));
    }
}

/// What a build's sites must be.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    /// MIPS `-pg`: `move at, ra; jal _mcount; <delay>`.
    NonPic,
    /// MIPS `-pg` PIC: `move at, ra; [addiu sp;] lw/ld t9, (gp); jalr t9; nop`.
    Pic,
    /// MIPS `-pg -mlong-calls`: the address built in `v1`, `move at, ra;
    /// jalr v1; <delay>`.
    LongCalls,
    /// AArch64 `-pg`: `bl _mcount`.
    Bl,
    /// `-fpatchable-function-entry=N` as gcc 12 places it on MIPS: all N
    /// NOPs before the label.
    NopsBefore(usize),
    /// N NOPs from the label on (AArch64, or MIPS assembly fixed up).
    NopsAt(usize),
}

/// `objdump -dr -z` of a file, by (section, address).
#[derive(Default)]
struct Dis {
    labels: BTreeMap<String, (String, u64)>,
    insns: BTreeMap<(String, u64), (Vec<u8>, String)>,
    relocs: BTreeMap<(String, u64), Vec<String>>,
}

fn objdump(t: &Target, path: &Path) -> Dis {
    let out = run(Command::new(t.tool("objdump")).args(["-dr", "-z"]).arg(path));
    let mut d = Dis::default();
    let mut section = String::new();
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("Disassembly of section ") {
            section = rest.trim_end_matches(':').to_string();
        } else if !line.starts_with([' ', '\t']) {
            let Some((addr, rest)) = line.split_once(" <") else {
                continue;
            };
            let name = rest.trim_end_matches(">:");
            if let (Ok(addr), false) = (u64::from_str_radix(addr, 16), name.contains(['+', '-'])) {
                d.labels.insert(name.to_string(), (section.clone(), addr));
            }
        } else if let Some((addr, rest)) = line.trim().split_once(':') {
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            let rest = rest.trim_start();
            let key = (section.clone(), addr);
            if rest.starts_with("R_") {
                d.relocs.entry(key).or_default().push(rest.to_string());
                continue;
            }
            let mut parts = rest.splitn(2, '\t');
            let word = u32::from_str_radix(parts.next().unwrap_or("").trim(), 16).unwrap();
            let bytes = if t.big_endian {
                word.to_be_bytes()
            } else {
                word.to_le_bytes()
            };
            let text = parts.next().unwrap_or("").trim().to_string();
            d.insns.insert(key, (bytes.to_vec(), text));
        }
    }
    d
}

impl Dis {
    fn text(&self, section: &str, addr: u64) -> &str {
        self.insns
            .get(&(section.to_string(), addr))
            .map_or("", |(_, t)| t.as_str())
    }

    fn bytes(&self, section: &str, from: u64, len: usize) -> Vec<u8> {
        (0..len as u64 / 4)
            .flat_map(|i| self.insns[&(section.to_string(), from + 4 * i)].0.clone())
            .collect()
    }

    /// The first instruction of the function `name` whose text starts with
    /// `prefix`.
    fn find(&self, name: &str, prefix: &str) -> u64 {
        let (section, start) = &self.labels[name];
        let next = self
            .labels
            .values()
            .filter(|(s, a)| s == section && a > start)
            .map(|&(_, a)| a)
            .min()
            .unwrap_or(u64::MAX);
        let key = (section.clone(), *start);
        self.insns
            .range(key..)
            .take_while(|((s, a), _)| s == section && *a < next)
            .find(|(_, (_, text))| text.starts_with(prefix))
            .map(|((_, a), _)| *a)
            .unwrap_or_else(|| panic!("no '{prefix}' in {name}"))
    }

    fn relocated(&self, section: &str, addr: u64, what: &str) -> bool {
        self.relocs
            .get(&(section.to_string(), addr))
            .is_some_and(|r| r.iter().any(|r| r.contains(what) && r.contains("_mcount")))
    }
}

/// The last operand of an instruction's text as a number.
fn imm(text: &str) -> i64 {
    let last = text.rsplit(',').next().unwrap().trim();
    match last.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16).unwrap(),
        None => last.parse().unwrap(),
    }
}

/// `readelf -A`'s MIPS GOT: access offset from gp -> (initial value, name).
fn mips_got(t: &Target, path: &Path) -> BTreeMap<i64, (u64, String)> {
    let out = run(Command::new(t.tool("readelf")).arg("-A").arg(path));
    let mut got = BTreeMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let (Some(access), Some(initial)) = (f.get(1).and_then(|a| a.strip_suffix("(gp)")), f.get(2)) {
            if let (Ok(off), Ok(initial)) = (access.parse(), u64::from_str_radix(initial, 16)) {
                let name = if f.len() >= 7 { f[f.len() - 1] } else { "" };
                got.insert(off, (initial, name.to_string()));
            }
        }
    }
    got
}

/// The addresses in a linked file's `__patchable_function_entries`.
fn table(t: &Target, path: &Path) -> Vec<u64> {
    let out = run(Command::new(t.tool("readelf"))
        .args(["-x", "__patchable_function_entries"])
        .arg(path));
    let mut bytes = Vec::new();
    for line in out.lines().filter(|l| l.trim_start().starts_with("0x")) {
        for group in line.split_whitespace().skip(1).take(4) {
            match (0..group.len() / 2)
                .map(|i| u8::from_str_radix(&group[2 * i..2 * i + 2], 16))
                .collect()
            {
                Ok(b) => bytes.extend::<Vec<u8>>(b),
                Err(_) => break,
            }
        }
    }
    bytes
        .chunks_exact(t.ptr())
        .map(|c| {
            let mut word = [0u8; 8];
            if t.big_endian {
                word[8 - c.len()..].copy_from_slice(c);
                u64::from_be_bytes(word)
            } else {
                word[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(word)
            }
        })
        .collect()
}

/// A site of `fntrace list --json`.
#[derive(Debug)]
struct Listed {
    function: String,
    section: String,
    address: u64,
    len: usize,
    kind: String,
    prefix: u64,
    before_entry: bool,
    bytes: Vec<u8>,
}

/// `fntrace list --json`: the sites, and what it said on stderr.
fn listing(path: &Path) -> (Vec<Listed>, String) {
    let out = fntrace_output(&["list", "--json", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "fntrace list {}: {stderr}", path.display());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut sites = Vec::new();
    for f in json.as_array().unwrap() {
        for s in f["sites"].as_array().unwrap() {
            let hex = s["bytes"].as_str().unwrap();
            sites.push(Listed {
                function: f["symbol"].as_str().unwrap_or("").to_string(),
                section: s["section"].as_str().unwrap().to_string(),
                address: hex_u64(&s["address"]),
                len: s["len"].as_u64().unwrap() as usize,
                kind: s["kind"].as_str().unwrap().to_string(),
                prefix: s["prefix"].as_u64().unwrap(),
                before_entry: s["before_entry"].as_bool().unwrap(),
                bytes: (0..hex.len() / 2)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                    .collect(),
            });
        }
    }
    (sites, stderr)
}

/// The site `form` puts into function `name`: (address, length), after
/// checking the instructions around it and where its call goes.
fn expected(t: &Target, d: &Dis, file: &Path, form: Form, name: &str) -> (u64, usize) {
    let (section, entry) = d.labels[name].clone();
    let linked = file.extension().is_none_or(|e| e != "o");
    let plt = |label: &str| d.labels.get(label).map(|l| l.1);
    let mcount = [plt("_mcount@plt"), plt("_mcount"), plt(".pic._mcount")];
    let text = |a: u64| d.text(&section, a).to_string();
    match form {
        Form::NopsBefore(n) | Form::NopsAt(n) => {
            let start = if matches!(form, Form::NopsBefore(_)) {
                entry - 4 * n as u64
            } else {
                entry
            };
            for i in 0..n as u64 {
                assert_eq!(text(start + 4 * i), "nop", "{name}: {}", file.display());
            }
            (start, 4 * n)
        }
        Form::Bl => {
            let at = d.find(name, "bl\t");
            if linked {
                assert!(text(at).ends_with("<_mcount@plt>"), "{}", text(at));
            } else {
                assert!(d.relocated(&section, at, "R_AARCH64_CALL26"));
            }
            (at, 4)
        }
        Form::NonPic | Form::Pic | Form::LongCalls => {
            let mv = d.find(name, "move\tat,ra");
            let (start, call) = match form {
                Form::NonPic => (mv, mv + 4),
                Form::Pic => (mv, d.find(name, "jalr\tt9")),
                _ => (mv - if t.arch == Arch::Mips64 { 24 } else { 8 }, mv + 4),
            };
            let call_text = text(call);
            match form {
                Form::NonPic if linked => {
                    let target = call_text.rsplit('<').next().unwrap();
                    assert!(
                        ["_mcount@plt>", ".pic._mcount>", "_mcount>"].contains(&target),
                        "{call_text}"
                    );
                }
                Form::NonPic => assert!(d.relocated(&section, call, "R_MIPS_26"), "{name}"),
                Form::Pic => {
                    let load = call - 4;
                    assert!(
                        text(load).ends_with("(gp)") && text(load).contains("\tt9,"),
                        "{}",
                        text(load)
                    );
                    if linked {
                        let off: i64 = text(load)
                            .split(',')
                            .nth(1)
                            .unwrap()
                            .trim_end_matches("(gp)")
                            .parse()
                            .unwrap();
                        let (initial, sym) = &mips_got(t, file)[&off];
                        assert!(
                            sym == "_mcount" || mcount.contains(&Some(*initial)),
                            "GOT {off}: {sym}"
                        );
                    } else {
                        assert!(d.relocated(&section, load, "R_MIPS_CALL16"));
                    }
                }
                _ => {
                    assert_eq!(call_text, "jalr\tv1");
                    assert!(text(start).starts_with("lui\tv1,"), "{}", text(start));
                    if !linked {
                        assert!(d.relocated(&section, start, "R_MIPS_HI"));
                    } else if t.arch == Arch::Mips32 {
                        let value = (imm(&text(start)) << 16).wrapping_add(imm(&text(start + 4))) as u32;
                        assert!(mcount.contains(&Some(u64::from(value))), "{value:#x}");
                    } else {
                        let [highest, hi, higher, lo] = [0, 4, 8, 12].map(|o| imm(&text(start + o)));
                        let value =
                            ((highest << 16) + higher).wrapping_shl(32) + ((hi << 16) as i32 as i64 + lo);
                        assert!(mcount.contains(&Some(value as u64)), "{value:#x}");
                    }
                }
            }
            (start, (call + 8 - start) as usize)
        }
    }
}

/// Lists `file`, built with `form`, and checks it against the binutils.
fn check(t: &Target, file: &Path, form: Form) {
    let d = objdump(t, file);
    let (sites, stderr) = listing(file);
    let what = format!("{} ({form:?})", file.display());
    for name in INSTRUMENTED {
        let (address, len) = expected(t, &d, file, form, name);
        let section = &d.labels[name].0;
        let mine: Vec<&Listed> = sites.iter().filter(|s| s.function == name).collect();
        assert_eq!(mine.len(), 1, "{what}: {name}: {mine:?}");
        let s = mine[0];
        assert_eq!(
            (&s.section, s.address, s.len),
            (section, address, len),
            "{what}: {name}"
        );
        assert_eq!(s.bytes, d.bytes(section, address, len), "{what}: {name}");
        let before = matches!(form, Form::NopsBefore(_));
        let kind = if matches!(form, Form::NopsAt(_) | Form::NopsBefore(_)) {
            "patchable"
        } else {
            "mcount"
        };
        assert_eq!(s.kind, kind, "{what}: {name}");
        assert_eq!(
            (s.prefix, s.before_entry),
            (if before { len as u64 } else { 0 }, before),
            "{what}"
        );
    }
    // Nothing else: not `plain`, not the C library of a static link.
    assert!(
        sites.iter().all(|s| INSTRUMENTED.contains(&s.function.as_str())),
        "{what}: {sites:?}"
    );
    assert!(!sites.iter().any(|s| s.function == PLAIN));
    // Linked tables hold exactly the sites.
    let linked = file.extension().is_none_or(|e| e != "o");
    if linked && matches!(form, Form::NopsAt(_) | Form::NopsBefore(_)) {
        let mut entries = table(t, file);
        entries.sort_unstable();
        let mut addresses: Vec<u64> = sites.iter().map(|s| s.address).collect();
        addresses.sort_unstable();
        assert_eq!(entries, addresses, "{what}");
    }
    if let Form::NopsBefore(_) = form {
        assert!(
            stderr.contains("lie wholly before the function entry"),
            "{what}: {stderr}"
        );
        let (text, _) = common::fntrace_ok(&["list", file.to_str().unwrap()]);
        assert_eq!(
            text.matches("patchable(before-entry)").count(),
            INSTRUMENTED.len(),
            "{text}"
        );
    } else {
        assert!(stderr.is_empty(), "{what}: {stderr}");
    }
}

/// Builds the program in every MIPS form, as an executable and an object,
/// and checks each.
fn mips(t: &Target, tag: &str) {
    let work = Work::new(&format!("list-cross-{tag}"));
    let src = PathBuf::from(program("cross/prog.c"));
    let nopic = ["-fno-pic", "-mno-abicalls"];
    // n64 non-PIC code cannot reach a PLT above 4 GiB: link low or static.
    let exe_nopic: &[&str] = if t.arch == Arch::Mips64 {
        &["-static"]
    } else {
        &["-no-pie"]
    };
    let builds: Vec<(&str, Vec<&str>, Form)> = vec![
        ("pg-pic", vec!["-pg"], Form::Pic),
        ("pg-pic-static", vec!["-pg", "-static"], Form::Pic),
        (
            "pg-nopic",
            [&["-pg"][..], &nopic, exe_nopic].concat(),
            Form::NonPic,
        ),
        (
            "pg-long",
            [&["-pg", "-mlong-calls"][..], &nopic, exe_nopic].concat(),
            Form::LongCalls,
        ),
        ("pfe3", vec!["-fpatchable-function-entry=3"], Form::NopsBefore(3)),
        (
            "pfe4",
            vec!["-fpatchable-function-entry=4", "-no-pie"],
            Form::NopsBefore(4),
        ),
    ];
    for (name, flags, form) in &builds {
        let exe = work.path(name);
        t.cc(&src, &exe, flags);
        check(t, &exe, *form);
        let obj = work.path(&format!("{name}.o"));
        let flags: Vec<&str> = flags
            .iter()
            .copied()
            .filter(|f| !f.starts_with("-static") && *f != "-no-pie")
            .collect();
        t.cc(&src, &obj, &[&flags[..], &["-c"]].concat());
        check(t, &obj, *form);
    }
    if t.arch == Arch::Mips64 {
        // The dynamic n64 link, with the text low enough for `jal`.
        let exe = work.path("pg-nopic-low");
        let low = "-Wl,-Ttext-segment=0x10000000";
        t.cc(&src, &exe, &["-pg", "-fno-pic", "-mno-abicalls", "-no-pie", low]);
        check(t, &exe, Form::NonPic);
    }
    // The gcc bug undone: the labels moved above the NOPs.
    let asm = work.path("pfe3.s");
    t.cc(&src, &asm, &["-fpatchable-function-entry=3", "-S"]);
    let fixed = work.path("pfe3-fixed.s");
    std::fs::write(
        &fixed,
        fntrace_emu::labels::move_labels_above_nops(&std::fs::read_to_string(&asm).unwrap()),
    )
    .unwrap();
    t.cc(&fixed, &work.path("pfe3-fixed.o"), &["-c"]);
    check(t, &work.path("pfe3-fixed.o"), Form::NopsAt(3));
    t.cc(&fixed, &work.path("pfe3-fixed"), &[]);
    check(t, &work.path("pfe3-fixed"), Form::NopsAt(3));
}

#[test]
fn mips_big_endian() {
    mips(&MIPS, "mips");
}

#[test]
fn mips_little_endian() {
    mips(&MIPSEL, "mipsel");
}

#[test]
fn mips64_little_endian() {
    mips(&MIPS64EL, "mips64el");
}

#[test]
fn aarch64() {
    let t = &AARCH64;
    let work = Work::new("list-cross-aarch64");
    let src = PathBuf::from(program("cross/prog.c"));
    let builds: [(&str, &[&str], Form); 3] = [
        ("pfe2", &["-fpatchable-function-entry=2"], Form::NopsAt(2)),
        ("pg", &["-pg"], Form::Bl),
        ("pg-nopie", &["-pg", "-no-pie"], Form::Bl),
    ];
    for (name, flags, form) in builds {
        let exe = work.path(name);
        t.cc(&src, &exe, flags);
        check(t, &exe, form);
        let obj = work.path(&format!("{name}.o"));
        t.cc(&src, &obj, &[flags, &["-c"]].concat());
        check(t, &obj, form);
    }
}

/// The architectures are supported now; broken files still fail cleanly.
#[test]
fn errors() {
    let work = Work::new("list-cross-errors");
    let src = PathBuf::from(program("cross/prog.c"));
    for t in [&MIPS, &MIPS64EL, &AARCH64] {
        // Uninstrumented: no sites, but no "unsupported architecture".
        let plain = work.path(&format!("{}-plain.o", t.triple));
        t.cc(&src, &plain, &["-c", "-fno-pic"]);
        let out = fntrace_output(&["list", plain.to_str().unwrap()]);
        assert_fails(&out, 1, "no patchable sites");
        // Linked: bare sites are x86-64 only, for now.
        let linked = work.path(&format!("{}-plain", t.triple));
        t.cc(&src, &linked, &[]);
        let out = fntrace_output(&["list", linked.to_str().unwrap()]);
        assert_fails(&out, 1, "no patchable sites");
        // Truncated inside the section headers and inside the header.
        let exe = work.path(&format!("{}-pfe", t.triple));
        t.cc(&src, &exe, &["-fpatchable-function-entry=2"]);
        let data = std::fs::read(&exe).unwrap();
        for len in [data.len() - 100, 40] {
            let cut = work.path(&format!("{}-cut{len}", t.triple));
            std::fs::write(&cut, &data[..len]).unwrap();
            let out = fntrace_output(&["list", cut.to_str().unwrap()]);
            assert_fails(&out, 1, "malformed ELF file");
        }
        // Listed, but not recorded here (the runtime is x86-64): refused
        // before any output, --force or not.
        let arch = if t.arch == Arch::Aarch64 {
            "AArch64"
        } else {
            "MIPS"
        };
        for force in [false, true] {
            let dir = work.path(&format!("{}-rec{force}", t.triple));
            let mut args = vec!["record", "-o", dir.to_str().unwrap()];
            if force {
                args.push("--force");
            }
            args.extend(["--", exe.to_str().unwrap()]);
            let out = fntrace_output(&args);
            assert_fails(&out, 1, &format!("{arch}; this fntrace records x86-64 programs"));
            assert!(!dir.exists(), "no data directory for a refused program");
        }
    }
}
