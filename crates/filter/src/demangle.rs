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

/// Whether `symbol` is a C++ name (Itanium mangling, not Rust's legacy
/// form of it).
pub fn is_cxx(symbol: &str) -> bool {
    symbol.starts_with("_Z") && rustc_demangle::try_demangle(symbol).is_err()
}

/// A demangled C++ name as uftrace's `--demangle=simple` shows it: without
/// its return type, template arguments and parameter list
/// (`void fmt::v9::detail::vformat_to<char>(...)` gives
/// `fmt::v9::detail::vformat_to`); `operator<`, `operator<<`, `operator()`
/// and the like keep their own brackets. Text that is not a C++ name comes
/// back as it is.
pub fn simplify(demangled: &str) -> String {
    let mut out = String::with_capacity(demangled.len());
    // ABI tags go too: `fmt::v9::vformat[abi:cxx11]`.
    let mut untagged = demangled.to_string();
    while let Some(at) = untagged.find("[abi:") {
        let end = untagged[at..].find(']').map_or(untagged.len(), |e| at + e + 1);
        untagged.replace_range(at..end, "");
    }
    let chars: Vec<char> = untagged.chars().collect();
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // An operator's name is its own: `operator<<`, `operator()`, `operator->`.
        if depth == 0 && out.ends_with("operator") {
            let op: String = chars[i..]
                .iter()
                .take_while(|c| "<>=()[]-!+*/%&|^~,".contains(**c))
                .collect();
            let op = match op.as_str() {
                // `operator()(int)`: the call operator, then its parameters.
                o if o.starts_with("()") => "()".to_string(),
                o if o.starts_with("[]") => "[]".to_string(),
                o => o.trim_end_matches('(').to_string(),
            };
            if !op.is_empty() {
                out.push_str(&op);
                i += op.chars().count();
                continue;
            }
        }
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        i += 1;
    }
    let out = out
        .trim_end()
        .trim_end_matches(" const")
        .trim_end_matches(" &")
        .trim_end_matches(" &&");
    // The return type ends at the last space before the name; an
    // operator's name may hold a space itself (`operator new`).
    let name = match out.rfind("operator") {
        Some(at) => &out[out[..at].rfind(' ').map_or(0, |s| s + 1)..],
        None => &out[out.rfind(' ').map_or(0, |s| s + 1)..],
    };
    name.to_string()
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
    fn simple_names() {
        // As c++filt (binutils 2.40) prints them, from g++ 12 and libfmt 9.
        assert_eq!(
            simplify("void fmt::v9::detail::vformat_to<char>(fmt::v9::detail::buffer<char>&, fmt::v9::basic_string_view<char>, fmt::v9::basic_format_args<fmt::v9::basic_format_context<std::conditional<std::is_same<fmt::v9::type_identity<char>::type, char>::value, fmt::v9::appender, std::back_insert_iterator<fmt::v9::detail::buffer<fmt::v9::type_identity<char>::type> > >::type, fmt::v9::type_identity<char>::type> >, fmt::v9::detail::locale_ref)"),
            "fmt::v9::detail::vformat_to"
        );
        assert_eq!(simplify("int twice<int>(int)"), "twice");
        assert_eq!(simplify("ns::Klass::method(int) const"), "ns::Klass::method");
        assert_eq!(
            simplify("std::vector<int, std::allocator<int> >::push_back(int const&)"),
            "std::vector::push_back"
        );
        assert_eq!(
            simplify("bool operator< <int>(Box<int> const&, Box<int> const&)"),
            "operator<"
        );
        assert_eq!(
            simplify("std::ostream::operator<<(int)"),
            "std::ostream::operator<<"
        );
        assert_eq!(simplify("Functor::operator()(int) const"), "Functor::operator()");
        assert_eq!(simplify("operator new(unsigned long)"), "operator new");
        assert_eq!(simplify("Wrapper::operator int() const"), "Wrapper::operator int");
        assert_eq!(simplify("Klass::~Klass()"), "Klass::~Klass");
        assert_eq!(simplify("(anonymous namespace)::helper(int)"), "::helper");
        assert_eq!(simplify("main"), "main");
        assert_eq!(
            simplify("fmt::v9::vformat[abi:cxx11](fmt::v9::basic_string_view<char>)"),
            "fmt::v9::vformat"
        );
        assert_eq!(simplify("Matrix::operator[](int)"), "Matrix::operator[]");
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
