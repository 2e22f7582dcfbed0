//! One workload of a real program (`real.rs`), run untraced, under
//! callgrind, under `fntrace record` and as a `-finstrument-functions`
//! build, and the comparison of their counts, function by function
//! (`plain_real.rs` says what is checked).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::{Command, Output};

use fntrace_testkit::enters;

use super::procs::text;
use super::real::{run_program, traced, under_callgrind, with_hooks, Built, Style};
use super::Work;

/// The C run-time's code (`crti.o`, `crtbeginS.o`) that a program calls,
/// which no compiler built for tracing (nor with hooks).
pub const CRT: &[&str] = &[
    "_start",
    "_init",
    "_fini",
    "deregister_tm_clones",
    "register_tm_clones",
    "__do_global_dtors_aux",
    "frame_dummy",
];

/// A run of a program.
pub struct Workload {
    pub name: &'static str,
    /// Its arguments; `@FILE` is the file FILE of the work directory.
    pub args: &'static [&'static str],
    /// The untraced run's stdout is kept as this file (for a later
    /// workload's input).
    pub save: Option<&'static str>,
    /// The untraced run's stdout must be this file's contents.
    pub expect: Option<&'static str>,
    /// `fntrace record --tracer`.
    pub tracer: &'static str,
    /// Whether the `-finstrument-functions` build is run too.
    pub hooks: bool,
    /// The functions whose calls depend on the schedule in this workload,
    /// each with the reason.
    pub scheduled: &'static [(&'static str, &'static str)],
}

/// How a function is compared, when not exactly.
#[derive(Debug, Clone, Copy)]
pub enum Check {
    /// Its calls depend on the schedule (the reason): it must be called
    /// in both.
    Scheduled(&'static str),
    /// Its calls cannot be traced in this build (the reason): neither
    /// compared nor counted in the coverage.
    Excluded(&'static str),
}

/// Asserts that `got` ended as `want` did, with the same stdout.
fn same_output(what: &str, want: &Output, got: &Output) {
    assert_eq!(
        got.status.code(),
        want.status.code(),
        "{what}: exit status; stderr: {}",
        text(&got.stderr)
    );
    if got.stdout != want.stdout {
        let at = got.stdout.iter().zip(&want.stdout).position(|(a, b)| a != b);
        panic!(
            "{what}: stdout differs from the untraced run's ({} bytes against {}, first difference at {at:?}); stderr: {}",
            got.stdout.len(),
            want.stdout.len(),
            text(&got.stderr)
        );
    }
}

/// Runs workload `w` of `built` in `style` and compares; fails the test
/// on a difference, after printing (stderr) what it measured.
pub fn workload(work: &Work, built: &Built, style: Style, w: &Workload, checks: &BTreeMap<&str, Check>) {
    let exe = built.exe(style);
    let what = format!("{} {} ({})", built.program, w.name, style.name());
    let args: Vec<String> = w
        .args
        .iter()
        .map(|a| match a.strip_prefix('@') {
            Some(file) => work.path(file).display().to_string(),
            None => a.to_string(),
        })
        .collect();

    let native = run_program(Command::new(&exe).args(&args));
    assert!(native.status.success(), "{what}: {}", text(&native.stderr));
    if let Some(file) = w.expect {
        assert!(
            native.stdout == std::fs::read(work.path(file)).unwrap(),
            "{what}: stdout is not {file}"
        );
    }
    if let Some(file) = w.save {
        std::fs::write(work.path(file), &native.stdout).unwrap();
    }
    let (output, profile) = under_callgrind(work, &format!("{}.callgrind", w.name), &exe, &args);
    same_output(&format!("{what} under callgrind"), &native, &output);
    let trace = traced(work, &format!("{}.data", w.name), w.tracer, &exe, &args);
    same_output(&format!("{what} under fntrace record"), &native, &trace.output);

    let functions = enters::functions(&exe);
    let check_of = |address: u64| -> Option<Check> {
        let names = functions.get(&address)?;
        if names.iter().any(|n| n.contains(".cold")) {
            return Some(Check::Excluded(
                "a part gcc split off a function, entered by a jump (a call to callgrind: the jump goes to a symbol)",
            ));
        }
        names.iter().find_map(|n| checks.get(n.as_str()).copied())
    };
    let name_of = |address: u64| match functions.get(&address) {
        Some(names) => names[0].clone(),
        None => {
            let inside = functions.range(..address).next_back();
            format!("{address:#x} (inside {inside:?})")
        }
    };

    let mut differences = Vec::new();
    let mut notes = String::new();
    let (mut exact, mut scheduled, mut excluded, mut seen, mut traced_too) = (0, 0, 0, 0, 0);
    for (&address, called) in &profile.by_address {
        let ours = trace.calls.get(&address).copied().unwrap_or(0);
        let name = name_of(address);
        if !functions.contains_key(&address) {
            differences.push(format!("callgrind counted {} calls to {name}", called.calls));
            continue;
        }
        match check_of(address) {
            Some(Check::Excluded(why)) => {
                excluded += 1;
                let _ = write!(
                    notes,
                    "\n  excluded {name} (callgrind {}, fntrace {ours}): {why}",
                    called.calls
                );
                continue;
            }
            Some(Check::Scheduled(_)) => {
                scheduled += 1;
                let _ = write!(
                    notes,
                    "\n  scheduled {name}: callgrind {}, fntrace {ours}",
                    called.calls
                );
                if ours == 0 {
                    differences.push(format!("{name}: callgrind {}, fntrace none", called.calls));
                }
            }
            None if ours == called.calls => exact += 1,
            None => differences.push(format!("{name}: callgrind {}, fntrace {ours}", called.calls)),
        }
        seen += 1;
        if ours > 0 {
            traced_too += 1;
        }
    }
    for (&address, &n) in &trace.calls {
        if n > 0 && profile.calls_at(address) == 0 && !matches!(check_of(address), Some(Check::Excluded(_))) {
            differences.push(format!("{}: callgrind none, fntrace {n}", name_of(address)));
        }
    }
    let coverage = 100.0 * traced_too as f64 / seen.max(1) as f64;
    let hooks = if w.hooks {
        hooks_against(
            work,
            built,
            w.name,
            &args,
            &native,
            &profile,
            &functions,
            checks,
            &mut differences,
        )
    } else {
        "not run".to_string()
    };
    eprintln!(
        "{what}: {} functions in the executable; callgrind saw {} called ({} calls); \
         fntrace: {exact} exact, {scheduled} scheduled, {excluded} excluded; coverage {traced_too}/{seen} = {coverage:.1} %; \
         {} rows of other objects; hooks: {hooks}{notes}",
        functions.len(),
        profile.by_address.len(),
        profile.by_address.values().map(|c| c.calls).sum::<u64>(),
        trace.foreign.len(),
    );
    assert!(
        differences.is_empty(),
        "{what}: differences:\n{}",
        differences.join("\n")
    );
    assert!(coverage >= 99.0, "{what}: coverage {coverage:.1} % < 99 %");
}

/// Runs the `-finstrument-functions` build: same output, and for every
/// function callgrind saw called that both builds have by name (but the C
/// run-time's, which has no hooks), at least as many entries as
/// callgrind's calls (the hooks count inlined calls too), both non-zero
/// for a scheduled one. Returns a summary.
#[allow(clippy::too_many_arguments)]
fn hooks_against(
    work: &Work,
    built: &Built,
    workload: &str,
    args: &[String],
    native: &Output,
    profile: &fntrace_testkit::callgrind::Profile,
    functions: &BTreeMap<u64, Vec<String>>,
    checks: &BTreeMap<&str, Check>,
    differences: &mut Vec<String>,
) -> String {
    let instrumented = built.instrumented();
    let (output, hooks) = with_hooks(work, &format!("{workload}.enters"), &instrumented, args);
    let what = format!("{} {workload}, built with -finstrument-functions", built.program);
    same_output(&what, native, &output);
    let theirs: std::collections::BTreeSet<String> =
        enters::functions(&instrumented).into_values().flatten().collect();
    let (mut equal, mut more, mut absent) = (0, Vec::new(), Vec::new());
    for (&address, called) in &profile.by_address {
        let Some(names) = functions.get(&address) else {
            continue;
        };
        let name = &names[0];
        if names.iter().any(|n| CRT.contains(&n.as_str())) {
            continue;
        }
        match names.iter().find_map(|n| checks.get(n.as_str())) {
            Some(Check::Excluded(_)) => continue,
            Some(Check::Scheduled(_)) if theirs.contains(name) => {
                if hooks.get(name).copied().unwrap_or(0) == 0 {
                    differences.push(format!("{name}: callgrind {}, hooks none", called.calls));
                }
                continue;
            }
            _ => {}
        }
        if !theirs.contains(name) {
            absent.push(name.clone());
            continue;
        }
        let entered = hooks.get(name).copied().unwrap_or(0);
        if entered == called.calls {
            equal += 1;
        } else if entered > called.calls {
            more.push(format!("{name} {entered}/{}", called.calls));
        } else {
            differences.push(format!(
                "{name}: callgrind {}, hooks only {entered}",
                called.calls
            ));
        }
    }
    format!(
        "{equal} equal to callgrind, {} more (inlined calls; hooks/callgrind) {more:?}, {} not in that build {absent:?}",
        more.len(),
        absent.len()
    )
}
