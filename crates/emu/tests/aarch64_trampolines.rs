//! The AArch64 trampolines, veneer and direct stub on their own, under
//! qemu-aarch64: `harness/aarch64_plans.c`, linked into the emulation
//! harness with the `-pg` function of `harness/pg.c`, has functions of
//! eight arguments; the script maps the trampolines, a veneer and a direct
//! stub at fixed addresses, applies every plan's writes one at a time and
//! calls the patched functions after each write (results, callbacks,
//! `ip`, `parent_ip` and the register frame checked by the harness).

use std::fmt::Write as _;
use std::process::Command;

use fntrace_arch::aarch64::{bl, Aarch64, NOP};
use fntrace_arch::{Family, Patcher, PlanSite, State, TrampolineSpec};
use fntrace_emu::build::run;
use fntrace_emu::scenario::hexs;
use fntrace_emu::{build_with, emulate, workdir, Program, AARCH64};

/// Near the static binary's text (0x400000): within `bl` reach.
const CODE: u64 = 0x200_0000;
/// Far from it: reached through a veneer.
const FAR: u64 = 0x40_0000_0000;

/// What a call of the traced function must show.
#[derive(Clone, Copy)]
struct Expect {
    /// Callbacks; `None`: any (between two writes of a plan).
    calls: Option<u64>,
    regs: bool,
    redirect: bool,
}

const ANY: Expect = Expect {
    calls: None,
    regs: false,
    redirect: false,
};

/// The harness's script.
#[derive(Default)]
struct Script(String);

impl Script {
    fn map(&mut self, addr: u64, len: u64) {
        writeln!(self.0, "map {addr:#x} {len:#x}").unwrap();
    }

    fn load(&mut self, addr: u64, bytes: &[u8]) {
        writeln!(self.0, "load {addr:#x} {}", hexs(bytes)).unwrap();
    }

    fn check(&mut self, which: u64, e: Expect) {
        let calls = e.calls.map_or("any".to_string(), |n| n.to_string());
        writeln!(
            self.0,
            "check {which} {calls} {} {}",
            e.regs as u8, e.redirect as u8
        )
        .unwrap();
    }

    /// Walks `site` through `states`, checking after every write.
    fn walk(&mut self, site: &PlanSite<'_>, which: u64, states: &[(State, Expect)]) {
        self.check(which, states[0].1);
        for pair in states.windows(2) {
            let ((from, _), (to, expect)) = (pair[0], pair[1]);
            for w in Aarch64.plan(site, from, to).unwrap() {
                writeln!(self.0, "write {:#x} {}", w.addr, hexs(&w.bytes)).unwrap();
                self.check(which, ANY);
            }
            self.check(which, expect);
        }
    }
}

/// Address of the `bl _mcount` in `traced_pg`.
fn mcount_site(program: &Program) -> u64 {
    let text = run(Command::new("aarch64-linux-gnu-objdump")
        .arg("-d")
        .arg("--disassemble=traced_pg")
        .arg(&program.path));
    let line = text
        .lines()
        .find(|l| l.contains("bl\t") && l.contains("<_mcount>"))
        .expect("bl _mcount in traced_pg");
    u64::from_str_radix(line.trim().split(':').next().unwrap(), 16).unwrap()
}

#[test]
fn plans_and_trampolines_run_under_qemu() {
    let dir = workdir("aarch64-trampolines");
    let program = build_with(&AARCH64, &dir, &[("aarch64_plans.c", &[]), ("pg.c", &["-pg"])]);
    let pg = mcount_site(&program);
    let (traced, mcount, callback) = (
        program.addr("traced"),
        program.addr("_mcount"),
        program.addr("callback"),
    );

    let mut s = Script::default();
    s.map(CODE, 0x2000);
    s.map(FAR, 0x1000);
    writeln!(s.0, "unprotect {traced:#x} 8\nunprotect {pg:#x} 4").unwrap();
    let spec = |family, regs| TrampolineSpec {
        family,
        callback,
        regs,
    };
    let (entry0, entry1, mcount0, mcount1) = (CODE, FAR, CODE + 0x200, CODE + 0x400);
    let (stub, veneer) = (CODE + 0x600, CODE + 0x800);
    for (at, family, regs) in [
        (entry0, Family::Entry, false),
        (entry1, Family::Entry, true),
        (mcount0, Family::Mcount, false),
        (mcount1, Family::Mcount, true),
    ] {
        s.load(at, &Aarch64.trampoline(at, &spec(family, regs)).unwrap());
    }
    s.load(veneer, &Aarch64.veneer(veneer, entry1).unwrap());
    let stub_code = Aarch64
        .direct_stub(stub, program.addr("replacement"))
        .unwrap()
        .unwrap();
    s.load(stub, &stub_code);

    let none = Expect {
        calls: Some(0),
        regs: false,
        redirect: false,
    };
    let plain = Expect {
        calls: Some(3),
        regs: false,
        redirect: false,
    };
    let regs = Expect {
        calls: Some(3),
        regs: true,
        redirect: false,
    };
    let redirected = Expect {
        calls: Some(0),
        regs: false,
        redirect: true,
    };
    let nops = Aarch64::code(&[NOP, NOP]);
    let site = PlanSite {
        addr: traced,
        original: &nops,
        entry: true,
    };
    assert!(!Aarch64.reaches(&site, entry1));
    let call = |target| State::Call { target, regs: false };
    let redirect = State::Redirect { to: stub };
    let entry_walk = [
        (State::Original, none),
        (State::Off, none),
        (call(entry0), plain),
        (call(veneer), regs),
        (redirect, redirected),
        (call(entry0), plain),
        (State::Original, none),
        (call(veneer), regs),
        (redirect, redirected),
        (State::Off, none),
        (redirect, redirected),
        (State::Original, none),
    ];
    s.walk(&site, 0, &entry_walk);

    let bl_mcount = Aarch64::code(&[bl(pg, mcount).unwrap()]);
    let site = PlanSite {
        addr: pg,
        original: &bl_mcount,
        entry: false,
    };
    let pg_walk = [
        (State::Original, none),
        (State::Off, none),
        (call(mcount0), plain),
        (call(mcount1), regs),
        (State::Original, none),
        (call(mcount1), regs),
        (State::Off, none),
        (call(mcount0), plain),
        (State::Original, none),
    ];
    s.walk(&site, 1, &pg_walk);
    s.0 += "steps\n";

    let out = emulate(&AARCH64, &program, &s.0);
    let ok = out
        .lines()
        .find(|l| l.starts_with("ok "))
        .unwrap_or_else(|| panic!("{out}"));
    eprintln!("qemu: {ok}");
    std::fs::remove_dir_all(&dir).ok();
}
