//! The plans, step by step, and the veneers and direct stubs through
//! objdump.

use super::super::encode::{bl, decode_bl, NOP};
use super::super::Aarch64;
use super::test_tools::texts;
use super::{MOV_X9_LR, VENEER_LEN};
use crate::plan::{Patcher, PlanError, PlanSite, State, Write};

const A64: Aarch64 = Aarch64;
const SITE: u64 = 0x55_5555_1000;
const MCOUNT: u64 = 0x55_5560_0000;
const T1: u64 = 0x55_5800_0000;
const T2: u64 = 0x55_5000_0040;
const R: u64 = 0x55_5555_9000;

fn entry_site(original: &[u8]) -> PlanSite<'_> {
    PlanSite {
        addr: SITE,
        original,
        entry: true,
    }
}

fn pg_site(original: &[u8]) -> PlanSite<'_> {
    PlanSite {
        addr: SITE,
        original,
        entry: false,
    }
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks(4).map(|c| Aarch64::word(c).unwrap()).collect()
}

/// Applies `writes` one by one to `code` (at `base`), calling `check` on
/// every state reached.
fn apply(code: &mut [u8], base: u64, writes: &[Write], mut check: impl FnMut(&[u8])) {
    for w in writes {
        assert_eq!(w.addr % 4, 0, "{w:?}");
        assert_eq!(w.bytes.len(), 4, "{w:?}");
        let off = (w.addr - base) as usize;
        assert_ne!(&code[off..off + 4], &w.bytes[..], "useless write {w:?}");
        code[off..off + 4].copy_from_slice(&w.bytes);
        check(code);
    }
}

/// What the words of an entry site mean: `None` if a `bl` runs without
/// `mov x9, x30` before it, or a word is foreign.
fn entry_meaning(code: &[u8]) -> Option<State> {
    let w = words(code);
    let call = decode_bl(w[1], SITE + 4);
    match (w[0], w[1], call) {
        (NOP, NOP, _) => Some(State::Original),
        (MOV_X9_LR, NOP, _) => Some(State::Off),
        (MOV_X9_LR, _, Some(target)) => Some(State::Call { target, regs: false }),
        _ => None,
    }
}

fn pg_meaning(code: &[u8]) -> Option<State> {
    let w = Aarch64::word(code).unwrap();
    match decode_bl(w, SITE) {
        Some(MCOUNT) => Some(State::Original),
        Some(target) => Some(State::Call { target, regs: false }),
        None if w == NOP => Some(State::Off),
        None => None,
    }
}

/// A redirect reads as a call to the stub.
fn as_seen(state: State) -> State {
    match state {
        State::Redirect { to } => State::Call {
            target: to,
            regs: false,
        },
        State::Call { target, .. } => State::Call { target, regs: false },
        other => other,
    }
}

fn run_all(site: &PlanSite<'_>, states: &[State], meaning: fn(&[u8]) -> Option<State>) {
    for &from in states {
        for &to in states {
            let mut code = site.original.to_vec();
            let setup = A64.plan(site, State::Original, from).unwrap();
            apply(&mut code, site.addr, &setup, |c| {
                assert!(meaning(c).is_some(), "{c:02x?}")
            });
            assert_eq!(meaning(&code), Some(as_seen(from)));
            let writes = A64.plan(site, from, to).unwrap();
            apply(&mut code, site.addr, &writes, |c| {
                assert!(meaning(c).is_some(), "{from:?} -> {to:?}: unsafe {c:02x?}");
            });
            assert_eq!(meaning(&code), Some(as_seen(to)), "{from:?} -> {to:?}");
        }
    }
}

#[test]
fn entry_plans_pass_only_through_safe_states() {
    let original = Aarch64::code(&[NOP, NOP]);
    let states = [
        State::Original,
        State::Off,
        State::Call {
            target: T1,
            regs: false,
        },
        State::Call {
            target: T2,
            regs: true,
        },
        State::Redirect { to: R },
    ];
    run_all(&entry_site(&original), &states, entry_meaning);
    // Enabling writes the `mov` first, disabling the `bl` first.
    let site = entry_site(&original);
    let on = A64.plan(&site, State::Original, states[2]).unwrap();
    assert_eq!(on.iter().map(|w| w.addr).collect::<Vec<_>>(), [SITE, SITE + 4]);
    let off = A64.plan(&site, states[2], State::Original).unwrap();
    assert_eq!(off.iter().map(|w| w.addr).collect::<Vec<_>>(), [SITE + 4, SITE]);
    assert_eq!(A64.plan(&site, states[2], states[3]).unwrap().len(), 1);
    assert!(A64.plan(&site, states[4], states[4]).unwrap().is_empty());
}

#[test]
fn pg_plans() {
    let original = Aarch64::code(&[bl(SITE, MCOUNT).unwrap()]);
    let site = pg_site(&original);
    let states = [
        State::Original,
        State::Off,
        State::Call {
            target: T1,
            regs: false,
        },
        State::Call {
            target: T2,
            regs: true,
        },
    ];
    run_all(&site, &states, pg_meaning);
    assert!(matches!(
        A64.plan(&site, State::Off, State::Redirect { to: R }),
        Err(PlanError::Unsupported(_))
    ));
    assert_eq!(A64.return_address(&site), Ok(SITE + 4));
}

#[test]
fn unknown_forms_are_refused() {
    let bl_ = Aarch64::code(&[bl(SITE, MCOUNT).unwrap()]);
    let nops = Aarch64::code(&[NOP, NOP]);
    let on = Aarch64::code(&[MOV_X9_LR, NOP]);
    let form = |site: PlanSite<'_>| {
        matches!(
            A64.plan(&site, State::Original, State::Off),
            Err(PlanError::Form(_))
        )
    };
    assert!(form(entry_site(&bl_)));
    assert!(form(entry_site(&on)));
    assert!(form(entry_site(&nops[..4])));
    assert!(form(entry_site(&Aarch64::code(&[NOP, NOP, NOP]))));
    assert!(form(pg_site(&nops[..4])));
    assert!(form(pg_site(&nops)));
    assert!(form(PlanSite {
        addr: SITE + 2,
        original: &nops,
        entry: true
    }));
    assert!(!form(entry_site(&nops)));
    assert!(!form(pg_site(&bl_)));
    assert_eq!(A64.return_address(&entry_site(&nops)), Ok(SITE + 8));
    assert!(A64.return_address(&entry_site(&bl_)).is_err());
}

#[test]
fn reach_is_that_of_the_last_word() {
    let nops = Aarch64::code(&[NOP, NOP]);
    let bl_ = Aarch64::code(&[bl(SITE, MCOUNT).unwrap()]);
    for (site, call) in [(entry_site(&nops), SITE + 4), (pg_site(&bl_), SITE)] {
        for (target, ok) in [
            (call + (128 << 20) - 4, true),
            (call - (128 << 20), true),
            (call + (128 << 20), false),
            (call - (128 << 20) - 4, false),
            (call + 0x102, false),
            (call + (1 << 40), false),
        ] {
            assert_eq!(A64.reaches(&site, target), ok, "{target:#x}");
            let plan = A64.plan(&site, State::Off, State::Call { target, regs: false });
            if ok {
                let last = *plan.unwrap().last().unwrap();
                assert_eq!(last.addr, call);
                assert_eq!(decode_bl(Aarch64::word(&last.bytes).unwrap(), call), Some(target));
            } else {
                assert_eq!(
                    plan,
                    Err(PlanError::Reach {
                        from: call,
                        to: target
                    })
                );
            }
        }
    }
    let far = State::Redirect { to: SITE + (1 << 30) };
    assert!(matches!(
        A64.plan(&entry_site(&nops), State::Off, far),
        Err(PlanError::Reach { .. })
    ));
}

#[test]
fn veneer_jumps_anywhere_through_x16() {
    for (at, to) in [(0x7f00_0000_0000u64, 0x55_5555_0000u64), (0x1000, !3)] {
        let code = A64.veneer(at, to).unwrap();
        assert_eq!(code.len(), A64.veneer_len());
        assert_eq!(code.len(), VENEER_LEN);
        assert_eq!(code[8..16], to.to_le_bytes());
        let Some(texts) = texts(&code, at, 8) else { return };
        assert_eq!(texts, [format!("ldr x16, {:#x}", at + 8), "br x16".to_string()]);
    }
    assert!(A64.veneer(0x1004, 0x2000).is_err());
}

#[test]
fn direct_stub_restores_x30_and_jumps() {
    for at in [0x7f00_0000_1000u64, 0x7f00_0000_1004] {
        let code = A64.direct_stub(at, R).unwrap().unwrap();
        let lit = code.len() - 8;
        assert_eq!((at + lit as u64) % 8, 0);
        assert_eq!(code[lit..], R.to_le_bytes());
        let Some(texts) = texts(&code, at, lit) else {
            return;
        };
        assert_eq!(
            texts[..3],
            [
                "mov x30, x9".to_string(),
                format!("ldr x16, {:#x}", at + lit as u64),
                "br x16".into()
            ]
        );
        assert!(texts[3..].iter().all(|t| t == "nop"));
    }
}
