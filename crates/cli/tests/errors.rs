//! Bad input gets a clear one-line error and a non-zero exit: never a
//! panic, never a hang. Inputs are real files, damaged on purpose.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_fails, build_program, fntrace_output, program, run, Work, C_PROGRAM};

fn list(path: &Path) -> std::process::Output {
    fntrace_output(&["list", path.to_str().unwrap()])
}

/// A small instrumented program and object.
fn build(work: &Work) -> (PathBuf, PathBuf) {
    let exe = build_program(
        work,
        "prog",
        "gcc",
        C_PROGRAM,
        &["-O2", "-pg", "-mfentry", "-mrecord-mcount"],
    );
    let obj = build_program(
        work,
        "util.o",
        "gcc",
        &["c/util.c"],
        &["-O2", "-pg", "-mfentry", "-c"],
    );
    (exe, obj)
}

/// A value from `readelf -h`, e.g. "Start of section headers".
fn header_field(path: &Path, field: &str) -> u64 {
    let out = run(Command::new("readelf").arg("-h").arg(path));
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(field))
        .expect(field);
    let value = line.split(':').nth(1).unwrap().split_whitespace().next().unwrap();
    value.parse().unwrap()
}

/// The index of section `name`, from `readelf -SW`.
fn section_index(path: &Path, name: &str) -> u64 {
    let out = run(Command::new("readelf").arg("-SW").arg(path));
    let line = out
        .lines()
        .find(|l| l.contains(&format!(" {name} ")))
        .expect(name);
    let open = line.find('[').unwrap();
    line[open + 1..line.find(']').unwrap()].trim().parse().unwrap()
}

#[test]
fn missing_directory_and_non_elf_inputs() {
    let work = Work::new("errors-inputs");
    assert_fails(&list(&work.path("does-not-exist")), 1, "cannot read");
    assert_fails(&list(&work.dir), 1, "is a directory");
    let empty = work.path("empty");
    std::fs::write(&empty, b"").unwrap();
    assert_fails(&list(&empty), 1, "not an ELF file");
    assert_fails(&list(Path::new(&program("c/main.c"))), 1, "not an ELF file");
    // Deterministic garbage, with and without the ELF magic in front.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut garbage = Vec::new();
    for _ in 0..4096 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        garbage.push(state as u8);
    }
    let path = work.path("garbage");
    std::fs::write(&path, &garbage).unwrap();
    assert_fails(&list(&path), 1, "not an ELF file");
    garbage[..4].copy_from_slice(b"\x7fELF");
    std::fs::write(&path, &garbage).unwrap();
    assert_fails(&list(&path), 1, "ELF");
}

#[test]
fn truncated_files() {
    let work = Work::new("errors-truncated");
    let (exe, obj) = build(&work);
    for file in [exe, obj] {
        let data = std::fs::read(&file).unwrap();
        let n = data.len();
        for len in [1, 4, 16, 52, 63, 64, 65, 200, n / 4, n / 2, n - 64, n - 1] {
            let cut = work.path("cut");
            std::fs::write(&cut, &data[..len]).unwrap();
            let out = list(&cut);
            let what = if len < 4 { "not an ELF file" } else { "ELF" };
            assert_fails(&out, 1, what);
        }
    }
}

#[test]
fn wrong_architecture() {
    let work = Work::new("errors-arch");
    let (_, obj) = build(&work);
    // The same object with e_machine set to RISC-V (243).
    let mut data = std::fs::read(&obj).unwrap();
    data[18..20].copy_from_slice(&243u16.to_le_bytes());
    let arm = work.path("arm.o");
    std::fs::write(&arm, &data).unwrap();
    assert_fails(&list(&arm), 1, "unsupported architecture RISC-V");

    // A real 32-bit i386 object from the assembler.
    let src = work.path("x.s");
    std::fs::write(&src, "f: call mcount\n ret\n").unwrap();
    let i386 = work.path("i386.o");
    run(Command::new("as").arg("--32").arg(&src).arg("-o").arg(&i386));
    assert_fails(&list(&i386), 1, "unsupported architecture i386");
}

#[test]
fn section_offsets_out_of_range() {
    let work = Work::new("errors-offsets");
    let (exe, obj) = build(&work);
    for file in [exe, obj] {
        let shoff = header_field(&file, "Start of section headers");
        let shentsize = header_field(&file, "Size of section headers");
        let text = section_index(&file, ".text");
        let mut data = std::fs::read(&file).unwrap();
        // Elf64_Shdr.sh_offset is at byte 24 of the header.
        let at = (shoff + text * shentsize + 24) as usize;
        data[at..at + 8].copy_from_slice(&0x7fff_ffff_0000u64.to_le_bytes());
        let bad = work.path("bad");
        std::fs::write(&bad, &data).unwrap();
        assert_fails(&list(&bad), 1, "malformed ELF file");

        // The section header table itself beyond the end of the file.
        let mut data = std::fs::read(&file).unwrap();
        let beyond = data.len() as u64 + 4096;
        data[0x28..0x30].copy_from_slice(&beyond.to_le_bytes());
        std::fs::write(&bad, &data).unwrap();
        assert_fails(&list(&bad), 1, "malformed ELF file");
    }
}

/// A plain build lists bare sites (`list_bare.rs`); stripped, and without
/// unwind tables, no function is left to find.
#[test]
fn binary_without_sites() {
    let work = Work::new("errors-nosites");
    let exe = build_program(&work, "plain", "gcc", C_PROGRAM, &["-O2"]);
    // A plain build has its functions as bare sites; one without symbols
    // or unwind data has nothing at all.
    common::strip_functions(&exe);
    let out = list(&exe);
    assert_fails(&out, 1, "no patchable sites");
    assert_fails(&out, 1, "no symbol or .eh_frame entry names a function");
    assert_fails(&out, 1, "-fpatchable-function-entry");
}

#[test]
fn usage_errors() {
    assert_fails(
        &fntrace_output(&["list", "--no-such-option", "x"]),
        2,
        "--no-such-option",
    );
    assert_fails(&fntrace_output(&["list"]), 2, "<BINARY>");
    assert_fails(&fntrace_output(&["no-such-command"]), 2, "no-such-command");
    assert_fails(&fntrace_output(&["recordmcount"]), 2, "<OBJECTS>");
    assert_fails(
        &fntrace_output(&["list", "x", "[oops"]),
        1,
        "bad filter pattern '[oops'",
    );
    let help = fntrace_output(&["list", "--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("-mrecord-mcount"));
}
