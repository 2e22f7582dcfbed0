//! Real compiler output for the bare-entry tests: C (and a little
//! assembly) built with gcc or clang into a shared object, its functions'
//! bytes, and objdump's reading of where their instructions start, as an
//! independent decoder.
//!
//! Linked (`-shared -nostdlib`), not just compiled (`-c`): calls and
//! RIP-relative operands then hold their real targets (the PLT, the GOT,
//! the data), where an object file has zeros waiting for relocations.
//!
//! A missing compiler skips the test with a note on stderr, except under
//! `CI`, where it fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// Where the tests pretend the shared object is loaded: position-
/// independent code means the same under any bias, and this one leaves
/// room for detours 832 MiB below every function.
pub const BIAS: u64 = 0x7f3a_5c00_0000;

/// gcc, under the names it may be installed as.
pub const GCC: &[&str] = &["gcc"];
/// clang, under the names it may be installed as.
pub const CLANG: &[&str] = &["clang", "clang-16", "clang-14"];

/// The compilers and flags the test program is built with: gcc with
/// `endbr64` and frame pointers, plain, with functions packed (no padding
/// between them), and calling through the GOT; clang plain and with
/// `endbr64`.
pub const CONFIGS: [(&[&str], &[&str]); 6] = [
    (GCC, &["-fcf-protection=full", "-fno-omit-frame-pointer"]),
    (GCC, &[]),
    (GCC, &["-falign-functions=1"]),
    (GCC, &["-fno-plt"]),
    (CLANG, &[]),
    (CLANG, &["-fcf-protection=full"]),
];

/// The test program: C functions whose `-O2` entries are the cases of
/// `docs/design/UNPREPARED.md`, and assembly for those no compiler emits
/// on request (branches into `D`, a neighbour inside it, `int3`, `syscall`
/// and `ret` in it, the function's own address). The comments give what
/// plain `gcc -O2` makes of each.
pub const SOURCE: &str = r#"
extern int g(int);
extern void h(void);
__attribute__((visibility("hidden"))) long counter64;

/* push rbp; push rbx (with -fno-omit-frame-pointer and endbr64:
   endbr64; push rbp; mov rbp,rsp; push r12) */
int frame(int a) { int r = g(a); return r * g(r + a) + a; }
/* push r15; push r14; push r13 */
int many(int a, int b, int c, int d) {
    int x = g(a), y = g(b), z = g(c), w = g(d);
    return g(x + y) + g(z + w) + g(x * w) + x + y + z + w + a + b;
}
/* sub rsp,8; call h (with -fno-plt: call [rip+h@GOTPCREL]) */
int calls(void) { h(); return 0; }
/* mov rax,[rip+counter64]; ret */
long load64(void) { return counter64; }
/* test edi,edi; je L; sub rsp,8 */
int test_je(int a) { if (a == 0) return 7; return g(a) + 1; }
/* xor eax,eax; ret, then padding (none with -falign-functions=1) */
int tiny(void) { return 0; }
/* add edi,1; jmp g */
int tail(int a) { return g(a + 1); }
/* mov eax,[rdi]; test eax,eax; je spin */
void spin(volatile int *p) { while (!*p) ; }
/* ud2 */
void die(void) { __builtin_trap(); }

#define FN(n) ".globl " #n "\n.hidden " #n "\n.type " #n ", @function\n" #n ":\n"
#define END(n) ".size " #n ", .-" #n "\n"
asm(".text\n"
    FN(je_inside) "test %edi, %edi\n je 1f\n1: mov $1, %eax\n ret\n" END(je_inside)
    FN(loop_in_d) "xor %eax, %eax\n1: dec %edi\n jnz 1b\n ret\n" END(loop_in_d)
    FN(into_d) "xor %eax, %eax\n1: add %edi, %eax\n dec %edi\n jnz 1b\n ret\n" END(into_d)
    FN(ret_mid) "xor %eax, %eax\n ret\n1: mov $5, %eax\n ret\n jmp 1b\n" END(ret_mid)
    FN(sys) "xor %eax, %eax\n syscall\n ret\n" END(sys)
    FN(trap_mid) "xor %eax, %eax\n int3\n mov $2, %eax\n ret\n" END(trap_mid)
    FN(self_lea) "lea self_lea(%rip), %rax\n ret\n" END(self_lea)
    FN(rec) "test %edi, %edi\n je 1f\n dec %edi\n call rec\n1: ret\n" END(rec)
    FN(loop_e) "endbr64\n1: dec %edi\n jnz 1b\n ret\n" END(loop_e)
    FN(outer) "xor %eax, %eax\n" FN(inner) "inc %eax\n ret\n" END(inner) END(outer)
    ".p2align 4\n");
"#;

/// A built shared object.
pub struct Module {
    path: PathBuf,
    /// `.text` at its biased address.
    text: Vec<u8>,
    text_addr: u64,
    /// Function symbols: name to (biased address, size).
    functions: BTreeMap<String, (u64, u64)>,
}

/// One function, as `analyze` takes it.
pub struct Function<'a> {
    /// From the function's address to `limit`, or to its end if that is
    /// further.
    pub code: &'a [u8],
    pub addr: u64,
    pub size: u64,
    /// The next function's address, or the end of `.text`.
    pub limit: u64,
}

fn scratch() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "fntrace-bare-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn installed(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The first of `names` that is installed; `None`, with a note on stderr,
/// if none is (a failure under `CI`, which installs them all).
pub fn compiler<'a>(names: &[&'a str]) -> Option<&'a str> {
    let found = names.iter().copied().find(|n| installed(n));
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "none of {names:?} is installed");
        // Written to stderr directly: the test harness captures `eprintln!`.
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!("SKIPPED: none of {names:?} is installed (.ci/run installs them)\n"),
        );
    }
    found
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

impl Module {
    /// `source` (C, with any top-level `asm`) built with the first
    /// installed of `compilers` as `-O2 -fPIC -shared -nostdlib` and
    /// `flags`; `None` if no such compiler is installed.
    pub fn build(compilers: &[&str], flags: &[&str], source: &str) -> Option<Module> {
        let cc = compiler(compilers)?;
        let dir = scratch();
        let (c, so) = (dir.join("t.c"), dir.join("t.so"));
        std::fs::write(&c, source).unwrap();
        run(Command::new(cc)
            .args(["-O2", "-fPIC", "-shared", "-nostdlib", "-Wno-attributes"])
            .args(flags)
            .arg(&c)
            .arg("-o")
            .arg(&so));
        Some(Module::read(&so))
    }

    fn read(path: &Path) -> Module {
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let text = file.section_by_name(".text").expect(".text");
        let functions = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.section_index() == Some(text.index()))
            .map(|s| (s.name().unwrap().to_string(), (s.address() + BIAS, s.size())))
            .collect();
        Module {
            path: path.to_path_buf(),
            text: text.data().unwrap().to_vec(),
            text_addr: text.address() + BIAS,
            functions,
        }
    }

    /// The function `name`.
    pub fn function(&self, name: &str) -> Function<'_> {
        let (addr, size) = *self
            .functions
            .get(name)
            .unwrap_or_else(|| panic!("no function {name}"));
        let end = self.text_addr + self.text.len() as u64;
        let limit = self
            .functions
            .values()
            .map(|&(a, _)| a)
            .filter(|&a| a > addr)
            .min()
            .unwrap_or(end);
        let start = (addr - self.text_addr) as usize;
        let stop = (limit.max(addr + size) - self.text_addr) as usize;
        Function {
            code: &self.text[start..stop],
            addr,
            size,
            limit,
        }
    }

    /// Every function's name.
    pub fn names(&self) -> Vec<String> {
        self.functions.keys().cloned().collect()
    }

    /// Where objdump sees the instructions of `name` start, and their
    /// mnemonics, inside the function's size.
    pub fn objdump(&self, name: &str) -> Vec<(u64, String)> {
        let (addr, size) = self.functions[name];
        let out = run(Command::new("objdump")
            .args(["-d", "--no-show-raw-insn", "-M", "intel"])
            .arg(format!("--disassemble={name}"))
            .arg(&self.path));
        String::from_utf8(out)
            .unwrap()
            .lines()
            .filter_map(|line| {
                let (at, rest) = line.split_once(":\t")?;
                let at = u64::from_str_radix(at.trim(), 16).ok()? + BIAS;
                let mnemonic = rest.split_whitespace().next()?.to_string();
                (at >= addr && at < addr + size).then_some((at, mnemonic))
            })
            .collect()
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if let Some(dir) = self.path.parent() {
            std::fs::remove_dir_all(dir).ok();
        }
    }
}
