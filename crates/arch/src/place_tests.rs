//! The placer with a fake space: what is placed where, what is reused,
//! and what a space that answers wrongly gets.

use super::*;
use crate::aarch64::AARCH64;
use crate::mips::{MIPS32_LE, MIPS64_LE};
use crate::plan::Family;
use crate::x86_64::X86_64;

/// Areas handed out in order: the first one whose next address fits.
#[derive(Debug, Default)]
struct Areas {
    next: Vec<u64>,
    asked: Vec<(CodeKind, usize, u64, u64)>,
}

impl Areas {
    fn new(bases: &[u64]) -> Areas {
        Areas {
            next: bases.to_vec(),
            asked: Vec::new(),
        }
    }
}

impl Space for Areas {
    fn place(&mut self, r: &Request<'_>) -> Result<u64, NoRoom> {
        self.asked.push((r.kind, r.len, r.align, r.near));
        for next in &mut self.next {
            let at = next.next_multiple_of(r.align);
            if (r.fits)(at) {
                *next = at + r.len as u64;
                return Ok(at);
            }
        }
        Err(NoRoom("nothing in reach".into()))
    }
}

/// A space that answers with one fixed address.
struct Fixed(u64);

impl Space for Fixed {
    fn place(&mut self, _: &Request<'_>) -> Result<u64, NoRoom> {
        Ok(self.0)
    }
}

const NOP2: [u8; 8] = [0x1f, 0x20, 0x03, 0xd5, 0x1f, 0x20, 0x03, 0xd5];

fn a64_site(addr: u64) -> PlanSite<'static> {
    PlanSite {
        addr,
        original: &NOP2,
        entry: true,
    }
}

fn spec(callback: u64, regs: bool, family: Family) -> TrampolineSpec {
    TrampolineSpec {
        family,
        callback,
        regs,
    }
}

#[test]
fn a_trampoline_per_spec() {
    let mut space = Areas::new(&[0x100_0000]);
    let mut placer = Placer::new(&AARCH64);
    let a = spec(0x40_0000, false, Family::Entry);
    let b = spec(0x40_0000, true, Family::Entry);
    let (at_a, load) = placer.trampoline(&mut space, &a, 0x40_0000).unwrap();
    let load = load.expect("made now");
    assert_eq!(at_a, 0x100_0000);
    assert_eq!(load.addr, at_a);
    assert_eq!(load.kind, CodeKind::Trampoline);
    assert_eq!(load.bytes, AARCH64.trampoline(at_a, &a).unwrap());
    // The same spec again: the same code, nothing new to write.
    assert_eq!(placer.trampoline(&mut space, &a, 0).unwrap(), (at_a, None));
    let (at_b, load) = placer.trampoline(&mut space, &b, 0x40_0000).unwrap();
    assert!(load.is_some());
    assert!(at_b >= at_a + AARCH64.trampoline(at_a, &a).unwrap().len() as u64);
    assert_eq!(space.asked.len(), 2);
    assert_eq!(space.asked[0].3, 0x40_0000, "the hint is passed on");
}

#[test]
fn mips_entry_trampolines_are_64k_aligned() {
    let mut space = Areas::new(&[0x0e00_0100]);
    let mut placer = Placer::new(&MIPS32_LE);
    let s = spec(0x40_1000, false, Family::Entry);
    let (at, _) = placer.trampoline(&mut space, &s, 0x40_0000).unwrap();
    assert_eq!(at, 0x0e01_0000);
    assert_eq!(space.asked[0].2, 0x10000);
}

#[test]
fn a_call_in_reach_goes_straight_to_the_trampoline() {
    let mut space = Areas::new(&[0x200_0000]);
    let mut placer = Placer::new(&AARCH64);
    let site = a64_site(0x40_1000);
    let want = Want::Call {
        trampoline: 0x100_0000,
        regs: false,
    };
    let applied = placer.change(&mut space, &site, State::Off, want).unwrap();
    let state = State::Call {
        target: 0x100_0000,
        regs: false,
    };
    assert_eq!(applied.state, state);
    assert!(applied.loads.is_empty());
    assert_eq!(applied.veneer, None);
    assert_eq!(applied.plan, AARCH64.plan(&site, State::Off, state).unwrap());
    assert!(space.asked.is_empty(), "no room asked for");
}

#[test]
fn far_sites_share_a_veneer_in_their_reach() {
    // The trampoline near 0x400000; a "module" at 1 GiB; another at 2 GiB.
    let mut space = Areas::new(&[0x180_0000, 0x4080_0000, 0x8080_0000]);
    let mut placer = Placer::new(&AARCH64);
    let tramp = 0x100_0000;
    let want = Want::Call {
        trampoline: tramp,
        regs: true,
    };
    let first = placer.prepare(&mut space, &a64_site(0x4000_1000), want).unwrap();
    let at = first.veneer.expect("out of bl's reach");
    assert_eq!(at, 0x4080_0000, "placed where the site reaches");
    assert_eq!(
        first.state,
        State::Call {
            target: at,
            regs: true
        }
    );
    assert_eq!(
        first.loads,
        [Load {
            addr: at,
            bytes: AARCH64.veneer(at, tramp).unwrap(),
            kind: CodeKind::Veneer { to: tramp },
        }]
    );
    assert_eq!(
        space.asked[0],
        (CodeKind::Veneer { to: tramp }, 16, 16, 0x4000_1000)
    );
    // A second site of the module: the same veneer, nothing to write.
    let second = placer.prepare(&mut space, &a64_site(0x4000_2000), want).unwrap();
    assert_eq!((second.veneer, second.loads.len()), (Some(at), 0));
    // A site of the other module: a veneer of its own.
    let third = placer.prepare(&mut space, &a64_site(0x8000_0000), want).unwrap();
    assert_eq!(third.veneer, Some(0x8080_0000));
    assert_eq!(third.loads.len(), 1);
    // Another trampoline: another veneer.
    let other = Want::Call {
        trampoline: tramp + 0x10000,
        regs: false,
    };
    let fourth = placer.prepare(&mut space, &a64_site(0x4000_1000), other).unwrap();
    assert_eq!(fourth.veneer, Some(at + 16));
}

#[test]
fn a_mips_entry_site_gets_a_64k_aligned_veneer() {
    // `lui at` gives no low half: beyond 32 bits, a veneer the site reaches,
    // aligned as an entry trampoline is.
    let mut space = Areas::new(&[0x0d00_0010]);
    let mut placer = Placer::new(&MIPS64_LE);
    let site = PlanSite {
        addr: 0x40_1000,
        original: &[0; 16],
        entry: true,
    };
    let tramp = 0x1_2340_0000;
    assert!(!MIPS64_LE.reaches(&site, tramp));
    let want = Want::Call {
        trampoline: tramp,
        regs: false,
    };
    let p = placer.prepare(&mut space, &site, want).unwrap();
    assert_eq!(p.veneer, Some(0x0d01_0000));
    assert_eq!(space.asked[0].2, 0x10000);
}

#[test]
fn redirects_through_one_stub_per_replacement() {
    let mut space = Areas::new(&[0x200_0000]);
    let mut placer = Placer::new(&AARCH64);
    let site = a64_site(0x40_1000);
    let want = Want::Redirect {
        replacement: 0x40_2000,
    };
    let applied = placer.change(&mut space, &site, State::Off, want).unwrap();
    assert_eq!(applied.state, State::Redirect { to: 0x200_0000 });
    assert_eq!(applied.loads.len(), 1);
    assert_eq!(
        applied.loads[0].kind,
        CodeKind::Stub {
            replacement: 0x40_2000
        }
    );
    assert_eq!(
        Some(applied.loads[0].bytes.clone()),
        AARCH64.direct_stub(0x200_0000, 0x40_2000).unwrap()
    );
    let again = placer.prepare(&mut space, &a64_site(0x40_3000), want).unwrap();
    assert_eq!((again.state, again.loads.len()), (applied.state, 0));
    // A `-pg` site (after the prologue) cannot redirect: the plan says so.
    // bl 0x500000 (`_mcount`), at 0x401000.
    let bl_mcount = 0x9403_fc00u32.to_le_bytes();
    let pg = PlanSite {
        addr: 0x40_1000,
        original: &bl_mcount,
        entry: false,
    };
    let refused = placer.change(&mut space, &pg, State::Off, want);
    assert!(
        matches!(refused, Err(PlaceError::Plan(PlanError::Unsupported(_)))),
        "{refused:?}"
    );
}

#[test]
fn mips_redirects_need_no_stub() {
    let mut space = Areas::new(&[0x0c00_0000]);
    let mut placer = Placer::new(&MIPS32_LE);
    let site = PlanSite {
        addr: 0x40_1000,
        original: &[0; 16],
        entry: true,
    };
    let want = Want::Redirect {
        replacement: 0x40_2000,
    };
    let applied = placer.change(&mut space, &site, State::Off, want).unwrap();
    assert_eq!(applied.state, State::Redirect { to: 0x40_2000 });
    assert!(applied.loads.is_empty());
    assert!(!applied.plan.is_empty());
    assert!(space.asked.is_empty());
}

#[test]
fn off_and_original_place_nothing() {
    let mut placer = Placer::new(&AARCH64);
    let site = a64_site(0x40_1000);
    for (want, state) in [(Want::Off, State::Off), (Want::Original, State::Original)] {
        let p = placer.prepare(&mut Fixed(0), &site, want).unwrap();
        assert_eq!(
            p,
            Prepared {
                state,
                loads: vec![],
                veneer: None
            }
        );
    }
}

#[test]
fn a_space_that_answers_wrongly_is_refused() {
    let mut placer = Placer::new(&AARCH64);
    let want = Want::Call {
        trampoline: 0x100_0000,
        regs: false,
    };
    let site = a64_site(0x4000_1000);
    // Out of the site's reach.
    let e = placer.prepare(&mut Fixed(0x200_0000), &site, want).unwrap_err();
    assert!(matches!(e, PlaceError::BadPlace { at: 0x200_0000, .. }), "{e}");
    // Not aligned.
    let e = placer.prepare(&mut Fixed(0x4080_0004), &site, want).unwrap_err();
    assert!(matches!(e, PlaceError::BadPlace { at: 0x4080_0004, .. }), "{e}");
    // No room.
    let e = placer.prepare(&mut Areas::new(&[]), &site, want).unwrap_err();
    assert!(
        matches!(
            e,
            PlaceError::NoRoom {
                len: 16,
                near: 0x4000_1000,
                ..
            }
        ),
        "{e}"
    );
    // Nothing was remembered: a good space is asked again.
    let p = placer.prepare(&mut Fixed(0x4080_0000), &site, want).unwrap();
    assert_eq!(p.veneer, Some(0x4080_0000));
}

#[test]
fn x86_64_trampolines_are_the_runtimes() {
    let mut placer = Placer::new(&X86_64);
    let e = placer
        .trampoline(&mut Fixed(0x1000), &spec(0x2000, false, Family::Entry), 0)
        .unwrap_err();
    assert!(matches!(e, PlaceError::Plan(PlanError::Unsupported(_))), "{e}");
    // Calls to its own trampolines are planned as everywhere.
    let fentry = [0x0f, 0x1f, 0x44, 0x00, 0x00];
    let site = PlanSite {
        addr: 0x40_1000,
        original: &fentry,
        entry: true,
    };
    let want = Want::Call {
        trampoline: 0x50_0000,
        regs: false,
    };
    let applied = placer
        .change(&mut Fixed(0), &site, State::Original, want)
        .unwrap();
    assert_eq!(applied.veneer, None);
    assert_eq!(applied.plan.len(), 3, "the int3 protocol");
}
