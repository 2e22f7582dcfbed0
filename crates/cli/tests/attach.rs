//! `fntrace attach` and `fntrace ctl` on real running processes: a
//! multi-threaded workload (`programs/attach/work.c`, with a shared library)
//! is started untraced; fntrace attaches, records, changes filters live and
//! detaches, many times; the workload checks every result against an
//! uninstrumented twin, and after each detach its code must be byte for
//! byte that of a fresh process of the same program (`/proc/PID/mem`).
//! Built in each instrumentation style: `call __fentry__` sites (which the
//! first attach turns into NOPs live), `-pg` mcount calls, patchable NOPs
//! and XRay sleds. Refusals, exceptions, the process's exit and the
//! profile tracer are in `attach_errors.rs`.

mod common;

use std::time::Duration;

use common::attach::*;
use common::{fntrace_ok, procs, Work};

/// Attach, record, change filters, detach — several times — on one
/// running process; its code equals a fresh process's after each detach,
/// and its results are right throughout.
fn attach_cycles(style: &Style) {
    procs::runtime();
    let work = Work::new(&format!("attach-{}", style.name));
    let bin = build(&work, style);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    assert_same_code(target.pid, fresh.pid, "before attaching");
    for cycle in 0..3 {
        let dir = work.path(&format!("cycle{cycle}.data"));
        let attach = Attach::start(target.pid, &dir, &[]);
        assert!(has_runtime(target.pid));
        // The parked thread leaves parked() and enters it again, traced.
        target.cmd("tick");
        std::thread::sleep(Duration::from_millis(150));
        let status = ctl(target.pid, &["status"]);
        assert!(status.contains("tracing=on"), "{status}");
        match cycle {
            0 => {
                let answer = ctl(target.pid, &["filter", "mid"]);
                assert!(patched(&answer) < patched(&status), "{status} -> {answer}");
            }
            1 => {
                ctl(target.pid, &["depth", "1"]);
            }
            _ => {
                assert_eq!(patched(&ctl(target.pid, &["tracing", "off"])), 0);
                assert!(ctl(target.pid, &["tracing", "on"]).contains("tracing=on"));
                ctl(target.pid, &["notrace", "lib_twice"]);
            }
        }
        std::thread::sleep(Duration::from_millis(150));
        let said = attach.detach();
        assert_same_code(target.pid, fresh.pid, &format!("after detach {cycle}"));
        let text = replay(&dir);
        let (whole, alone) = check_calls(&text, style.name == "xray");
        assert!(whole > 0, "cycle {cycle}: no whole mid() call recorded:\n{said}");
        if cycle < 2 {
            assert!(alone > 0, "cycle {cycle}: the live change did not show:\n{said}");
        }
        assert!(
            text.contains("parked() {"),
            "cycle {cycle}: parked() not recorded"
        );
        let info = fntrace_ok(&["info", dir.to_str().unwrap()]).0;
        assert!(info.contains("longest pause"), "{info}");
        let (rounds, bad, _, _) = target.report();
        assert_eq!(bad, 0, "wrong results after cycle {cycle}");
        assert!(rounds > 0);
    }
    let (_, bad, parks, value) = target.quit();
    let (_, fresh_bad, _, fresh_value) = fresh.quit();
    assert_eq!((bad, fresh_bad), (0, 0));
    assert_eq!(
        value, fresh_value,
        "the traced process computed other results than an untraced one"
    );
    assert_eq!(parks, 3);
}

#[test]
fn attach_fentry() {
    attach_cycles(&FENTRY);
}

#[test]
fn attach_mcount() {
    attach_cycles(&MCOUNT);
}

#[test]
fn attach_patchable() {
    attach_cycles(&PATCHABLE);
}

#[test]
fn attach_xray() {
    attach_cycles(&XRAY);
}

/// Detach while threads are inside traced functions whose return address
/// was hijacked (the parked thread for sure: it entered parked() while
/// traced and stays blocked in it across the detach); they return later
/// through the runtime's return trampoline, which outlives the session.
#[test]
fn detach_with_hijacked_returns() {
    procs::runtime();
    let work = Work::new("attach-hijacked");
    let bin = build(&work, &FENTRY);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    for round in 0..3 {
        let dir = work.path(&format!("r{round}.data"));
        let attach = Attach::start(target.pid, &dir, &[]);
        target.cmd("tick");
        std::thread::sleep(Duration::from_millis(100));
        attach.detach();
        let text = replay(&dir);
        let opened = text.matches("parked() {").count();
        let closed = text.matches("} /* parked */").count();
        assert!(
            opened > closed,
            "round {round}: parked() was not left open at the detach:\n{text}"
        );
        assert_same_code(target.pid, fresh.pid, "after the detach");
        // Now the parked thread returns through its hijacked address.
        for _ in 0..3 {
            target.cmd("tick");
        }
        let (_, bad, parks, _) = target.report();
        assert_eq!(bad, 0);
        assert_eq!(parks, 4 * (round + 1));
    }
    assert_eq!(target.quit().1, 0);
    drop(fresh);
}

/// Many attach/detach cycles on one process while it runs: each leaves its
/// code as a fresh process's; the runtime is loaded once.
#[test]
fn repeated_attach_detach() {
    procs::runtime();
    let work = Work::new("attach-repeat");
    let bin = build(&work, &PATCHABLE);
    let fresh = Target::start(&bin, &work);
    let mut target = Target::start(&bin, &work);
    let mut loaded = Vec::new();
    for cycle in 0..12 {
        let dir = work.path(&format!("c{cycle}.data"));
        let out = common::fntrace_output(&[
            "attach",
            &target.pid.to_string(),
            "-o",
            dir.to_str().unwrap(),
            "--duration",
            "40ms",
            // Every event, on a busy machine too, and the workload's own
            // functions only (as `Attach::start`).
            "--buffer-size",
            "64M",
            "--no-libcall",
        ]);
        assert!(
            out.status.success(),
            "cycle {cycle}: {}",
            procs::text(&out.stderr)
        );
        assert_same_code(target.pid, fresh.pid, &format!("cycle {cycle}"));
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("info.json")).unwrap()).unwrap();
        loaded.push(info["attach"]["loaded"].as_bool().unwrap());
        assert!(
            info["attach"]["restored"].is_u64() && info["attach"]["longest_pause_ns"].as_u64().unwrap() > 0
        );
        assert!(check_calls(&replay(&dir), false).0 > 0);
    }
    assert_eq!(loaded.iter().filter(|&&l| l).count(), 1, "{loaded:?}");
    assert!(loaded[0]);
    assert_eq!(target.report().1, 0);
    assert_eq!(target.quit().1, 0);
    drop(fresh);
}

/// Libraries loaded and unloaded while attached: `dlopen`, hooked in the
/// GOT, takes a new library's sites in at once (its functions are traced
/// without any `ctl`); one unloaded while attached is forgotten before the
/// detach writes code; one loaded while attached and kept gets its
/// original bytes back at the detach, and one loaded after the detach is
/// not touched.
#[test]
fn libraries_loaded_while_attached() {
    procs::runtime();
    let work = Work::new("attach-dlopen");
    let bin = build(&work, &FENTRY);
    let plug = work.path("libplug.so");
    let plug_src = common::program("attach/plug.c");
    common::cc(
        "gcc",
        &[
            "-O2",
            "-shared",
            "-fPIC",
            "-pg",
            "-mfentry",
            &plug_src,
            "-o",
            plug.to_str().unwrap(),
        ],
    );
    let load = format!("load {}", plug.display());
    let mut fresh = Target::start(&bin, &work);
    assert_eq!(fresh.cmd(&load), "ok");
    let mut target = Target::start(&bin, &work);

    // Loaded and unloaded while attached.
    let dir = work.path("d1.data");
    let attach = Attach::start(target.pid, &dir, &[]);
    assert_eq!(target.cmd(&load), "ok");
    assert_eq!(target.cmd("call"), "plug=37");
    assert_eq!(target.cmd("unload"), "ok");
    attach.detach();
    let text = replay(&dir);
    assert!(
        text.contains("plug_work() {") && text.contains("plug_inner();"),
        "{text}"
    );
    assert_same_code(target.pid, fresh.pid, "after a library came and went");

    // Loaded while attached, kept across the detach.
    let dir = work.path("d2.data");
    let attach = Attach::start(target.pid, &dir, &[]);
    assert_eq!(target.cmd(&load), "ok");
    assert_eq!(target.cmd("call"), "plug=37");
    attach.detach();
    assert!(replay(&dir).contains("plug_work() {"));
    assert_eq!(
        code(target.pid, "/libplug.so"),
        code(fresh.pid, "/libplug.so"),
        "after the detach"
    );
    assert_eq!(target.cmd("call"), "plug=37");

    // Loaded after the detach: left as it is.
    assert_eq!(target.cmd("unload"), "ok");
    assert_eq!(target.cmd(&load), "ok");
    assert_eq!(
        code(target.pid, "/libplug.so"),
        code(fresh.pid, "/libplug.so"),
        "loaded after the detach"
    );
    assert_eq!(target.quit().1, 0);
}
