//! Bare entries: the analysis on hand-checked byte sequences and on every
//! function gcc and clang emit for a C file, and every detour decoded back
//! against the instructions it copies.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register};

use super::*;

const F: u64 = 0x5555_5555_1000;

fn insn_at(bytes: &[u8], at: u64, ip: u64) -> Instruction {
    let off = (ip - at) as usize;
    Decoder::with_ip(64, &bytes[off..], ip, DecoderOptions::NONE).decode()
}

/// The absolute target an instruction reaches, if any (branch or RIP
/// memory operand).
fn target(i: &Instruction) -> Option<u64> {
    if i.is_ip_rel_memory_operand() {
        return Some(i.ip_rel_memory_address());
    }
    matches!(
        i.flow_control(),
        FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch | FlowControl::Call
    )
    .then(|| i.near_branch_target())
}

/// Decodes the detour of `entry` at `at` back and checks it against the
/// originals: `call *W`, each copied instruction with the same mnemonic and
/// absolute target (calls as push of the original return + jmp), the jump
/// back, and the resume points.
fn check_detour(entry: &BareEntry, at: u64) {
    let word = at - 0x1000;
    let d = detour(entry, at, word).unwrap_or_else(|e| panic!("{:#x} at {at:#x}: {e}", entry.function));
    assert!(d.bytes.len() <= DETOUR_MAX);
    assert_eq!(d.call_return, at + 6);
    let call = insn_at(&d.bytes, at, at);
    assert_eq!(call.mnemonic(), Mnemonic::Call);
    assert_eq!(call.ip_rel_memory_address(), word);
    let mut ip = at + 6;
    let mut last_falls = true;
    for orig in &entry.insns {
        let copy = insn_at(&d.bytes, at, ip);
        if (orig.ip() - entry.entry) < 5 {
            assert!(d.resume.contains(&(orig.ip(), ip)), "resume of {:#x}", orig.ip());
        }
        if orig.mnemonic() == Mnemonic::Call {
            assert_eq!(copy.mnemonic(), Mnemonic::Push);
            let lit = copy.ip_rel_memory_address();
            let off = (lit - at) as usize;
            let value = u64::from_le_bytes(d.bytes[off..off + 8].try_into().unwrap());
            assert_eq!(
                value,
                orig.next_ip(),
                "a displaced call pushes its own return address"
            );
            let jmp = insn_at(&d.bytes, at, copy.next_ip());
            assert_eq!(jmp.mnemonic(), Mnemonic::Jmp);
            assert_eq!(target(&jmp), target(orig));
            ip = jmp.next_ip();
            last_falls = false;
            continue;
        }
        assert_eq!(copy.mnemonic(), orig.mnemonic(), "{orig} became {copy}");
        // A branch to one of the displaced instructions goes to its copy.
        let inside = |t: u64| {
            let copied = d.resume.iter().find(|r| r.0 == t);
            copied
                .filter(|_| !orig.is_ip_rel_memory_operand())
                .map_or(t, |r| r.1)
        };
        let expected = target(orig).map(inside);
        assert_eq!(target(&copy), expected, "{orig} became {copy}");
        let memory = (0..orig.op_count()).any(|k| orig.op_kind(k) == OpKind::Memory);
        if memory && orig.memory_base() != Register::RIP {
            assert_eq!(copy.memory_base(), orig.memory_base());
            assert_eq!(copy.memory_displacement64(), orig.memory_displacement64());
        }
        last_falls = !matches!(
            orig.flow_control(),
            FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch
        );
        ip = copy.next_ip();
    }
    if last_falls {
        let back = insn_at(&d.bytes, at, ip);
        assert_eq!(back.mnemonic(), Mnemonic::Jmp);
        assert_eq!(back.near_branch_target(), entry.entry + entry.len as u64);
    }
}

/// Both kinds of place the runtime uses: the band below, and above.
fn check_both(entry: &BareEntry) {
    check_detour(entry, entry.entry - 0x3380_0000);
    check_detour(entry, entry.entry + 0x10_0000);
}

fn code(bytes: &[u8]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.extend_from_slice(&[0xcc; 16]);
    v
}

#[test]
fn frame_pointer_prologue_after_endbr64() {
    // endbr64; push rbp; mov rbp,rsp; sub rsp,0x10; mov eax,[rip+0x100]; leave; ret
    let bytes = code(&[
        0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0x8b, 0x05, 0x00, 0x01, 0x00,
        0x00, 0xc9, 0xc3,
    ]);
    let e = analyze(&bytes, F, 20, F + 20).unwrap();
    assert_eq!(e.entry, F + 4);
    assert_eq!((e.len, e.boundaries, e.trap_only), (8, 1 << 1 | 1 << 4, false));
    assert_eq!(e.displaced, bytes[4..12]);
    check_both(&e);
}

#[test]
fn pushes_calls_rip_loads_and_branches() {
    // push r15; push r14; ... ret
    let e = analyze(
        &code(&[0x41, 0x57, 0x41, 0x56, 0x53, 0x5b, 0x41, 0x5e, 0x41, 0x5f, 0xc3]),
        F,
        11,
        F + 11,
    )
    .unwrap();
    assert_eq!((e.len, e.boundaries), (5, 1 << 2 | 1 << 4));
    check_both(&e);
    // sub rsp,8; call +0x100; add rsp,8; ret: the call is last in D.
    let e = analyze(
        &code(&[
            0x48, 0x83, 0xec, 0x08, 0xe8, 0x00, 0x01, 0x00, 0x00, 0x48, 0x83, 0xc4, 0x08, 0xc3,
        ]),
        F,
        14,
        F + 14,
    )
    .unwrap();
    assert_eq!((e.len, e.boundaries), (9, 1 << 4));
    check_both(&e);
    // mov rax,[rip+0x1000]; ret: nothing inside the jump starts anything.
    let e = analyze(
        &code(&[0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00, 0xc3]),
        F,
        8,
        F + 8,
    )
    .unwrap();
    assert_eq!((e.len, e.boundaries), (7, 0));
    check_both(&e);
    // test edi,edi; je +3 (out of D); ... and je -> inside D
    let e = analyze(
        &code(&[0x85, 0xff, 0x74, 0x03, 0x31, 0xc0, 0xc3, 0xb8, 1, 0, 0, 0, 0xc3]),
        F,
        13,
        F + 13,
    )
    .unwrap();
    assert_eq!((e.len, e.boundaries), (6, 1 << 2 | 1 << 4));
    assert!(e.branches_into.is_empty());
    check_both(&e);
    // mov eax,1 (5); L1: dec eax; jnz L1 -> a branch into D after e.
    let e = analyze(&code(&[0x31, 0xc0, 0xff, 0xc0, 0x75, 0xfc, 0xc3]), F, 7, F + 7).unwrap();
    assert_eq!(e.branches_into, vec![F + 4]);
    check_both(&e);
}

#[test]
fn a_syscall_among_the_displaced_bytes_is_copied_as_it_is() {
    // push $110; pop %rax; syscall; lea 3(%rdi,%rdi,4),%edx; add %edx,%eax; ret
    // (iced calls syscall's flow control a call: it is not one.)
    let bytes = code(&[
        0x6a, 0x6e, 0x58, 0x0f, 0x05, 0x8d, 0x54, 0xbf, 0x03, 0x01, 0xd0, 0xc3,
    ]);
    let e = analyze(&bytes, F, 12, F + 12).unwrap();
    assert_eq!((e.len, e.boundaries), (5, 1 << 2 | 1 << 3));
    check_both(&e);
    let d = detour(&e, F + 0x10_0000, F).unwrap();
    let copy = insn_at(&d.bytes, F + 0x10_0000, d.resume[2].1);
    assert_eq!((copy.mnemonic(), d.resume[2].0), (Mnemonic::Syscall, F + 3));
}

#[test]
fn short_functions_use_padding_or_trap() {
    // xor eax,eax; ret; then padding.
    let bytes = [0x31, 0xc0, 0xc3, 0x0f, 0x1f, 0x40, 0x00, 0x90];
    let e = analyze(&bytes, F, 3, F + 8).unwrap();
    assert_eq!((e.len, e.boundaries, e.trap_only), (5, 1 << 2, false));
    check_both(&e);
    // The next function right after: only a trap site.
    let e = analyze(&bytes, F, 3, F + 3).unwrap();
    assert_eq!((e.len, e.boundaries, e.trap_only), (2, 0, true));
    check_both(&e);
    // Padding that is not dead (a function without a final ret/jmp).
    let e = analyze(&[0x31, 0xc0, 0x90, 0x90, 0x90, 0x90, 0x90], F, 2, F + 7).unwrap();
    assert!(e.trap_only);
}

#[test]
fn refusals() {
    // test edi,edi; jne -> F (a loop to the entry).
    assert_eq!(
        analyze(&code(&[0x85, 0xff, 0x75, 0xfc, 0xc3]), F, 5, F + 5),
        Err(Refusal::LoopsToEntry { from: F + 2 })
    );
    // ud2 displaced.
    assert!(matches!(
        analyze(&code(&[0x31, 0xc0, 0x0f, 0x0b, 0xc3, 0xc3]), F, 6, F + 6),
        Err(Refusal::Unmovable { at, .. }) if at == F + 2
    ));
    // loop displaced.
    assert!(matches!(
        analyze(&code(&[0xe2, 0xfe, 0x90, 0x90, 0x90, 0xc3]), F, 6, F + 6),
        Err(Refusal::LoopsToEntry { .. } | Refusal::Unmovable { .. })
    ));
    // Garbage.
    assert!(analyze(&[0x0f, 0xff], F, 2, F + 2).is_err());
    assert!(analyze(&[], F, 0, F).is_err());
}

#[test]
fn next_landing_is_the_least_allowed_address() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3000 {
        let entry = 0x5555_0000_0000 + rand() % 0x1000_0000;
        let boundaries = ((rand() % 16) << 1) as u8;
        let (lo, hi) = landing_window(boundaries);
        let span = 1 + rand() % 3000;
        let start = rand() % 4;
        let from = match start {
            0 => entry.wrapping_add_signed(lo) + 5 - (rand() % 512),
            1 => entry.wrapping_add_signed(hi) + 5 - (rand() % 512),
            2 => entry + 5 - rand() % 70_000,
            _ => entry + 5 + (rand() % 0x8000_0000) - 0x4000_0000,
        };
        let until = from + span;
        let brute = (from..until).find(|&t| landing_fits(entry, boundaries, t));
        assert_eq!(
            next_landing(entry, boundaries, from, until),
            brute,
            "entry {entry:#x} boundaries {boundaries:#b} from {from:#x}"
        );
        if let Some(to) = brute {
            let j = jump(entry, boundaries, to).unwrap();
            for i in 1..5 {
                if boundaries >> i & 1 != 0 {
                    assert_eq!(j[i], 0xcc);
                }
            }
            let d = Decoder::with_ip(64, &j, entry, DecoderOptions::NONE).decode();
            assert_eq!(d.near_branch_target(), to);
        }
    }
}

/// Every function gcc and clang emit for a real C file (plain `-O2`, with
/// and without `endbr64`): analysed without a panic, and every detour
/// checked against its originals.
#[test]
fn every_function_of_real_compiler_output() {
    let dir = std::env::temp_dir().join(format!("fntrace-bare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("t.c");
    std::fs::write(&src, REAL_C).unwrap();
    let mut checked = 0;
    for (cc, flags) in [
        ("gcc", &["-O2"][..]),
        ("gcc", &["-O2", "-fcf-protection"][..]),
        ("gcc", &["-O0"][..]),
        (clang(), &["-O2"][..]),
    ] {
        let obj = dir.join("t.o");
        let ok = std::process::Command::new(cc)
            .args(flags)
            .args(["-c", "-fno-asynchronous-unwind-tables"])
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(std::env::var_os("CI").is_none(), "{cc} is missing");
            eprintln!("SKIPPED {cc}: cannot compile");
            continue;
        }
        let text = dir.join("t.text");
        assert!(std::process::Command::new("objcopy")
            .args(["-O", "binary", "--only-section=.text"])
            .arg(&obj)
            .arg(&text)
            .status()
            .unwrap()
            .success());
        let bytes = std::fs::read(&text).unwrap();
        let nm = std::process::Command::new("nm")
            .args(["-S", "--defined-only"])
            .arg(&obj)
            .output()
            .unwrap();
        let mut funcs: Vec<(u64, u64)> = String::from_utf8_lossy(&nm.stdout)
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 4 && matches!(f[2], "T" | "t")).then(|| {
                    (
                        u64::from_str_radix(f[0], 16).unwrap(),
                        u64::from_str_radix(f[1], 16).unwrap(),
                    )
                })
            })
            .collect();
        funcs.sort();
        assert!(funcs.len() >= 8, "{cc}: {funcs:?}");
        for (k, &(addr, size)) in funcs.iter().enumerate() {
            let limit = funcs.get(k + 1).map_or(bytes.len() as u64, |n| n.0);
            let base = F & !0xffff;
            let code = &bytes[addr as usize..];
            match analyze(code, base + addr, size, base + limit) {
                Ok(e) => {
                    check_both(&e);
                    checked += 1;
                }
                Err(r) => eprintln!("{cc} {flags:?}: {addr:#x}: {r}"),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(checked >= 30, "{checked} functions checked");
}

/// Debian's clang, by whichever name it has here.
fn clang() -> &'static str {
    ["clang", "clang-16", "clang-14"]
        .into_iter()
        .find(|c| std::process::Command::new(c).arg("--version").output().is_ok())
        .unwrap_or("clang")
}

const REAL_C: &str = r#"
#include <string.h>
static volatile int sink;
__attribute__((noinline)) int add(int a, int b) { return a + b; }
__attribute__((noinline)) int tiny(void) { return 0; }
__attribute__((noinline)) long fact(long n) { return n < 2 ? 1 : n * fact(n - 1); }
__attribute__((noinline)) int sum(const int *v, int n) { int s = 0; for (int i = 0; i < n; i++) s += v[i]; return s; }
__attribute__((noinline)) void touch(int x) { sink = x; }
__attribute__((noinline)) int calls(int x) { touch(x); return add(x, 1); }
__attribute__((noinline)) size_t len(const char *s) { return strlen(s) + 1; }
__attribute__((noinline)) int sw(int x) {
    switch (x) { case 0: return 3; case 1: return 7; case 2: return 11; case 3: return 2; case 4: return 9; default: return -1; }
}
__attribute__((noinline)) int many(int a, int b, int c, int d, int e, int f, int g) { return a * b + c * d + e * f + g; }
__attribute__((noinline)) double fl(double x, float y) { return x * y + 1.5; }
static int table[64];
__attribute__((noinline)) int global(int i) { return table[i & 63]; }
int run(int argc, char **argv) {
    int v[4] = {1, 2, 3, argc};
    return calls(argc) + sum(v, 4) + (int)fact(argc) + tiny() + (int)len(argv[0]) + sw(argc) + many(1,2,3,4,5,6,argc) + (int)fl(1, 2) + global(argc);
}
"#;
