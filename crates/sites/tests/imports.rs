//! `function_imports`: the functions a linked x86-64 file calls in other
//! modules through its GOT, against `readelf` (its `JUMP_SLOT` and
//! `GLOB_DAT` relocations whose symbol is an undefined function in
//! `.dynsym`), on a program built with a lazy PLT, with `-fno-plt -z now`
//! (no PLT: every call through a `GLOB_DAT` slot), and a shared library.

use std::collections::BTreeSet;
use std::path::Path;

use fntrace_testkit::{truth, Work};

/// What readelf says the file imports, by name.
fn expected(path: &Path) -> BTreeSet<String> {
    let undefined_functions: BTreeSet<String> = truth::symbols(path, true)
        .into_iter()
        .filter(|s| s.section.is_none() && (s.kind == "FUNC" || s.kind == "NOTYPE") && !s.name.is_empty())
        .map(|s| s.name)
        .collect();
    truth::relocations(path)
        .into_iter()
        .filter(|r| r.r_type == "R_X86_64_JUMP_SLOT" || r.r_type == "R_X86_64_GLOB_DAT")
        .map(|r| r.symbol.split('@').next().unwrap_or_default().to_string())
        .filter(|name| undefined_functions.contains(name))
        .collect()
}

fn imports(path: &Path) -> BTreeSet<String> {
    let data = std::fs::read(path).unwrap();
    let names = fntrace_sites::function_imports(&data).unwrap();
    let set: BTreeSet<String> = names.iter().cloned().collect();
    assert_eq!(set.len(), names.len(), "each name once: {names:?}");
    set
}

#[test]
fn the_got_calls_of_programs_and_libraries() {
    let work = Work::new("sites-imports");
    let lib = work.path("libmid.so");
    for (name, flags) in [("plt", &[][..]), ("noplt", &["-fno-plt", "-Wl,-z,now"][..])] {
        let exe = fntrace_testkit::build_libcall(&work, name, "gcc", flags);
        let got = imports(&exe);
        assert_eq!(got, expected(&exe), "{name}");
        for f in [
            "malloc",
            "free",
            "qsort",
            "getpid",
            "strdup",
            "mid_len",
            "pthread_create",
        ] {
            assert!(got.contains(f), "{name}: {f} not in {got:?}");
        }
        // Data (stdout, environ) is no function.
        assert!(!got.contains("stdout"), "{name}");
    }
    let got = imports(&lib);
    assert_eq!(got, expected(&lib));
    assert!(got.contains("strlen"), "{got:?}");
    // libc's own: what it calls in the dynamic linker.
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    assert_eq!(imports(libc), expected(libc));
}
