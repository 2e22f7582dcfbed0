//! Modules: a library mapped terabytes away from the executable (its sites
//! need trampolines of their own), and one loaded with `dlopen`, closed and
//! loaded again, under the filters in force.

mod common;

use std::time::Duration;

use common::{run, Work};
use fntrace_testkit::cross;

/// How one machine builds `far.c`'s program: its compiler, the site form
/// of the linked library (which, at `-O2`, holds `-pg` sites) and of the
/// program and plugin, where the runtime is, and any link flags that put
/// the libraries far (qemu-user maps them near the program: a preferred
/// address in the ELF is honoured).
struct Far<'a> {
    name: &'a str,
    cc: &'a str,
    lib_sites: &'a [&'a str],
    sites: &'a str,
    pie: bool,
    runtime: Vec<String>,
    /// Link flags of the library and of the plugin.
    lib_at: [&'a [&'a str]; 2],
}

fn far(m: Far) {
    let work = Work::new(m.name);
    let mut args = vec!["-O2", "-shared", "-fPIC", "libfar.c"];
    args.extend(m.lib_sites.iter().chain(m.lib_at[0]));
    work.build(m.cc, &args, "libfar.so");
    let mut args = vec!["-O2", "-shared", "-fPIC", m.sites, "libplug.c"];
    args.extend(m.lib_at[1]);
    work.build(m.cc, &args, "libplug.so");
    let dir = work.0.display().to_string();
    let (l, rpath) = (format!("-L{dir}"), format!("-Wl,-rpath,{dir}"));
    let mut args = vec!["-O2", m.sites, "far.c", &l, "-lfar", &rpath];
    if !m.pie {
        args.push("-no-pie");
    }
    args.extend(m.runtime.iter().map(String::as_str));
    let program = work.build(m.cc, &args, "far");
    let plugin = work.path("libplug.so").display().to_string();
    let out = run(&work.0, &program, &[&plugin], &[], Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The library, and the plugin each time it is loaded.
    let gib: Vec<u64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("distance ").or(l.strip_prefix("plugin distance ")))
        .filter_map(|l| l.strip_suffix(" GiB")?.parse().ok())
        .collect();
    assert!(
        gib.len() == 3 && gib.iter().all(|&g| g > 4),
        "not all more than 4 GiB away ({gib:?}):\n{stdout}"
    );
    // main_leaf ×10; lib_twice ×10, each calling lib_leaf twice; the plugin
    // run twice (4 then 6 iterations), unloaded in between.
    for expected in [
        "main_leaf 10",
        "lib_leaf 20",
        "lib_twice 10",
        "plug_leaf 10",
        "plug_run 2",
    ] {
        assert!(
            stdout.lines().any(|l| l == expected),
            "want '{expected}' in:\n{stdout}"
        );
    }
    assert!(stdout.contains("sum 142"), "{stdout}");
}

fn x86_64(pie: bool) -> Far<'static> {
    Far {
        name: if pie { "far-pie" } else { "far-nopie" },
        cc: "gcc",
        lib_sites: &["-pg", "-mfentry", "-mrecord-mcount"],
        sites: "-fpatchable-function-entry=5",
        pie,
        runtime: Work::link_runtime(),
        lib_at: [&[], &[]],
    }
}

#[test]
fn library_more_than_4_gib_away_from_a_pie() {
    far(x86_64(true));
}

#[test]
fn library_more_than_4_gib_away_from_a_fixed_executable() {
    far(x86_64(false));
}

/// On AArch64 (#22) a `bl` reaches 128 MiB: the linked `-pg` library
/// (`bl _mcount`) and the dlopened `mov x9, x30; bl` plugin, tens of GiB
/// from the program, are switched through slots near each, under qemu.
#[test]
fn aarch64_libraries_beyond_a_bl() {
    let m = &cross::AARCH64;
    let runtime = match cross::runtime_for(m).map(|r| (r, cross::no_binfmt(m))) {
        Ok((runtime, None)) => runtime,
        Ok((_, Some(why))) | Err(why) => return common::skip("aarch64_libraries_beyond_a_bl", &why),
    };
    let dir = runtime.parent().unwrap().display().to_string();
    far(Far {
        name: "far-aarch64",
        cc: m.linker,
        lib_sites: &["-pg"],
        sites: "-fpatchable-function-entry=2",
        pie: true,
        runtime: vec![
            format!("-L{dir}"),
            "-lfntrace_runtime".into(),
            format!("-Wl,-rpath,{dir}"),
        ],
        lib_at: [
            &["-Wl,-Ttext-segment=0x6000000000"],
            &["-Wl,-Ttext-segment=0x7000000000"],
        ],
    });
}
