//! Live patching under load: threads call traced functions while ops are
//! registered, unregistered and re-filtered thousands of times; redirects
//! switched on and off while threads call the function.

mod common;

use std::time::Duration;

use common::{field, run, Work};

/// The tests of this file each keep both cores busy: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn stress(work: &Work, program: &std::path::Path, mode: &str, cycles: &str, env: &[(&str, &str)]) -> String {
    let out = run(&work.0, program, &[mode, cycles], env, Duration::from_secs(240));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "stress {mode} failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("mode="))
        .expect("summary line")
        .to_string();
    assert_eq!(field(&line, "violations"), 0, "{line}");
    assert_eq!(field(&line, "bad_results"), 0, "{line}");
    assert_eq!(field(&line, "bad_args"), 0, "{line}");
    assert_eq!(field(&line, "refused"), 0, "{line}");
    // Calls were checked in both states, not just made.
    assert!(
        field(&line, "checked_on") > 0 && field(&line, "checked_off") > 0,
        "{line}"
    );
    // Three syncs per batch, whatever the number of sites.
    assert_eq!(field(&line, "syncs"), 3 * field(&line, "batches"), "{line}");
    eprintln!("{line}");
    line
}

fn build_stress(work: &Work, compiler: &str, instrumentation: &[&str]) -> std::path::PathBuf {
    let mut args = vec!["-O2", "-pthread"];
    args.extend_from_slice(instrumentation);
    args.push("stress.c");
    let link = Work::link_runtime();
    args.extend(link.iter().map(String::as_str));
    work.build(compiler, &args, "stress")
}

#[test]
fn every_enabled_call_reaches_the_callback_while_ops_come_and_go() {
    let _serial = serial();
    let work = Work::new("stress-ops");
    let program = build_stress(&work, "gcc", &["-fpatchable-function-entry=5"]);
    for mode in ["ops", "list", "filter", "regs"] {
        stress(&work, &program, mode, "1000", &[]);
    }
}

#[test]
fn live_patching_of_fentry_and_mcount_calls() {
    let _serial = serial();
    let work = Work::new("stress-pg");
    let program = build_stress(&work, "gcc", &["-pg", "-mfentry", "-mrecord-mcount"]);
    stress(&work, &program, "ops", "1000", &[]);
    let work = Work::new("stress-mcount");
    let program = build_stress(&work, "gcc", &["-pg"]);
    stress(&work, &program, "regs", "1000", &[]);
}

#[test]
fn fallback_syncs_are_safe_too() {
    let _serial = serial();
    let work = Work::new("stress-sync");
    let program = build_stress(&work, "gcc", &["-fpatchable-function-entry=5"]);
    for sync in ["membarrier", "mprotect"] {
        let out = run(
            &work.0,
            &program,
            &["ops", "500"],
            &[("FNTRACE_SYNC", sync)],
            Duration::from_secs(240),
        );
        assert!(
            out.status.success(),
            "{sync}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.matches("live patching syncs with").count(),
            1,
            "said once: {stderr}"
        );
        assert!(stderr.contains(sync), "{stderr}");
    }
}

#[test]
fn redirect_through_regs_and_back_while_threads_call() {
    let _serial = serial();
    let work = Work::new("redirect");
    let link = Work::link_runtime();
    let mut args = vec!["-O2", "-pthread", "-fpatchable-function-entry=5", "redirect.c"];
    args.extend(link.iter().map(String::as_str));
    let program = work.build("gcc", &args, "redirect");
    let out = run(&work.0, &program, &["1000"], &[], Duration::from_secs(240));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().next().unwrap();
    assert_eq!(field(line, "violations"), 0, "{line}");
    assert!(
        field(line, "checked_v1") > 0 && field(line, "checked_v2") > 0,
        "{line}"
    );
    assert!(line.contains("IPMODIFY is exclusive"), "{line}");
    // Unregistered at the end: the original function answers.
    assert!(stdout.contains("after: 59"), "{stdout}");
}

/// The same on a plain build (#19): `work` and `other` are bare sites
/// whose first instructions move to a detour, switched on and off by the
/// int3 protocol on every instruction start of the jump while the workers
/// call them; 5,000 cycles of each mode toggle each site 10,000 times.
#[test]
fn live_patching_of_functions_no_compiler_prepared() {
    let _serial = serial();
    let work = Work::new("stress-plain");
    let program = build_stress(&work, "gcc", &[]);
    for mode in ["ops", "filter", "regs"] {
        stress(&work, &program, mode, "5000", &[]);
    }
}
