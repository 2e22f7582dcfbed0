//! Discovery and recordmcount on damaged real files: every truncation, and
//! thousands of deterministic corruptions of headers, section headers and
//! tables, must give a result or an error, never a panic. (The fuzz target
//! in `fuzz/` explores further; this keeps a fixed sample in every run.)

use std::path::{Path, PathBuf};
use std::process::Command;

use fntrace_sites::recordmcount::{Mcount, Outcome};
use fntrace_sites::{Binary, Options, Source};

fn compile(out: &Path, compiler: &str, args: &[&str]) {
    let status = Command::new(compiler)
        .args(args)
        .arg("-o")
        .arg(out)
        .status()
        .unwrap_or_else(|e| panic!("the tests need {compiler} (run .ci/run): {e}"));
    assert!(status.success(), "{compiler} {args:?}");
}

/// Compiles the samples into a directory of the calling test's own.
fn samples(test: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("robustness")
        .join(test);
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("sample.c");
    std::fs::write(
        &src,
        "static int helper(int x) { return x * 3; }\n\
         int leaf(int x) { return x + 1; }\n\
         int tail(int x) { return leaf(x + 2); }\n\
         int main(int argc, char **argv) { return helper(argc) + tail(argc); }\n",
    )
    .unwrap();
    let src = src.to_str().unwrap();
    let builds: &[(&str, &str, &[&str])] = &[
        (
            "fentry.o",
            "gcc",
            &["-O2", "-c", "-pg", "-mfentry", "-mrecord-mcount"],
        ),
        (
            "scan.o",
            "clang-16",
            &["-O2", "-c", "-pg", "-mfentry", "-ffunction-sections"],
        ),
        (
            "patchable.o",
            "gcc",
            &[
                "-O2",
                "-c",
                "-fpatchable-function-entry=5,2",
                "-ffunction-sections",
            ],
        ),
        (
            "fentry-pie",
            "gcc",
            &[
                "-O2",
                "-pg",
                "-mfentry",
                "-mrecord-mcount",
                "-minstrument-return=nop5",
                "-mrecord-return",
            ],
        ),
        (
            "patchable-pie",
            "clang-16",
            &["-O2", "-fpatchable-function-entry=5,2"],
        ),
        (
            "xray-pie",
            "clang-16",
            &["-O2", "-fxray-instrument", "-fxray-instruction-threshold=1"],
        ),
        // No compiler sites: bare sites, from .symtab and .eh_frame.
        ("plain-pie", "gcc", &["-O2", "-fcf-protection"]),
    ];
    builds
        .iter()
        .map(|(name, compiler, flags)| {
            let out = dir.join(name);
            let mut args = flags.to_vec();
            args.push(src);
            compile(&out, compiler, &args);
            out
        })
        .collect()
}

/// The entry points on one input (`path` names it). Any result is fine, as
/// long as what discovery returns holds together; but an object that
/// recordmcount rewrites must read back with every site it recorded, and
/// with the `__patchable_function_entries` sites it had.
fn exercise(path: &Path, data: &[u8]) {
    if let Ok(binary) = fntrace_sites::discover_file_with(path, data, &Options::default()) {
        let functions = binary.functions.len();
        assert!(binary
            .sites
            .iter()
            .all(|s| !matches!(s.function, Some(f) if f >= functions)));
        assert!(binary.unpatchable.iter().all(|u| u.function < functions));
        for pair in binary.sites.windows(2) {
            assert!((pair[0].section, pair[0].address) <= (pair[1].section, pair[1].address));
        }
    }
    let before = fntrace_sites::discover(data);
    if let Ok(Outcome {
        output: Some(output),
        mcount,
        ..
    }) = fntrace_sites::recordmcount::record(data)
    {
        let before = before.expect("recordmcount read it");
        let back = fntrace_sites::discover(&output).expect("a rewritten object reads back");
        let from = |binary: &Binary, source: Source| -> Vec<(usize, u64)> {
            binary
                .sites
                .iter()
                .filter(|s| s.source == source)
                .map(|s| (s.section, s.address))
                .collect()
        };
        let recorded = match mcount {
            Mcount::Recorded { sites, .. } => sites,
            _ => from(&before, Source::McountLoc).len(),
        };
        assert_eq!(
            from(&back, Source::McountLoc).len(),
            recorded,
            "sites read back from the new table"
        );
        assert_eq!(
            from(&back, Source::PatchableFunctionEntries),
            from(&before, Source::PatchableFunctionEntries),
            "patchable entries regrouped"
        );
    }
}

/// xorshift64: a fixed, portable sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn the_samples_are_read() {
    for path in samples("read") {
        let data = std::fs::read(&path).unwrap();
        let binary = fntrace_sites::discover_file(&path, &data).unwrap();
        assert!(binary.sites.len() >= 3, "{}", path.display());
        assert!(
            binary.rejected.is_empty(),
            "{}: {:?}",
            path.display(),
            binary.rejected
        );
    }
}

#[test]
fn every_truncation() {
    for path in samples("truncation") {
        let data = std::fs::read(&path).unwrap();
        // Every length for objects; for linked files every length in the
        // headers and a stride through the rest.
        let step = if data.len() > 8192 { 61 } else { 1 };
        for len in (0..data.len()).filter(|&l| l < 4096 || l % step == 0) {
            exercise(&path, &data[..len]);
        }
    }
}

#[test]
fn corrupted_headers_and_tables() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for path in samples("corruption") {
        let original = std::fs::read(&path).unwrap();
        let shoff = u64::from_le_bytes(original[0x28..0x30].try_into().unwrap()) as usize;
        for round in 0..1500 {
            let mut data = original.clone();
            for _ in 0..1 + round % 4 {
                // Aim at the ELF header, the section header table, or anywhere.
                let at = match rng.below(3) {
                    0 => rng.below(64),
                    1 if shoff < data.len() => shoff + rng.below(data.len() - shoff),
                    _ => rng.below(data.len()),
                };
                data[at] = match rng.below(4) {
                    0 => 0,
                    1 => 0xff,
                    2 => data[at] ^ (1 << rng.below(8)),
                    _ => rng.next() as u8,
                };
            }
            exercise(&path, &data);
        }
    }
}

/// Inputs that fuzzing found to break something, kept so it stays fixed.
#[test]
fn fuzz_regressions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        exercise(&path, &std::fs::read(&path).unwrap());
        count += 1;
    }
    assert!(count > 0);
}
