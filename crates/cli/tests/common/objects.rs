//! Building programs in steps: sources to objects, `fntrace recordmcount`
//! on the objects, and linking them.

use std::path::{Path, PathBuf};

use super::{cc, fntrace_output, program, Work};

/// The C++ program of the build table: templates and inline functions
/// (COMDAT) in each of three objects (`tests/programs/build`).
pub const TEMPLATES_PROGRAM: &[&str] = &["build/ints.cpp", "build/doubles.cpp", "build/main.cpp"];

/// Compiles each of `sources` (under `tests/programs`) to an object in the
/// work directory's `dir` with `compiler -c SOURCE -o OBJECT FLAGS`.
pub fn objects(work: &Work, dir: &str, compiler: &str, sources: &[&str], flags: &[&str]) -> Vec<PathBuf> {
    let dir = work.path(dir);
    std::fs::create_dir_all(&dir).unwrap();
    sources
        .iter()
        .map(|src| {
            let obj = dir.join(Path::new(src).file_stem().unwrap()).with_extension("o");
            let source = program(src);
            let mut args = vec!["-c", &source, "-o", obj.to_str().unwrap()];
            args.extend(flags);
            cc(compiler, &args);
            obj
        })
        .collect()
}

/// `fntrace recordmcount -v OBJECTS...`, which must succeed; returns its
/// stdout.
pub fn recordmcount(objects: &[PathBuf]) -> String {
    let mut args = vec!["recordmcount".to_string(), "-v".to_string()];
    args.extend(objects.iter().map(|o| o.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fntrace_output(&args);
    assert!(
        out.status.success(),
        "recordmcount: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Links `objects` into `out` with `compiler OBJECTS EXTRA -o OUT`.
pub fn link(compiler: &str, objects: &[PathBuf], out: &Path, extra: &[&str]) {
    let mut args: Vec<&str> = objects.iter().map(|o| o.to_str().unwrap()).collect();
    args.extend(extra);
    args.extend(["-o", out.to_str().unwrap()]);
    cc(compiler, &args);
}
