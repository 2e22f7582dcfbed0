//! The comparison of `fntrace list`'s listing with independent readings of
//! the file (`fntrace_testkit::check`, which `fntrace-sites`' tests share).

use std::path::Path;

pub use fntrace_testkit::check::{
    Expect, FENTRY, FENTRY_SCAN, FENTRY_TABLE, MCOUNT, MCOUNT_SCAN, MCOUNT_TABLE,
};

use super::{list, ListedFunction};

/// Compares what `fntrace list` lists for `bin` with independent readings,
/// and returns the listing for further checks.
pub fn check(bin: &Path, expect: Expect) -> Vec<ListedFunction> {
    fntrace_testkit::check::check(bin, list(bin), expect)
}
