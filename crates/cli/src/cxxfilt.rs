//! The names `cpp_demangle` cannot read, demangled by binutils' `c++filt`.
//!
//! `cpp_demangle` 0.5.1 (the latest) rejects some names GCC makes, such as
//! `std::is_same<...>::value` inside a template argument, mangled
//! `srSt7is_sameI...E5value` (gimli-rs/cpp_demangle#308, open): five of
//! libfmt 9's, `fmt::v9::detail::vformat_to` among them. `c++filt`, from
//! the binutils that build the programs fntrace traces, reads them. The
//! readers ask it for those names only, once each, and show the symbol
//! when it is not installed or cannot read it either. The runtime's
//! filters, which run inside the traced program, never spawn it: there
//! such a function is matched by its symbol.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The demangled form of a C++ symbol `cpp_demangle` could not read, if
/// `c++filt` gives one.
pub fn demangle(symbol: &str) -> Option<String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<String>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(known) = cache.lock().ok()?.get(symbol) {
        return known.clone();
    }
    let found = run(symbol);
    cache.lock().ok()?.insert(symbol.to_string(), found.clone());
    found
}

fn run(symbol: &str) -> Option<String> {
    // A name is an argument, never an option.
    if !symbol.starts_with("_Z") {
        return None;
    }
    let out = Command::new("c++filt")
        .arg(symbol)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().next()?.trim();
    (out.status.success() && !line.is_empty() && line != symbol).then(|| line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libfmt 9's `vformat_to<char>` as g++ 12 mangles it: cpp_demangle
    /// rejects it, c++filt reads it.
    const VFORMAT_TO: &str = "_ZN3fmt2v96detail10vformat_toIcEEvRNS1_6bufferIT_EENS0_17basic_string_viewIS4_EENS0_17basic_format_argsINS0_20basic_format_contextINSt11conditionalIXsrSt7is_sameINS0_13type_identityIS4_E4typeEcE5valueENS0_8appenderESt20back_insert_iteratorINS3_ISF_EEEE4typeESF_EEEENS1_10locale_refE";

    #[test]
    fn reads_what_cpp_demangle_cannot() {
        assert_eq!(fntrace_filter::demangle::demangle(VFORMAT_TO), VFORMAT_TO);
        fntrace_testkit::require("c++filt");
        let name = demangle(VFORMAT_TO).expect("c++filt demangles it");
        assert!(
            name.starts_with("void fmt::v9::detail::vformat_to<char>(fmt::v9::detail::buffer<char>&"),
            "{name}"
        );
        assert_eq!(
            fntrace_filter::demangle::simplify(&name),
            "fmt::v9::detail::vformat_to"
        );
        assert_eq!(demangle("_Zgarbage"), None);
        assert_eq!(demangle("--help"), None);
    }
}
