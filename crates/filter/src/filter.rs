//! Function filters in the syntax of ftrace's `set_ftrace_filter`: exact
//! names, globs (`foo*`, `*foo`, `*foo*`, and `?`, `[a-z]` as the kernel's
//! `glob_match` allows), `!pattern` to remove, and `PATTERN:mod:MODULE` to
//! select within a module (`:mod:libm` selects all of `libm.so.6`).
//!
//! A pattern matches a function if it matches its symbol name, its demangled
//! name, its demangled name without parameters (`ns::f` for
//! `ns::f(int)`), or its simple name, as uftrace's `--demangle=simple`
//! shows it (`ns::f` for `int ns::f<int>(int)`). The selection is: every function matched by some plain
//! pattern (every function if there is none), less those matched by a `!`
//! pattern.
//!
//! With the `regex` feature, [`Filter::parse_as`] also takes the name part
//! of each pattern as a regular expression ([`Syntax::Regex`], uftrace's
//! default `--match`): it matches where it is found in a name, anchored
//! only by `^` and `$` (`-F '^parse'`); `!` and `:mod:` work as for globs,
//! and modules are always globs.

use std::fmt;

/// A bad pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad filter pattern '{pattern}': {reason}")]
pub struct FilterError {
    /// The pattern as given.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Char(char),
    AnyChar,
    AnyRun,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A compiled glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
    tokens: Vec<Token>,
    literal: bool,
}

impl Glob {
    /// Compiles a glob: `*` any run, `?` any character, `[abc]`, `[a-z]`,
    /// `[!a]` or `[^a]` classes, `\` escapes the next character.
    pub fn new(text: &str) -> Result<Glob, String> {
        let mut tokens = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            tokens.push(match c {
                '*' => Token::AnyRun,
                '?' => Token::AnyChar,
                '\\' => Token::Char(chars.next().ok_or("'\\' at the end")?),
                '[' => {
                    let negated = matches!(chars.peek(), Some('!' | '^'));
                    if negated {
                        chars.next();
                    }
                    let mut ranges = Vec::new();
                    let mut first = true;
                    loop {
                        let c = chars.next().ok_or("'[' without ']'")?;
                        if c == ']' && !first {
                            break;
                        }
                        first = false;
                        let lo = if c == '\\' {
                            chars.next().ok_or("'\\' at the end")?
                        } else {
                            c
                        };
                        let mut hi = lo;
                        if chars.peek() == Some(&'-') {
                            chars.next();
                            match chars.next().ok_or("'[' without ']'")? {
                                ']' => {
                                    ranges.push((lo, lo));
                                    ranges.push(('-', '-'));
                                    break;
                                }
                                h => hi = h,
                            }
                        }
                        if hi < lo {
                            return Err(format!("range '{lo}-{hi}' is backwards"));
                        }
                        ranges.push((lo, hi));
                    }
                    Token::Class { negated, ranges }
                }
                c => Token::Char(c),
            });
        }
        let literal = tokens.iter().all(|t| matches!(t, Token::Char(_)));
        Ok(Glob {
            text: text.to_string(),
            tokens,
            literal,
        })
    }

    /// True if the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        if self.literal {
            return self.tokens.len() == text.chars().count()
                && self
                    .tokens
                    .iter()
                    .zip(text.chars())
                    .all(|(t, c)| *t == Token::Char(c));
        }
        let text: Vec<char> = text.chars().collect();
        // Greedy matching with one backtrack point: the last `*` seen.
        let (mut t, mut p) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match self.tokens.get(p) {
                Some(Token::AnyRun) => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                Some(token) if token_matches(token, text[t]) => {
                    t += 1;
                    p += 1;
                    continue;
                }
                _ => {}
            }
            match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            }
        }
        self.tokens[p..].iter().all(|t| *t == Token::AnyRun)
    }
}

fn token_matches(token: &Token, c: char) -> bool {
    match token {
        Token::Char(x) => *x == c,
        Token::AnyChar => true,
        Token::AnyRun => false,
        Token::Class { negated, ranges } => ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated,
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// How the name part of a pattern is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Syntax {
    /// A glob, matching the whole name (ftrace's syntax).
    #[default]
    Glob,
    /// A regular expression, matching anywhere in the name (uftrace's).
    #[cfg(feature = "regex")]
    Regex,
}

/// The name part of a rule.
#[derive(Debug, Clone)]
enum NamePattern {
    Glob(Glob),
    #[cfg(feature = "regex")]
    Regex(regex::Regex),
}

impl NamePattern {
    fn new(text: &str, syntax: Syntax) -> Result<NamePattern, String> {
        match syntax {
            Syntax::Glob => Glob::new(text).map(NamePattern::Glob),
            #[cfg(feature = "regex")]
            Syntax::Regex => regex::Regex::new(text)
                .map(NamePattern::Regex)
                // The parser's message spans lines; its last says what is wrong.
                .map_err(|e| {
                    let text = e.to_string();
                    let last = text.lines().last().unwrap_or_default().trim();
                    last.strip_prefix("error: ").unwrap_or(last).to_string()
                }),
        }
    }

    fn matches(&self, text: &str) -> bool {
        match self {
            NamePattern::Glob(glob) => glob.matches(text),
            #[cfg(feature = "regex")]
            NamePattern::Regex(re) => re.is_match(text),
        }
    }

    /// Whether it matches every name by itself being `*`.
    fn is_star(&self) -> bool {
        matches!(self, NamePattern::Glob(g) if g.text == "*")
    }
}

#[derive(Debug, Clone)]
struct Rule {
    remove: bool,
    name: NamePattern,
    module: Option<Glob>,
}

/// A set of filter patterns.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    rules: Vec<Rule>,
}

/// The names a function is known by, for matching.
pub struct Names<'a> {
    /// The symbol name.
    pub symbol: &'a str,
    /// The demangled name.
    pub demangled: &'a str,
    /// The demangled name without parameters, if different.
    pub base: Option<&'a str>,
    /// The file name of the module (`libm.so.6`, `prog`).
    pub module: &'a str,
}

impl Filter {
    /// Parses patterns; an empty list selects everything.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Filter, FilterError> {
        Filter::parse_as(patterns, Syntax::Glob)
    }

    /// Parses patterns whose names are read in `syntax`.
    pub fn parse_as<S: AsRef<str>>(patterns: &[S], syntax: Syntax) -> Result<Filter, FilterError> {
        let mut rules = Vec::new();
        for pattern in patterns {
            let pattern = pattern.as_ref();
            let err = |reason: String| FilterError {
                pattern: pattern.to_string(),
                reason,
            };
            let (remove, rest) = match pattern.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, pattern),
            };
            let (name, module) = match rest.rsplit_once(":mod:") {
                Some((_, "")) => return Err(err("':mod:' needs a module name".into())),
                Some((name, module)) => (name, Some(Glob::new(module).map_err(err)?)),
                None => (rest, None),
            };
            if name.is_empty() && module.is_none() {
                return Err(err("empty pattern".into()));
            }
            let name = match name.is_empty() {
                true => NamePattern::Glob(Glob::new("*").map_err(err)?),
                false => NamePattern::new(name, syntax).map_err(err)?,
            };
            rules.push(Rule { remove, name, module });
        }
        Ok(Filter { rules })
    }

    /// True if no pattern was given.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// True if the filter selects every function whatever its names: no
    /// pattern, or a bare `*` and no removal.
    pub fn selects_everything(&self) -> bool {
        !self.rules.iter().any(|r| r.remove)
            && (self.rules.is_empty() || self.rules.iter().any(|r| r.module.is_none() && r.name.is_star()))
    }

    /// True if the filter selects the function with these names.
    pub fn selects(&self, names: &Names<'_>) -> bool {
        let hit = |rule: &Rule| rule.hits(names);
        let mut adds = self.rules.iter().filter(|r| !r.remove).peekable();
        let added = adds.peek().is_none() || adds.any(hit);
        added && !self.rules.iter().filter(|r| r.remove).any(hit)
    }

    /// True if a pattern that names a module (`PATTERN:mod:MODULE`, not a
    /// removal) matches the function: it was asked for by its module, as
    /// a library's own functions are.
    pub fn names_module(&self, names: &Names<'_>) -> bool {
        self.rules
            .iter()
            .any(|r| !r.remove && r.module.is_some() && r.hits(names))
    }
}

impl Rule {
    /// Whether the rule's patterns match the function, whatever `remove`.
    fn hits(&self, names: &Names<'_>) -> bool {
        self.module
            .as_ref()
            .is_none_or(|m| module_matches(m, names.module))
            && (self.name.matches(names.symbol)
                || self.name.matches(names.demangled)
                || names.base.is_some_and(|b| self.name.matches(b))
                // The simple name (`ns::f` of `int ns::f<int>(int)`), made
                // only for names it differs from.
                || (names.demangled.contains(['<', ' '])
                    && self.name.matches(&crate::demangle::simplify(names.demangled))))
    }
}

/// The first of `patterns` that selects nothing, as a typo would: a plain
/// pattern that `selects_any` says selects no function, or a `!` pattern
/// that removes none (judged by the functions its bare pattern selects).
/// `selects_any` is asked with a one-pattern filter. Unparsable patterns are
/// left to [`Filter::parse`]; an empty list selects everything.
pub fn first_unmatched<S: AsRef<str>>(
    patterns: &[S],
    selects_any: impl FnMut(&Filter) -> bool,
) -> Option<&str> {
    first_unmatched_as(patterns, Syntax::Glob, selects_any)
}

/// [`first_unmatched`] for patterns read in `syntax`.
pub fn first_unmatched_as<S: AsRef<str>>(
    patterns: &[S],
    syntax: Syntax,
    mut selects_any: impl FnMut(&Filter) -> bool,
) -> Option<&str> {
    patterns.iter().map(AsRef::as_ref).find(|pattern| {
        let bare = pattern.strip_prefix('!').unwrap_or(pattern);
        Filter::parse_as(&[bare], syntax).is_ok_and(|filter| !selects_any(&filter))
    })
}

/// A module pattern matches the file name, or the file name up to `.so`
/// (`libm` matches `libm.so.6`).
fn module_matches(glob: &Glob, module: &str) -> bool {
    glob.matches(module) || module.find(".so").is_some_and(|i| glob.matches(&module[..i]))
}

#[cfg(test)]
mod tests;
