//! How test programs are prepared for tracing, and building them so: the
//! site styles the runtime patches (gcc `-pg -mfentry`, gcc and clang
//! `-fpatchable-function-entry`, clang XRay sleds).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::procs::{have, run, text};

/// How a program is prepared for tracing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Style {
    /// gcc `-pg -mfentry -mrecord-mcount`: a call at each entry.
    Fentry,
    /// gcc `-fpatchable-function-entry=5`: five one-byte NOPs.
    Patchable,
    /// clang `-fpatchable-function-entry=5`: one five-byte NOP.
    ClangPatchable,
    /// clang `-fxray-instrument -fxray-instruction-threshold=1`.
    Xray,
    /// gcc, nothing for tracing: functions traced through their own first
    /// instructions (bare sites, #19).
    Plain,
}

impl Style {
    /// The styles a test of "every site style" runs.
    pub const ENTRY_STYLES: [Style; 3] = [Style::Patchable, Style::Fentry, Style::ClangPatchable];

    /// A short name (directory names, messages).
    pub fn name(self) -> &'static str {
        match self {
            Style::Fentry => "fentry",
            Style::Patchable => "patchable",
            Style::ClangPatchable => "clang-patchable",
            Style::Xray => "xray",
            Style::Plain => "plain",
        }
    }

    /// The compiler to use, the first of those this style accepts that is
    /// installed.
    pub fn compiler(self, cxx: bool) -> Option<&'static str> {
        let candidates: &[&str] = match (self, cxx) {
            (Style::Fentry | Style::Patchable | Style::Plain, false) => &["gcc"],
            (Style::Fentry | Style::Patchable | Style::Plain, true) => &["g++"],
            (Style::Xray | Style::ClangPatchable, false) => &["clang-16", "clang-14"],
            (Style::Xray | Style::ClangPatchable, true) => &["clang++-16", "clang++-14"],
        };
        candidates.iter().copied().find(|c| have(c))
    }

    /// The instrumentation flags.
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            Style::Fentry => &["-pg", "-mfentry", "-mrecord-mcount"],
            Style::Patchable | Style::ClangPatchable => &["-fpatchable-function-entry=5"],
            Style::Xray => &["-fxray-instrument", "-fxray-instruction-threshold=1"],
            Style::Plain => &[],
        }
    }

    /// Compiles `source` (C, or C++ with `cxx`) into `out` in this style
    /// with `args` after it; `None`, with a note on stderr, when the
    /// compiler is not installed — except under `CI`, where nothing may
    /// skip and a missing compiler fails the test.
    pub fn build(self, source: &Path, out: &Path, cxx: bool, args: &[&str]) -> Option<PathBuf> {
        let Some(compiler) = self.compiler(cxx) else {
            assert!(
                std::env::var_os("CI").is_none(),
                "no compiler for style {} (.ci/run installs gcc, g++, clang-14, clang-16)",
                self.name()
            );
            eprintln!(
                "skipped: {} in style {}: no compiler for it (CI installs gcc, g++, clang-14, clang-16)",
                source.display(),
                self.name()
            );
            return None;
        };
        let mut cmd = Command::new(compiler);
        cmd.args(self.flags()).arg(source).arg("-o").arg(out).args(args);
        let built = run(&mut cmd, Duration::from_secs(120));
        assert!(built.status.success(), "{cmd:?} failed:\n{}", text(&built.stderr));
        Some(out.to_path_buf())
    }
}
