use super::*;

fn glob(p: &str) -> Glob {
    Glob::new(p).unwrap()
}

#[test]
fn globs_as_ftrace_writes_them() {
    assert!(glob("leaf").matches("leaf"));
    assert!(!glob("leaf").matches("leafy"));
    assert!(glob("leaf*").matches("leafy"));
    assert!(glob("leaf*").matches("leaf"));
    assert!(glob("*leaf").matches("a_leaf"));
    assert!(!glob("*leaf").matches("leafs"));
    assert!(glob("*ea*").matches("leaf"));
    assert!(glob("a*b*c").matches("a__b__b__c"));
    assert!(!glob("a*b*c").matches("a__b__b__d"));
    assert!(glob("f?o").matches("foo"));
    assert!(!glob("f?o").matches("fo"));
    assert!(glob("[a-c]x").matches("bx"));
    assert!(!glob("[!a-c]x").matches("bx"));
    assert!(glob("[^a-c]x").matches("dx"));
    assert!(glob("[]]").matches("]"));
    assert!(glob("[a-]").matches("-"));
    assert!(glob("\\*").matches("*"));
    assert!(!glob("\\*").matches("x"));
    assert!(glob("*").matches(""));
    assert!(glob("ns::K<*>::m").matches("ns::K<int>::m"));
    assert!(glob("é*").matches("été"));
}

#[test]
fn bad_globs() {
    assert!(Glob::new("[abc").is_err());
    assert!(Glob::new("abc\\").is_err());
    assert!(Glob::new("[z-a]").is_err());
    assert!(Filter::parse(&[""]).is_err());
    assert!(Filter::parse(&["!"]).is_err());
    assert!(Filter::parse(&["foo:mod:"]).is_err());
    let e = Filter::parse(&["[x"]).unwrap_err();
    assert_eq!(e.to_string(), "bad filter pattern '[x': '[' without ']'");
}

fn names<'a>(symbol: &'a str, demangled: &'a str, base: Option<&'a str>, module: &'a str) -> Names<'a> {
    Names {
        symbol,
        demangled,
        base,
        module,
    }
}

#[test]
fn selection() {
    let leaf = names("leaf", "leaf", None, "prog");
    let mid = names("mid", "mid", None, "prog");
    let cxx = names("_ZN2ns1fEi", "ns::f(int)", Some("ns::f"), "libx.so.1");
    let rust = names("_RNvCs6GmmlP4bgsG_1r4leaf", "r::leaf", None, "prog");

    let all = Filter::parse::<&str>(&[]).unwrap();
    assert!(all.is_empty() && all.selects(&leaf) && all.selects(&cxx));

    let f = Filter::parse(&["*leaf"]).unwrap();
    assert!(f.selects(&leaf) && f.selects(&rust) && !f.selects(&mid));

    let f = Filter::parse(&["*leaf", "!r::*"]).unwrap();
    assert!(f.selects(&leaf) && !f.selects(&rust));

    let f = Filter::parse(&["!leaf"]).unwrap();
    assert!(!f.selects(&leaf) && f.selects(&mid) && f.selects(&cxx));

    // C++: by base name, by full demangled name, by symbol
    assert!(Filter::parse(&["ns::f"]).unwrap().selects(&cxx));
    assert!(Filter::parse(&["ns::f(int)"]).unwrap().selects(&cxx));
    assert!(Filter::parse(&["_ZN2ns*"]).unwrap().selects(&cxx));

    // modules
    assert!(Filter::parse(&[":mod:libx"]).unwrap().selects(&cxx));
    assert!(!Filter::parse(&[":mod:libx"]).unwrap().selects(&leaf));
    assert!(Filter::parse(&["ns::*:mod:libx.so*"]).unwrap().selects(&cxx));
    assert!(!Filter::parse(&["m*:mod:libx"]).unwrap().selects(&cxx));
    assert!(Filter::parse(&["*:mod:prog", "!mid"]).unwrap().selects(&leaf));
    assert!(!Filter::parse(&["*:mod:prog", "!mid"]).unwrap().selects(&mid));
}

#[test]
fn the_first_pattern_that_selects_nothing() {
    let functions = [
        names("leaf", "leaf", None, "prog"),
        names("_ZN2ns1fEi", "ns::f(int)", Some("ns::f"), "libx.so.1"),
    ];
    let any = |f: &Filter| functions.iter().any(|n| f.selects(n));
    assert_eq!(first_unmatched::<&str>(&[], any), None);
    assert_eq!(first_unmatched(&["le*", "ns::f", ":mod:libx"], any), None);
    assert_eq!(first_unmatched(&["leaf", "lefa", "nope"], any), Some("lefa"));
    // A `!` pattern by what it removes.
    assert_eq!(first_unmatched(&["!leaf"], any), None);
    assert_eq!(first_unmatched(&["*", "!mid"], any), Some("!mid"));
    // A module pattern by its module.
    assert_eq!(first_unmatched(&["leaf:mod:libx"], any), Some("leaf:mod:libx"));
    assert_eq!(first_unmatched(&["ns::f:mod:libx"], any), None);
}

/// `--match regex`: found anywhere in a name unless anchored; `!` and
/// `:mod:` as for globs; a bad expression is an error naming it.
#[cfg(feature = "regex")]
#[test]
fn regular_expressions() {
    use super::Syntax;
    let leaf = names("leaf", "leaf", None, "prog");
    let cxx = names("_ZN2ns1fEi", "ns::f(int)", Some("ns::f"), "libx.so.1");
    let re = |patterns: &[&str]| Filter::parse_as(patterns, Syntax::Regex).unwrap();
    assert!(re(&["ea"]).selects(&leaf));
    assert!(!re(&["^ea"]).selects(&leaf));
    assert!(re(&["^le.f$"]).selects(&leaf));
    assert!(re(&["::f$"]).selects(&cxx));
    assert!(re(&["\\(int\\)"]).selects(&cxx));
    assert!(!re(&[".", "!^ns"]).selects(&cxx));
    assert!(re(&[".", "!^ns"]).selects(&leaf));
    assert!(!re(&["f:mod:prog"]).selects(&cxx));
    assert!(re(&["f:mod:libx"]).selects(&cxx));
    // A glob's `*` alone is not "everything" to a regex: it is an error.
    let err = Filter::parse_as(&["fib("], Syntax::Regex).unwrap_err();
    assert_eq!(err.pattern, "fib(");
    assert!(!err.reason.starts_with("error"), "{}", err.reason);
    assert!(Filter::parse_as(&["*"], Syntax::Regex).is_err());
    assert!(Filter::parse_as(&["[a-z"], Syntax::Glob).is_err());
}
