//! Building the traced program for a target with Debian's cross compiler,
//! in one of the site forms, and reading what the tests need from it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSymbol};

/// A cross target: compiler triple, emulator, addresses of the "module".
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The GNU triple of the cross compiler (`mipsel-linux-gnu`).
    pub triple: &'static str,
    /// The qemu-user binary.
    pub qemu: &'static str,
    /// Where the far "module" section is linked.
    pub module_at: u64,
    /// Extra link options (the n64 text segment).
    pub link: &'static [&'static str],
}

/// MIPS32 o32 big-endian.
pub const MIPS: Target = Target {
    triple: "mips-linux-gnu",
    qemu: "qemu-mips",
    module_at: 0x5000_0000,
    link: &[],
};
/// MIPS32 o32 little-endian.
pub const MIPSEL: Target = Target {
    triple: "mipsel-linux-gnu",
    qemu: "qemu-mipsel",
    module_at: 0x5000_0000,
    link: &[],
};
/// MIPS64 n64 little-endian.
pub const MIPS64EL: Target = Target {
    triple: "mips64el-linux-gnuabi64",
    qemu: "qemu-mips64el",
    module_at: 0x5000_0000,
    link: &["-Wl,-Ttext-segment=0x400000"],
};
/// AArch64.
pub const AARCH64: Target = Target {
    triple: "aarch64-linux-gnu",
    qemu: "qemu-aarch64",
    module_at: 0x4000_0000,
    link: &[],
};

/// How the traced code is instrumented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// A name for messages and file names.
    pub name: &'static str,
    /// Options for the near code.
    pub near: &'static [&'static str],
    /// Options for the far "module".
    pub far: &'static [&'static str],
    /// Move each function's label above its `-fpatchable-function-entry`
    /// NOPs in gcc's assembly (gcc 12 on MIPS emits them before the label).
    pub fix_labels: bool,
}

/// The program built, with its symbols.
#[derive(Debug)]
pub struct Program {
    /// The executable.
    pub path: PathBuf,
    /// Its bytes.
    pub data: Vec<u8>,
    /// Function symbols: name → (address, size).
    pub symbols: HashMap<String, (u64, u64)>,
}

impl Program {
    /// The address of a symbol; panics (a test failure) if missing.
    pub fn addr(&self, name: &str) -> u64 {
        self.symbols
            .get(name)
            .unwrap_or_else(|| panic!("no symbol {name}"))
            .0
    }

    /// The function that holds `addr`, if any.
    pub fn function_at(&self, addr: u64) -> Option<&str> {
        self.symbols
            .iter()
            .find(|(_, &(a, size))| addr >= a && addr < a + size.max(1))
            .map(|(name, _)| name.as_str())
    }
}

/// Runs a command, failing the test with its output if it fails.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn harness_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("harness")
}

/// Compiles `source` to an object with `opts` and `defs`; with
/// `fix_labels`, through assembly whose labels are moved above the NOPs.
fn compile(
    target: &Target,
    dir: &Path,
    source: &str,
    opts: &[&str],
    fix_labels: bool,
    defs: &[&str],
) -> PathBuf {
    let gcc = format!("{}-gcc", target.triple);
    let stem = Path::new(source).file_stem().unwrap().to_string_lossy();
    let obj = dir.join(format!("{stem}.o"));
    let cc = |mode: &str, input: &Path, output: &Path| {
        run(Command::new(&gcc)
            .args(["-O2", "-fno-inline"])
            .args(opts)
            .args(defs)
            .arg(mode)
            .arg(input)
            .arg("-o")
            .arg(output))
    };
    let mut input = harness_dir().join(source);
    if fix_labels {
        let asm = dir.join(format!("{stem}.s"));
        cc("-S", &input, &asm);
        let text = std::fs::read_to_string(&asm).unwrap();
        std::fs::write(&asm, crate::labels::move_labels_above_nops(&text)).unwrap();
        input = asm;
    }
    cc("-c", &input, &obj);
    obj
}

/// Builds the harness with the near and far code of `variant` into `dir`;
/// `defs` are extra `-D` options for the traced code.
pub fn build(target: &Target, variant: &Variant, dir: &Path, defs: &[&str]) -> Program {
    std::fs::create_dir_all(dir).unwrap();
    let harness = compile(target, dir, "harness.c", &[], false, &[]);
    let near = compile(target, dir, "near.c", variant.near, variant.fix_labels, defs);
    let far = compile(target, dir, "far.c", variant.far, variant.fix_labels, defs);
    run(Command::new(format!("{}-objcopy", target.triple))
        .arg("--rename-section")
        .arg(".text=.modtext")
        .arg(&far));
    let module = format!("-Wl,--section-start=.modtext={:#x}", target.module_at);
    link(target, dir, &[harness, near, far], &[&module])
}

/// Builds the harness with a test's own files of `harness/` (C or
/// assembly, each with its options): code to run, and the commands that
/// run it (`fntrace_emu_command`, see `harness/harness.c`), in the same
/// script format.
pub fn build_with(target: &Target, dir: &Path, sources: &[(&str, &[&str])]) -> Program {
    std::fs::create_dir_all(dir).unwrap();
    let mut objs = vec![compile(target, dir, "harness.c", &[], false, &[])];
    for (source, opts) in sources {
        objs.push(compile(target, dir, source, opts, false, &[]));
    }
    link(target, dir, &objs, &[])
}

/// Links `objs` statically into `dir/prog` and reads its symbols.
fn link(target: &Target, dir: &Path, objs: &[PathBuf], opts: &[&str]) -> Program {
    let gcc = format!("{}-gcc", target.triple);
    let exe = dir.join("prog");
    run(Command::new(&gcc)
        .args(["-static", "-no-pie"])
        .args(objs)
        .args(opts)
        .args(target.link)
        .arg("-o")
        .arg(&exe));
    let data = std::fs::read(&exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut symbols = HashMap::new();
    for sym in file.symbols() {
        if sym.kind() == object::SymbolKind::Text {
            if let Ok(name) = sym.name() {
                symbols.insert(name.to_string(), (sym.address(), sym.size()));
            }
        }
    }
    Program {
        path: exe,
        data,
        symbols,
    }
}

/// Runs the program under qemu with `script`; returns its standard output.
pub fn emulate(target: &Target, program: &Program, script: &str) -> String {
    let path = program.path.with_file_name("script.txt");
    std::fs::write(&path, script).unwrap();
    let out = Command::new(target.qemu)
        .arg(&program.path)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", target.qemu));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.ends_with("D\n"),
        "{} {} died ({}) — output so far:\n{}\n{}",
        target.qemu,
        program.path.display(),
        out.status,
        tail(&stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// A fresh work directory for one test.
pub fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fntrace-emu-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds `variant` for `target` twice — as is, and with `leaf` computing
/// what `leaf_v2` does (the truth for redirects) — and runs the scenario
/// with the arch layer's patcher for the program.
pub fn scenario(
    target: &Target,
    variant: &Variant,
    areas: crate::scenario::Areas,
) -> crate::scenario::Outcome {
    scenario_with(target, variant, areas, None)
}

/// [`scenario`] with another patcher than the arch layer's (a test's
/// deliberately wrong one, to show that the scenario catches it).
pub fn scenario_with(
    target: &Target,
    variant: &Variant,
    areas: crate::scenario::Areas,
    patcher: Option<&dyn fntrace_arch::Patcher>,
) -> crate::scenario::Outcome {
    let dir = workdir(&format!("{}-{}", target.triple, variant.name));
    let program = build(target, variant, &dir.join("traced"), &[]);
    let redirected = build(target, variant, &dir.join("redirected"), &["-DREDIRECTED"]);
    let file = object::File::parse(&*program.data).unwrap();
    let arch = fntrace_arch::ElfArch {
        machine: match file.architecture() {
            object::Architecture::Aarch64 => fntrace_arch::EM_AARCH64,
            _ => fntrace_arch::EM_MIPS,
        },
        is_64: file.is_64(),
        big_endian: !file.is_little_endian(),
    };
    let patcher = patcher.unwrap_or_else(|| fntrace_arch::patcher_for_elf(arch).expect("a patcher"));
    let outcome = crate::scenario::run(target, &program, &redirected, patcher, areas);
    eprintln!(
        "{} {}: {} writes, {} runs checked, veneers for {:?}, redirect {}",
        target.triple, variant.name, outcome.writes, outcome.runs, outcome.veneered, outcome.redirected
    );
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}
