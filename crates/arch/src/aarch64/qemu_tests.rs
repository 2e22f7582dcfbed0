//! A smoke test under `qemu-aarch64`: `qemu_harness.c`, built statically,
//! maps the trampolines, a veneer and a direct stub at fixed addresses,
//! applies every plan's writes one at a time and calls the patched
//! functions after each write (results, callbacks, `ip`, `parent_ip` and the
//! register frame checked by the harness).

use std::collections::HashMap;
use std::process::Command;

use super::super::encode::{bl, NOP};
use super::super::Aarch64;
use super::test_tools::{run, scratch};
use crate::plan::{Family, Patcher, PlanSite, State, TrampolineSpec};

const HARNESS: &str = include_str!("qemu_harness.c");
const PG_C: &str = "long traced_pg(long a, long b, long c, long d, long e, long f, long g, long h)\n\
                    { return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 1; }\n";
const GCC: &str = "aarch64-linux-gnu-gcc";

/// Near the static binary's text (0x400000): within `bl` reach.
const CODE: u64 = 0x200_0000;
/// Far from it: reached through a veneer.
const FAR: u64 = 0x40_0000_0000;

/// What a call of the traced function must show.
#[derive(Clone, Copy)]
struct Expect {
    calls: u64,
    regs: bool,
    redirect: bool,
}

const ANY: Expect = Expect {
    calls: u64::MAX,
    regs: false,
    redirect: false,
};

#[derive(Default)]
struct Script(Vec<u64>);

impl Script {
    fn map(&mut self, addr: u64, len: u64) {
        self.0.extend([3, addr, len]);
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) {
        self.0.extend([1, addr, bytes.len() as u64]);
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0.push(u64::from_le_bytes(word));
        }
    }

    fn check(&mut self, which: u64, e: Expect) {
        self.0
            .extend([2, which, e.calls, e.regs as u64, e.redirect as u64]);
    }

    /// Walks `site` through `states`, checking after every write.
    fn walk(&mut self, site: &PlanSite<'_>, which: u64, states: &[(State, Expect)]) {
        self.check(which, states[0].1);
        for pair in states.windows(2) {
            let ((from, _), (to, expect)) = (pair[0], pair[1]);
            for w in Aarch64.plan(site, from, to).unwrap() {
                self.write(w.addr, &w.bytes);
                self.check(which, ANY);
            }
            self.check(which, expect);
        }
    }
}

fn symbols(exe: &std::path::Path) -> Option<HashMap<String, u64>> {
    let out = run(Command::new("aarch64-linux-gnu-nm").arg(exe))?;
    let text = String::from_utf8(out).unwrap();
    let mut map = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let [addr, _, name] = f[..] {
            map.insert(name.to_string(), u64::from_str_radix(addr, 16).unwrap());
        }
    }
    Some(map)
}

/// Address of the `bl _mcount` in `traced_pg`.
fn mcount_site(exe: &std::path::Path) -> Option<u64> {
    let out = run(Command::new("aarch64-linux-gnu-objdump")
        .arg("-d")
        .arg("--disassemble=traced_pg")
        .arg(exe))?;
    let text = String::from_utf8(out).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("bl\t") && l.contains("<_mcount>"))?;
    u64::from_str_radix(line.trim().split(':').next()?, 16).ok()
}

#[test]
fn plans_and_trampolines_run_under_qemu() {
    let dir = scratch();
    std::fs::write(dir.join("harness.c"), HARNESS).unwrap();
    std::fs::write(dir.join("pg.c"), PG_C).unwrap();
    let exe = dir.join("harness");
    let Some(_) = run(Command::new(GCC)
        .current_dir(&dir)
        .args(["-O2", "-pg", "-c", "pg.c"]))
    else {
        return;
    };
    run(Command::new(GCC)
        .current_dir(&dir)
        .args(["-O2", "-static", "-o", "harness", "harness.c", "pg.o"]))
    .unwrap();
    let Some(syms) = symbols(&exe) else { return };
    let pg = mcount_site(&exe).expect("bl _mcount in traced_pg");
    let (traced, mcount, callback) = (syms["traced"], syms["_mcount"], syms["callback"]);

    let mut s = Script::default();
    s.map(CODE, 0x2000);
    s.map(FAR, 0x1000);
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
        s.write(at, &Aarch64.trampoline(at, &spec(family, regs)).unwrap());
    }
    s.write(veneer, &Aarch64.veneer(veneer, entry1).unwrap());
    let stub_code = Aarch64.direct_stub(stub, syms["replacement"]).unwrap().unwrap();
    s.write(stub, &stub_code);

    let none = Expect {
        calls: 0,
        regs: false,
        redirect: false,
    };
    let plain = Expect {
        calls: 3,
        regs: false,
        redirect: false,
    };
    let regs = Expect {
        calls: 3,
        regs: true,
        redirect: false,
    };
    let redirected = Expect {
        calls: 0,
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
    s.0.push(0);

    let bytes: Vec<u8> = s.0.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(dir.join("script"), bytes).unwrap();
    let Some(out) = run(Command::new("qemu-aarch64").arg(&exe).arg(dir.join("script"))) else {
        return;
    };
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("ok "), "{out}");
    eprintln!("qemu: {out}");
    std::fs::remove_dir_all(&dir).ok();
}
