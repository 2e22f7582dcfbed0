//! A function no compiler prepared may be called by code that relies on
//! it to leave registers alone (gcc's `-fipa-ra`: a caller keeps values in
//! the caller-saved registers its callee does not use). Traced as a bare
//! site — its entry through the detour, its return hijacked — it must still
//! leave every register as it was: `programs/keep.c` checks all sixteen
//! general registers but rsp and both halves of every vector register
//! around 2,000 calls, under each tracer and the counting client with and
//! without the register frame.

mod common;

use std::time::Duration;

use common::{run, runtime, Work};

#[test]
fn a_traced_bare_function_keeps_every_register() {
    let work = Work::new("bare-regs");
    let preload = runtime().display().to_string();
    for flags in [&["-O2"][..], &["-O2", "-fcf-protection"][..]] {
        let mut args = flags.to_vec();
        args.push("keep.c");
        let program = work.build("gcc", &args, "keep");
        let plain = run(&work.0, &program, &["2000"], &[], Duration::from_secs(20));
        assert_eq!(String::from_utf8_lossy(&plain.stdout), "changed=0 rounds=2000\n");
        let data = work.path("keep.data").display().to_string();
        let mut configs: Vec<Vec<(&str, &str)>> = ["function_graph", "function", "profile"]
            .into_iter()
            .map(|t| vec![("FNTRACE_TRACER", t), ("FNTRACE_DATA", data.as_str())])
            .collect();
        configs.push(vec![("FNTRACE_COUNT", "1"), ("FNTRACE_REGS", "0")]);
        configs.push(vec![("FNTRACE_COUNT", "1"), ("FNTRACE_REGS", "1")]);
        run_all(
            &work,
            &program,
            &data,
            &preload,
            configs,
            "keep keep entries=2000",
        );
    }
}

/// Runs `program 2000` with each of `configs` (and the runtime preloaded,
/// `data` made anew for each): every register kept on every call; the
/// counting client's configurations print `counted`.
fn run_all(
    work: &Work,
    program: &std::path::Path,
    data: &str,
    preload: &str,
    configs: Vec<Vec<(&str, &str)>>,
    counted: &str,
) {
    for config in configs {
        let _ = std::fs::remove_dir_all(data);
        std::fs::create_dir_all(data).unwrap();
        let mut env = config.clone();
        env.push(("LD_PRELOAD", preload));
        let out = run(&work.0, program, &["2000"], &env, Duration::from_secs(60));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{program:?} {config:?}: {stderr}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "changed=0 rounds=2000\n",
            "{program:?} {config:?}: {stderr}"
        );
        if config[0].0 == "FNTRACE_COUNT" {
            assert!(stderr.contains(counted), "{config:?}: {stderr}");
        }
    }
}

/// The same in a library (`keep.c` built as `libkeep.so` and a program
/// using it): `keep` traced as a library call, its detour starting with
/// the guard, called by the program (traced: the guard lets it through)
/// and by the library itself (`lib_check`: the guard skips the tracer),
/// under each tracer; and traced whole by the counting client's
/// `keep:mod:libkeep` filter (every caller through). Every register is kept
/// on every path.
#[test]
fn a_traced_library_call_keeps_every_register() {
    let work = Work::new("bare-regs-lib");
    let preload = runtime().display().to_string();
    let lib = work.path("libkeep.so").display().to_string();
    // Bound at load (`-z now`): the dynamic linker's lazy resolver, on a
    // PLT call's first time, keeps only the argument registers.
    work.build(
        "gcc",
        &["-O2", "-DKEEP_LIB", "-shared", "-fPIC", "-Wl,-z,now", "keep.c"],
        "libkeep.so",
    );
    let dir = format!("-L{}", work.0.display());
    let rpath = format!("-Wl,-rpath,{}", work.0.display());
    let program = work.build(
        "gcc",
        &[
            "-O2",
            "-DKEEP_USER",
            "-Wl,-z,now",
            "keep.c",
            &dir,
            "-lkeep",
            &rpath,
        ],
        "keepuser",
    );
    assert!(std::path::Path::new(&lib).exists());
    let plain = run(&work.0, &program, &["2000"], &[], Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "changed=0 rounds=2000\n");
    let data = work.path("keep.data").display().to_string();
    let mut configs: Vec<Vec<(&str, &str)>> = ["function_graph", "function", "profile"]
        .into_iter()
        .flat_map(|t| {
            ["program", "nested"].map(|mode| {
                vec![
                    ("FNTRACE_TRACER", t),
                    ("FNTRACE_DATA", data.as_str()),
                    ("FNTRACE_LIBCALL", mode),
                ]
            })
        })
        .collect();
    for regs in ["0", "1"] {
        configs.push(vec![
            ("FNTRACE_COUNT", "1"),
            ("FNTRACE_REGS", regs),
            ("FNTRACE_FILTER", "keep:mod:libkeep"),
        ]);
    }
    // The program's 2,000 calls and the library's own 2,000.
    run_all(
        &work,
        &program,
        &data,
        &preload,
        configs,
        "keep libkeep.so entries=4000",
    );
}
