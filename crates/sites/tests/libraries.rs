//! The libraries a program loads, found by `libraries::libraries`, must be
//! those glibc's dynamic loader loads (`ld.so --list`, with the same
//! environment): real programs and libraries built with gcc, found
//! through `DT_RPATH` (and the chain of loaders), `DT_RUNPATH` with
//! `$ORIGIN`, `LD_LIBRARY_PATH` (past a 32-bit library of the same name),
//! `LD_PRELOAD`, and the system's directories. And which may have sites.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use fntrace_sites::libraries::{libraries, Search};
use fntrace_sites::Dynamic;

const LOADER: &str = "/lib64/ld-linux-x86-64.so.2";

fn work(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("libraries")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::create_dir_all(dir.join("lib32")).unwrap();
    dir
}

fn gcc(compiler: &str, dir: &Path, args: &[&str]) {
    let status = Command::new(compiler)
        .current_dir(dir)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("the tests need {compiler} (run .ci/run): {e}"));
    assert!(status.success(), "{compiler} {args:?}");
}

fn source(dir: &Path, name: &str, text: &str) -> String {
    std::fs::write(dir.join(name), text).unwrap();
    name.to_string()
}

fn read(path: &Path) -> Dynamic {
    Dynamic::read(&File::open(path).unwrap()).unwrap()
}

/// What `ld.so --list` says `program` loads, without the vDSO: the
/// libraries in order, and the interpreter (which it lists last).
fn loader_says(program: &Path, env: &[(&str, &str)]) -> Vec<PathBuf> {
    let out = Command::new(LOADER)
        .arg("--list")
        .arg(program)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("LD_PRELOAD")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{LOADER} --list: {text}");
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once(" => ") {
                Some((_, found)) => found,
                None => line,
            };
            let path = path.split(" (0x").next().unwrap();
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// What we say, with the interpreter moved last as `ld.so --list` shows it.
fn we_say(program: &Path, env: &[(&str, &str)]) -> Vec<PathBuf> {
    let var = |k: &str| {
        env.iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| std::ffi::OsStr::new(*v))
    };
    let search = Search::new(var("LD_LIBRARY_PATH"), var("LD_PRELOAD"));
    let dynamic = read(program);
    let mut found: Vec<PathBuf> = libraries(program, &dynamic, &search)
        .into_iter()
        .map(|l| l.path)
        .collect();
    let interpreter = found.remove(0);
    assert_eq!(interpreter, Path::new(LOADER));
    found.push(interpreter);
    found
}

#[test]
fn the_loader_finds_the_same_libraries() {
    let dir = work("same");
    let d = dir.display().to_string();
    source(&dir, "b.c", "int b(int x) { return x + 1; }\n");
    source(&dir, "a.c", "int b(int); int a(int x) { return b(x) * 2; }\n");
    source(&dir, "c.c", "int c(int x) { return x - 1; }\n");
    source(&dir, "p.c", "int p(void) { return 3; }\n");
    source(
        &dir,
        "m.c",
        "int a(int); int c(int); int main(void) { return a(1) + c(2) - 5; }\n",
    );
    // libb in sub/, found through liba's DT_RUNPATH $ORIGIN/sub.
    gcc(
        "gcc",
        &dir,
        &[
            "-shared",
            "-fPIC",
            "-fpatchable-function-entry=5",
            "b.c",
            "-o",
            "sub/libb.so",
        ],
    );
    gcc(
        "gcc",
        &dir,
        &[
            "-shared",
            "-fPIC",
            "a.c",
            "-o",
            "liba.so",
            "-Lsub",
            "-lb",
            "-Wl,-rpath,$ORIGIN/sub",
        ],
    );
    // libc in sub/, found only through LD_LIBRARY_PATH, after a 32-bit
    // libc of the same name in lib32/ that the loader passes over.
    gcc(
        "gcc",
        &dir,
        &["-shared", "-fPIC", "-pg", "-mfentry", "c.c", "-o", "sub/libc1.so"],
    );
    gcc(
        "i686-linux-gnu-gcc",
        &dir,
        &["-shared", "-fPIC", "c.c", "-o", "lib32/libc1.so"],
    );
    gcc("gcc", &dir, &["-shared", "-fPIC", "p.c", "-o", "libp.so"]);
    // The program finds liba through its DT_RPATH.
    let rpath = format!("-Wl,--disable-new-dtags,-rpath,{d}");
    gcc(
        "gcc",
        &dir,
        &["m.c", "-o", "m", "-L.", "-Lsub", "-la", "-lc1", &rpath],
    );
    let program = dir.join("m");

    let library_path = format!("{d}/lib32:{d}/sub");
    let preload = format!("{d}/libp.so");
    let env = [
        ("LD_LIBRARY_PATH", library_path.as_str()),
        ("LD_PRELOAD", preload.as_str()),
    ];
    let ours = we_say(&program, &env);
    assert_eq!(ours, loader_says(&program, &env));
    for name in ["liba.so", "sub/libb.so", "sub/libc1.so", "libp.so"] {
        assert!(ours.contains(&dir.join(name)), "{name} not in {ours:?}");
    }
    // Without LD_LIBRARY_PATH the program cannot start; libc1 is not found.
    let ours = we_say(&program, &[]);
    assert!(!ours.iter().any(|p| p.ends_with("libc1.so")), "{ours:?}");
    assert!(ours.contains(&dir.join("sub/libb.so")), "{ours:?}");

    // Which may have sites: tables, an imported __fentry__; not libc.
    assert!(read(&dir.join("sub/libb.so")).may_have_sites);
    assert!(read(&dir.join("sub/libc1.so")).may_have_sites);
    assert!(!read(&dir.join("liba.so")).may_have_sites);
    let libc = libraries(&program, &read(&program), &Search::new(None, None))
        .into_iter()
        .find(|l| l.path.file_name().is_some_and(|n| n == "libc.so.6"))
        .expect("libc.so.6 found");
    assert!(!libc.dynamic.may_have_sites, "{}", libc.path.display());
    assert_eq!(read(&dir.join("liba.so")).needed[0], "libb.so");
    assert_eq!(read(&dir.join("liba.so")).runpath.as_deref(), Some("$ORIGIN/sub"));
}

#[test]
fn a_program_without_dynamic_section_loads_nothing() {
    let dir = work("static");
    source(&dir, "s.c", "int main(void) { return 0; }\n");
    gcc("gcc", &dir, &["-static", "s.c", "-o", "s"]);
    let program = dir.join("s");
    let dynamic = read(&program);
    assert!(dynamic.needed.is_empty() && dynamic.interpreter.is_none());
    assert!(libraries(&program, &dynamic, &Search::new(None, None)).is_empty());
    // Not an ELF file: an error, not a panic.
    std::fs::write(dir.join("text"), "#!/bin/sh\n").unwrap();
    assert!(Dynamic::read(&File::open(dir.join("text")).unwrap()).is_err());
}
