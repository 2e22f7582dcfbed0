//! `fntrace recordmcount`: objects compiled with `-pg -mfentry` but no
//! table get one; linked with and without `-ffunction-sections
//! -Wl,--gc-sections`, the table lists exactly the sites that gcc's own
//! `-mrecord-mcount` lists for the same code, and exactly the calls to
//! `__fentry__` that objdump finds in the linked program. The programs run.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::objects::{objects, recordmcount};
use common::truth::{objdump, relocations, table};
use common::{build_program, cc, fntrace_output, run, Work, CXX_PROGRAM, C_PROGRAM};

/// Compiles `sources` to objects and runs recordmcount on them; every new
/// table entry must be relocated against a function symbol.
fn recorded(work: &Work, dir: &str, compiler: &str, sources: &[&str], flags: &[&str]) -> Vec<PathBuf> {
    let objs = objects(work, dir, compiler, sources, flags);
    recordmcount(&objs);
    check_relocations(&objs);
    objs
}

fn link(linker: &str, objects: &[PathBuf], out: &Path, gc: bool) {
    link_with(linker, objects, out, gc, &[]);
}

fn link_with(linker: &str, objects: &[PathBuf], out: &Path, gc: bool, extra: &[&str]) {
    let mut args: Vec<String> = objects.iter().map(|o| o.display().to_string()).collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend(["-pg".into(), "-o".into(), out.display().to_string()]);
    if gc {
        args.push("-Wl,--gc-sections".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cc(linker, &args);
}

/// The table of a linked program as (function, offset) pairs, with the
/// functions named by objdump's labels; sorted, duplicates kept.
fn table_by_function(bin: &Path) -> Vec<(String, u64)> {
    let d = objdump(bin);
    let mut entries: Vec<(String, u64)> = table(bin, "__mcount_loc")
        .into_iter()
        .map(|a| {
            let (start, name) = d.function_at(a).expect("a label");
            (name.to_string(), a - start)
        })
        .collect();
    entries.sort();
    entries
}

/// The table equals the calls to `hooks` objdump finds, and the program
/// prints what the uninstrumented build prints.
fn check_program(bin: &Path, hooks: &[&str], expected_stdout: &str) {
    let mut recorded = table(bin, "__mcount_loc");
    recorded.sort();
    let calls: Vec<u64> = objdump(bin).hook_calls(hooks).into_iter().collect();
    assert!(!calls.is_empty());
    assert_eq!(recorded, calls, "__mcount_loc of {} vs objdump", bin.display());
    let dir = bin.parent().unwrap();
    let out = run(Command::new(bin).current_dir(dir));
    assert_eq!(out, expected_stdout, "output of {}", bin.display());
}

/// The stdout of the program built from `sources` without instrumentation.
fn reference_output(work: &Work, compiler: &str, sources: &[&str], opt: &str) -> String {
    let out = build_program(work, "reference", compiler, sources, &[opt]);
    run(&mut Command::new(&out))
}

/// Every relocation of the new tables is against a function symbol, not a
/// section: the critique of seed 002.
fn check_relocations(objects: &[PathBuf]) {
    for obj in objects {
        let relocs: Vec<_> = relocations(obj)
            .into_iter()
            .filter(|r| r.section == "__mcount_loc")
            .collect();
        assert!(!relocs.is_empty(), "{} has no table", obj.display());
        for r in relocs {
            assert_eq!(r.r_type, "R_X86_64_64");
            assert!(
                !r.symbol.starts_with('.'),
                "{}: entry against section {}",
                obj.display(),
                r.symbol
            );
        }
    }
}

#[test]
fn gcc_tables_match_gcc_own_and_objdump() {
    let work = Work::new("recordmcount-gcc");
    let expected = reference_output(&work, "gcc", C_PROGRAM, "-O2");
    for sections in [false, true] {
        let mut flags = vec!["-O2", "-pg", "-mfentry"];
        if sections {
            flags.push("-ffunction-sections");
        }
        let ours = recorded(&work, &format!("ours{sections}"), "gcc", C_PROGRAM, &flags);
        flags.push("-mrecord-mcount");
        let gccs = objects(&work, &format!("gcc{sections}"), "gcc", C_PROGRAM, &flags);

        for gc in [false, true] {
            let ours_bin = work.path(&format!("ours-{sections}-{gc}"));
            link("gcc", &ours, &ours_bin, gc);
            check_program(&ours_bin, &["__fentry__"], &expected);
            let gcc_bin = work.path(&format!("gcc-{sections}-{gc}"));
            link("gcc", &gccs, &gcc_bin, gc);
            if !gc {
                assert_eq!(table_by_function(&ours_bin), table_by_function(&gcc_bin));
            }
            // Under --gc-sections gcc's own table is discarded whole; ours
            // keeps exactly the functions that stay (checked above).
        }
    }
    // The two static helpers of the same name are both recorded.
    let bin = work.path("ours-true-true");
    let helpers = table_by_function(&bin)
        .into_iter()
        .filter(|(f, _)| f == "helper")
        .count();
    assert_eq!(helpers, 2);
}

#[test]
fn gcc_mcount_objects() {
    let work = Work::new("recordmcount-gcc-mcount");
    let expected = reference_output(&work, "gcc", C_PROGRAM, "-O2");
    let objs = recorded(
        &work,
        "o",
        "gcc",
        C_PROGRAM,
        &["-O2", "-pg", "-ffunction-sections"],
    );
    let bin = work.path("prog");
    link("gcc", &objs, &bin, true);
    check_program(&bin, &["mcount", "_mcount"], &expected);
}

#[test]
fn clang_tables_match_objdump() {
    let work = Work::new("recordmcount-clang");
    let expected = reference_output(&work, "gcc", C_PROGRAM, "-O2");
    for compiler in ["clang-14", "clang-16"] {
        for sections in [false, true] {
            let mut flags = vec!["-O2", "-pg", "-mfentry"];
            if sections {
                flags.push("-ffunction-sections");
            }
            let objs = recorded(
                &work,
                &format!("{compiler}-{sections}"),
                compiler,
                C_PROGRAM,
                &flags,
            );
            for gc in [false, true] {
                let bin = work.path(&format!("{compiler}-{sections}-{gc}"));
                link(compiler, &objs, &bin, gc);
                check_program(&bin, &["__fentry__"], &expected);
            }
        }
    }
}

#[test]
fn lld_links_the_tables_into_a_pie() {
    // gcc's own read-only __mcount_loc cannot be linked into a PIE by lld
    // ("relocation R_X86_64_64 cannot be used against local symbol"); the
    // writable tables recordmcount makes can, with or without --gc-sections.
    let work = Work::new("recordmcount-lld");
    let expected = reference_output(&work, "gcc", C_PROGRAM, "-O2");
    let objs = recorded(
        &work,
        "o",
        "gcc",
        C_PROGRAM,
        &["-O2", "-pg", "-mfentry", "-ffunction-sections"],
    );
    for gc in [false, true] {
        let bin = work.path(&format!("prog-{gc}"));
        link_with("gcc", &objs, &bin, gc, &["-fuse-ld=lld", "-pie"]);
        check_program(&bin, &["__fentry__"], &expected);
    }
}

#[test]
fn cxx_comdat_groups() {
    // Inline functions and templates are COMDAT: one copy survives, and its
    // table piece with it. g++'s own -mrecord-mcount fails to link this.
    let work = Work::new("recordmcount-cxx");
    let sources = CXX_PROGRAM;
    let expected = reference_output(&work, "g++", sources, "-O0");
    for compiler in ["g++", "clang++-16"] {
        let flags = ["-O0", "-pg", "-mfentry", "-ffunction-sections"];
        let objs = recorded(&work, compiler, compiler, sources, &flags);
        for gc in [false, true] {
            let bin = work.path(&format!("{compiler}-{gc}"));
            link(compiler, &objs, &bin, gc);
            check_program(&bin, &["__fentry__"], &expected);
            let by_function = table_by_function(&bin);
            let scaled: Vec<_> = by_function
                .iter()
                .filter(|(f, _)| f == "_ZN6shapes6scaledEi")
                .collect();
            assert_eq!(
                scaled.len(),
                1,
                "one copy of the inline function: {by_function:?}"
            );
        }
    }
}

#[test]
fn second_run_and_objects_without_sites_leave_files_alone() {
    let work = Work::new("recordmcount-idempotent");
    let objs = recorded(&work, "o", "gcc", &["c/util.c"], &["-O2", "-pg", "-mfentry"]);
    let once = std::fs::read(&objs[0]).unwrap();
    let out = fntrace_output(&["recordmcount", "-v", objs[0].to_str().unwrap()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("has a __mcount_loc table already"));
    assert_eq!(std::fs::read(&objs[0]).unwrap(), once);

    let plain = objects(&work, "plain", "gcc", &["c/util.c"], &["-O2"]);
    let before = std::fs::read(&plain[0]).unwrap();
    let out = fntrace_output(&["recordmcount", "-v", plain[0].to_str().unwrap()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to record"));
    assert_eq!(std::fs::read(&plain[0]).unwrap(), before);

    // gcc's own table is left as it is.
    let gccs = objects(
        &work,
        "gcc",
        "gcc",
        &["c/util.c"],
        &["-O2", "-pg", "-mfentry", "-mrecord-mcount"],
    );
    let before = std::fs::read(&gccs[0]).unwrap();
    assert!(fntrace_output(&["recordmcount", gccs[0].to_str().unwrap()])
        .status
        .success());
    assert_eq!(std::fs::read(&gccs[0]).unwrap(), before);
}

#[test]
fn bad_inputs_are_refused_and_left_untouched() {
    let work = Work::new("recordmcount-bad");
    let objs = objects(
        &work,
        "o",
        "gcc",
        &["c/util.c", "c/main.c"],
        &["-O2", "-pg", "-mfentry"],
    );
    let exe = work.path("exe");
    link("gcc", &objs, &exe, false);
    let truncated = work.path("truncated.o");
    let data = std::fs::read(&objs[0]).unwrap();
    std::fs::write(&truncated, &data[..data.len() / 2]).unwrap();

    let mut originals = BTreeMap::new();
    for path in [&exe, &truncated] {
        originals.insert(path.clone(), std::fs::read(path).unwrap());
    }
    let missing = work.path("missing.o");
    let args = [
        "recordmcount",
        exe.to_str().unwrap(),
        truncated.to_str().unwrap(),
        missing.to_str().unwrap(),
        objs[1].to_str().unwrap(),
    ];
    let out = fntrace_output(&args);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "one line per bad file: {stderr}");
    assert!(lines[0].contains("not a relocatable object"), "{stderr}");
    assert!(lines[1].contains("malformed ELF file"), "{stderr}");
    assert!(lines[2].contains("cannot read"), "{stderr}");
    for (path, before) in originals {
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{} changed",
            path.display()
        );
    }
    // The good object given with them was still rewritten.
    assert!(relocations(&objs[1]).iter().any(|r| r.section == "__mcount_loc"));
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(work.path("o"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}
