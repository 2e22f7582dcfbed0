//! Symbol demangling: Rust (legacy and v0) first, then C++ (Itanium).

use std::fmt::Write;

/// The demangled form of `name`, without Rust hashes; `name` itself when it
/// is not a mangled name (C functions, unknown schemes).
pub fn demangle(name: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(name) {
        // `{:#}` leaves out the legacy hash and v0 crate disambiguators.
        let mut out = String::new();
        if write!(out, "{rust:#}").is_ok() {
            return out;
        }
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(text) = sym.demangle() {
                return text;
            }
        }
    }
    name.to_string()
}

/// The demangled name without the parameter list (`ns::f(int) const` gives
/// `ns::f`), as users write it in filters; `None` when that is the same as
/// the demangled name.
pub fn demangle_without_params(name: &str) -> Option<String> {
    if !name.starts_with("_Z") || rustc_demangle::try_demangle(name).is_ok() {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(name).ok()?;
    let options = cpp_demangle::DemangleOptions::new().no_params().no_return_type();
    sym.demangle_with_options(&options).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_names_are_kept() {
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("leaf.constprop.0"), "leaf.constprop.0");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
        assert_eq!(demangle_without_params("main"), None);
    }

    #[test]
    fn cxx_names() {
        // g++ 12: template<typename T> T twice(T) instantiated for int
        assert_eq!(demangle("_Z5twiceIiET_S0_"), "int twice<int>(int)");
        assert_eq!(demangle("_ZL2sti"), "st(int)");
        assert_eq!(demangle_without_params("_ZL2sti").as_deref(), Some("st"));
        assert_eq!(
            demangle_without_params("_ZN2ns5Klass6methodEi").as_deref(),
            Some("ns::Klass::method")
        );
    }

    #[test]
    fn rust_names() {
        // rustc 1.95, v0 mangling (the default)
        assert_eq!(demangle("_RNvCs6GmmlP4bgsG_1r4leaf"), "r::leaf");
        // legacy mangling, with its hash
        assert_eq!(demangle("_ZN1r4leaf17h0123456789abcdefE"), "r::leaf");
        assert_eq!(demangle_without_params("_ZN1r4leaf17h0123456789abcdefE"), None);
    }
}
