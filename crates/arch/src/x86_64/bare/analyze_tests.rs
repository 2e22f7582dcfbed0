//! `analyze` on real compiler output (gcc and clang, `-O2`), checked
//! against objdump's decoding, and on bad input.

use super::build::{Module, CLANG, CONFIGS, GCC, SOURCE};
use super::{analyze, BareEntry, Refusal};

fn analyzed(module: &Module, name: &str) -> Result<BareEntry, Refusal> {
    let f = module.function(name);
    analyze(f.code, f.addr, f.size, f.limit)
}

/// `analyze`'s verdict on `name`, which must be a jump-form entry: `e`
/// (`f` plus `skip`), the boundary mask, `L` and the displaced bytes'
/// first bytes.
fn expect_jump(module: &Module, name: &str, skip: u64, boundaries: u8, len: usize, starts_with: &[u8]) {
    let entry = analyzed(module, name).unwrap_or_else(|r| panic!("{name}: {r}"));
    let f = module.function(name);
    assert_eq!(entry.function, f.addr, "{name}");
    assert_eq!(entry.entry, f.addr + skip, "{name}: e");
    assert!(!entry.trap_only, "{name}");
    assert_eq!(
        entry.boundaries, boundaries,
        "{name}: boundaries {:#b}",
        entry.boundaries
    );
    assert_eq!(entry.len, len, "{name}: L");
    assert_eq!(entry.displaced.len(), len, "{name}");
    assert!(
        entry.displaced.starts_with(starts_with),
        "{name}: {:02x?}",
        entry.displaced
    );
}

#[test]
fn gcc_endbr64_then_frame_pointer() {
    let Some(m) = Module::build(GCC, CONFIGS[0].1, SOURCE) else {
        return;
    };
    // endbr64; push rbp (e); mov rbp,rsp (e+1); push r12 (e+4).
    expect_jump(
        &m,
        "frame",
        4,
        1 << 1 | 1 << 4,
        6,
        &[0x55, 0x48, 0x89, 0xe5, 0x41, 0x54],
    );
    // endbr64; push rbp; mov rbp,rsp; call h: the call is D's last.
    expect_jump(
        &m,
        "calls",
        4,
        1 << 1 | 1 << 4,
        9,
        &[0x55, 0x48, 0x89, 0xe5, 0xe8],
    );
}

#[test]
fn gcc_plain_prologues() {
    let Some(m) = Module::build(GCC, CONFIGS[1].1, SOURCE) else {
        return;
    };
    // push r15; push r14; push r13.
    expect_jump(
        &m,
        "many",
        0,
        1 << 2 | 1 << 4,
        6,
        &[0x41, 0x57, 0x41, 0x56, 0x41, 0x55],
    );
    // sub rsp,8; call h.
    expect_jump(&m, "calls", 0, 1 << 4, 9, &[0x48, 0x83, 0xec, 0x08, 0xe8]);
    // mov rax,[rip+counter64]: no interior boundary.
    expect_jump(&m, "load64", 0, 0, 7, &[0x48, 0x8b, 0x05]);
    // test edi,edi; je L (L after D); sub rsp,8.
    expect_jump(&m, "test_je", 0, 1 << 2 | 1 << 4, 8, &[0x85, 0xff, 0x74]);
    // add edi,1; jmp g.
    expect_jump(&m, "tail", 0, 1 << 3, 8, &[0x83, 0xc7, 0x01, 0xe9]);
}

#[test]
fn a_function_shorter_than_the_jump_runs_into_its_padding() {
    let Some(m) = Module::build(GCC, CONFIGS[1].1, SOURCE) else {
        return;
    };
    // xor eax,eax; ret (3 bytes), then gcc's multi-byte NOP: the jump ends
    // in the padding, whose boundaries are not the function's.
    let entry = analyzed(&m, "tiny").unwrap();
    let f = m.function("tiny");
    assert_eq!(f.size, 3);
    assert!(!entry.trap_only);
    assert_eq!(entry.boundaries, 1 << 2, "only the ret is a boundary");
    assert!(entry.len >= 5 && f.addr + entry.len as u64 <= f.limit);
    assert_eq!(&entry.displaced[..3], &[0x31, 0xc0, 0xc3]);
}

#[test]
fn a_function_shorter_than_the_jump_without_padding_is_trap_only() {
    let Some(m) = Module::build(GCC, CONFIGS[2].1, SOURCE) else {
        return;
    };
    let f = m.function("tiny");
    assert_eq!(
        f.addr + f.size,
        f.limit,
        "-falign-functions=1 packs the next function right after"
    );
    let entry = analyzed(&m, "tiny").unwrap();
    assert!(entry.trap_only);
    assert_eq!((entry.len, entry.boundaries), (2, 0));
    assert_eq!(entry.displaced, [0x31, 0xc0]);
    // A longer function is unaffected by the packing.
    expect_jump(&m, "calls", 0, 1 << 4, 9, &[0x48, 0x83, 0xec, 0x08, 0xe8]);
}

#[test]
fn clang_prologues() {
    let Some(m) = Module::build(CLANG, CONFIGS[4].1, SOURCE) else {
        return;
    };
    // push rax; call h.
    expect_jump(&m, "calls", 0, 1 << 1, 6, &[0x50, 0xe8]);
    // push r14; push rbx; push rax.
    expect_jump(
        &m,
        "frame",
        0,
        1 << 2 | 1 << 3 | 1 << 4,
        6,
        &[0x41, 0x56, 0x53, 0x50, 0x89, 0xfb],
    );
    let Some(m) = Module::build(CLANG, CONFIGS[5].1, SOURCE) else {
        return;
    };
    expect_jump(&m, "calls", 4, 1 << 1, 6, &[0x50, 0xe8]);
}

#[test]
fn loops_back_to_the_entry_are_refused() {
    for (compilers, flags) in [CONFIGS[1], CONFIGS[4]] {
        let Some(m) = Module::build(compilers, flags, SOURCE) else {
            continue;
        };
        // gcc: mov eax,[rdi]; test eax,eax; je spin. clang: cmp [rdi],0; je spin.
        let je = m.objdump("spin").iter().find(|(_, mn)| mn == "je").unwrap().0;
        assert_eq!(
            analyzed(&m, "spin"),
            Err(Refusal::LoopsToEntry { from: je }),
            "{compilers:?}"
        );
        // endbr64; 1: dec edi; jnz 1b — back to e, after the endbr64.
        let f_e = m.function("loop_e");
        assert_eq!(
            analyzed(&m, "loop_e"),
            Err(Refusal::LoopsToEntry { from: f_e.addr + 6 })
        );
        // A call to itself is a call, not a loop.
        let rec = analyzed(&m, "rec").unwrap();
        assert_eq!(rec.boundaries, 1 << 2 | 1 << 4);
    }
}

#[test]
fn branches_into_d() {
    let Some(m) = Module::build(GCC, CONFIGS[1].1, SOURCE) else {
        return;
    };
    let at = |name: &str| m.function(name).addr;
    // test edi,edi; je 1f; 1: mov eax,1 — the je's target, e+4, is in D.
    let je = analyzed(&m, "je_inside").unwrap();
    assert_eq!((je.boundaries, je.len), (1 << 2 | 1 << 4, 9));
    assert_eq!(je.branches_into, [at("je_inside") + 2]);
    // xor; 1: dec edi; jnz 1b — a loop inside D.
    let inner = analyzed(&m, "loop_in_d").unwrap();
    assert_eq!(inner.branches_into, [at("loop_in_d") + 4]);
    // xor; 1: add; dec; jnz 1b — from after D to e+2.
    let into = analyzed(&m, "into_d").unwrap();
    assert_eq!((into.boundaries, into.len), (1 << 2 | 1 << 4, 6));
    assert_eq!(into.branches_into, [at("into_d") + 6]);
    // xor; ret; 1: mov eax,5; ret; jmp 1b — a ret that is not D's last.
    let ret = analyzed(&m, "ret_mid").unwrap();
    assert_eq!((ret.boundaries, ret.len), (1 << 2 | 1 << 3, 8));
    assert_eq!(ret.branches_into, [at("ret_mid") + 9]);
    // Straight-line code has none.
    assert!(analyzed(&m, "calls").unwrap().branches_into.is_empty());
}

#[test]
fn what_cannot_move_is_refused() {
    for (compilers, flags) in [CONFIGS[1], CONFIGS[2], CONFIGS[4]] {
        let Some(m) = Module::build(compilers, flags, SOURCE) else {
            continue;
        };
        let at = |name: &str| m.function(name).addr;
        let die = analyzed(&m, "die");
        assert_eq!(
            die,
            Err(Refusal::Unmovable {
                mnemonic: "ud2".into(),
                at: at("die")
            })
        );
        assert_eq!(
            analyzed(&m, "trap_mid"),
            Err(Refusal::Unmovable {
                mnemonic: "int3".into(),
                at: at("trap_mid") + 2
            })
        );
        // syscall moves (a restart re-executes the copy's).
        let sys = analyzed(&m, "sys").unwrap();
        assert_eq!((sys.boundaries, sys.len), (1 << 2 | 1 << 4, 5));
        // inner starts 2 bytes into outer.
        assert_eq!(
            analyzed(&m, "outer"),
            Err(Refusal::NeighbourInside { at: at("outer") + 2 })
        );
    }
}

/// For every function of every build: where `analyze` says the entry and
/// the boundaries are, objdump (another decoder) agrees, and a refused
/// loop is one objdump shows.
#[test]
fn every_function_agrees_with_objdump() {
    let mut checked = 0;
    for (compilers, flags) in CONFIGS {
        let Some(m) = Module::build(compilers, flags, SOURCE) else {
            continue;
        };
        for name in m.names() {
            let f = m.function(&name);
            let insns = m.objdump(&name);
            let e = if insns[0].1 == "endbr64" {
                insns[1].0
            } else {
                insns[0].0
            };
            let result = analyzed(&m, &name);
            let head: Vec<u64> = insns
                .iter()
                .map(|i| i.0)
                .filter(|&a| a >= e && a < e + 5)
                .collect();
            let next = insns
                .iter()
                .map(|i| i.0)
                .find(|&a| a >= e + 5)
                .unwrap_or(f.addr + f.size);
            match result {
                Ok(entry) if !entry.trap_only && next >= e + 5 => {
                    assert_eq!(entry.entry, e, "{name} {flags:?}");
                    assert_eq!(entry.len as u64, next - e, "{name} {flags:?}");
                    let mask = head.iter().skip(1).fold(0u8, |m, a| m | 1 << (a - e));
                    assert_eq!(entry.boundaries, mask, "{name} {flags:?}");
                    checked += 1;
                }
                Ok(entry) => assert_eq!(entry.entry, e, "{name} {flags:?}"),
                Err(Refusal::LoopsToEntry { from }) => {
                    let line = insns.iter().find(|i| i.0 == from).unwrap();
                    assert!(line.1.starts_with('j'), "{name}: {line:?}");
                }
                Err(_) => {}
            }
        }
    }
    if checked > 0 {
        assert!(checked >= 20, "only {checked} functions compared");
    }
}

#[test]
fn bad_input_is_refused_without_panicking() {
    let f = 0x40_1000;
    assert_eq!(analyze(&[], f, 0, f + 16), Err(Refusal::TooShort));
    assert_eq!(
        analyze(&[0xf3, 0x0f, 0x1e, 0xfa], f, 4, f + 4),
        Err(Refusal::TooShort)
    );
    // 06 is not an instruction in 64-bit mode.
    assert_eq!(
        analyze(&[0x06, 0xc3], f, 2, f + 2),
        Err(Refusal::Undecodable { at: f })
    );
    assert_eq!(
        analyze(&[0x31, 0xc0, 0x06, 0x90, 0x90, 0xc3], f, 6, f + 6),
        Err(Refusal::Undecodable { at: f + 2 })
    );
    // The function is said to be 7 bytes, but only 4 are given.
    assert_eq!(
        analyze(&[0x48, 0x8b, 0x05, 0x00], f, 7, f + 7),
        Err(Refusal::Undecodable { at: f + 4 })
    );
    // Its size says it runs past the end of the address space.
    assert_eq!(
        analyze(&[0xc3], u64::MAX - 8, 1, 0),
        Err(Refusal::Undecodable { at: u64::MAX - 8 })
    );
    // An instruction cut by the function's end.
    assert_eq!(
        analyze(&[0x31, 0xc0, 0x48, 0x8b, 0x05, 0, 0, 0, 0], f, 5, f + 9),
        Err(Refusal::Undecodable { at: f + 2 })
    );
    // xor eax,eax; push rbx; mov eax,1; jmp f+1: into the middle of the
    // xor, under the jump.
    let code = [0x31, 0xc0, 0x53, 0xb8, 1, 0, 0, 0, 0xeb, 0xf7];
    assert_eq!(
        analyze(&code, f, 10, f + 10),
        Err(Refusal::Undecodable { at: f + 1 })
    );
    // ... but into the tail of the last displaced instruction (never
    // written) is allowed.
    let code = [0x31, 0xc0, 0x53, 0xb8, 1, 0, 0, 0, 0xeb, 0xfc];
    assert_eq!(analyze(&code, f, 10, f + 10).unwrap().branches_into, [f + 8]);
    // A limit at or below the function means nothing follows it.
    let tiny = [0x31, 0xc0, 0xc3, 0xcc, 0xcc, 0xcc];
    assert!(analyze(&tiny, f, 3, 0).unwrap().trap_only);
    assert!(!analyze(&tiny, f, 3, f + 6).unwrap().trap_only);
    // Padding that is not dead (a `push`) or that the limit cuts.
    assert!(
        analyze(&[0x31, 0xc0, 0xc3, 0xcc, 0x53], f, 3, f + 5)
            .unwrap()
            .trap_only
    );
    assert!(analyze(&tiny, f, 3, f + 4).unwrap().trap_only);
    // Zeros and a 66 2e 0f 1f 84 NOP are padding; the NOP is displaced
    // whole.
    let zeros = analyze(&[0x31, 0xc0, 0xc3, 0x00, 0x00], f, 3, f + 5).unwrap();
    assert_eq!((zeros.len, zeros.trap_only), (5, false));
    let nop = [0xc3, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0];
    let nop = analyze(&nop, f, 1, f + 11).unwrap();
    assert_eq!((nop.len, nop.boundaries, nop.trap_only), (11, 0, false));
}

/// Random bytes: `analyze` and `detour` return, never panic, and every
/// detour of a random entry passes the checks of a real function's.
#[test]
fn random_bytes_never_panic() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut accepted, mut relocated) = (0, 0);
    for _ in 0..20_000 {
        let len = (next() % 24) as usize;
        let code: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let f = [next() & 0x7fff_ffff_ffff, u64::MAX - next() % 64][(next() % 8 == 0) as usize];
        let size = next() % 20;
        let limit = f.wrapping_add(next() % 28);
        if let Ok(entry) = analyze(&code, f, size, limit) {
            accepted += 1;
            let _ = super::detour(&entry, f.wrapping_sub(0x3380_0000), f.wrapping_add(0x1000));
            // In reach of everything near `f`: a detour that comes out is
            // checked like a real function's.
            let at = f.wrapping_add(0x10_0000);
            if f < 1 << 62 && super::detour(&entry, at, at + 0x8000).is_ok() {
                super::detour_tests::verify(&entry, at, at + 0x8000);
                relocated += 1;
            }
        }
    }
    assert!(accepted > 1000 && relocated > 1000, "{accepted} {relocated}");
}

#[test]
fn refusals_read_as_sentences() {
    let cases = [
        (Refusal::TooShort, "shorter than 5 bytes, no padding after it"),
        (
            Refusal::LoopsToEntry { from: 0x1010 },
            "loops back to its own entry from 0x1010",
        ),
        (
            Refusal::Unmovable {
                mnemonic: "ud2".into(),
                at: 0x1000,
            },
            "cannot move `ud2` at 0x1000",
        ),
        (
            Refusal::Undecodable { at: 0x1002 },
            "cannot decode the instruction at 0x1002",
        ),
        (
            Refusal::NeighbourInside { at: 0x1003 },
            "another function starts at 0x1003, inside the displaced bytes",
        ),
        (Refusal::NoRoom, "no room for its detour within reach"),
        (
            Refusal::Reach {
                at: 0x1000,
                to: 0x9000_0000,
            },
            "the code for 0x1000 cannot reach 0x90000000 from the detour",
        ),
    ];
    for (refusal, text) in cases {
        assert_eq!(refusal.to_string(), text);
    }
}
