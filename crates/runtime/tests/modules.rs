//! Modules: a library mapped terabytes away from the executable (its sites
//! need trampolines of their own), and one loaded with `dlopen`, closed and
//! loaded again, under the filters in force.

mod common;

use std::time::Duration;

use common::{run, Work};

fn far(pie: bool) {
    let work = Work::new(if pie { "far-pie" } else { "far-nopie" });
    work.build(
        "gcc",
        &[
            "-O2",
            "-shared",
            "-fPIC",
            "-pg",
            "-mfentry",
            "-mrecord-mcount",
            "libfar.c",
        ],
        "libfar.so",
    );
    work.build(
        "gcc",
        &[
            "-O2",
            "-shared",
            "-fPIC",
            "-fpatchable-function-entry=5",
            "libplug.c",
        ],
        "libplug.so",
    );
    let dir = work.0.display().to_string();
    let (l, rpath) = (format!("-L{dir}"), format!("-Wl,-rpath,{dir}"));
    let mut args = vec![
        "-O2",
        "-fpatchable-function-entry=5",
        "far.c",
        &l,
        "-lfar",
        &rpath,
    ];
    if !pie {
        args.push("-no-pie");
    }
    let link = Work::link_runtime();
    args.extend(link.iter().map(String::as_str));
    let program = work.build("gcc", &args, "far");
    let plugin = work.path("libplug.so").display().to_string();
    let out = run(&work.0, &program, &[&plugin], &[], Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gib: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("distance "))
        .and_then(|l| l.strip_suffix(" GiB"))
        .and_then(|n| n.parse().ok())
        .expect("distance line");
    assert!(gib > 4, "the library is only {gib} GiB away:\n{stdout}");
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

#[test]
fn library_more_than_4_gib_away_from_a_pie() {
    far(true);
}

#[test]
fn library_more_than_4_gib_away_from_a_fixed_executable() {
    far(false);
}
