//! The protocol of the control channel between `fntrace attach` or
//! `fntrace ctl` and the runtime in an attached process (`docs/ATTACH.md`,
//! "The control channel"): one request line per connection, `VERB [ARG]`,
//! and one answer line back, `ok ...` or `error ...`. Both sides encode
//! and parse them here: a [`Request`], an answer ([`answer`],
//! [`parse_answer`]).

use std::path::{Path, PathBuf};

use crate::settings::patterns;

/// The file name under which `fntrace attach` injects the runtime: its
/// constructor, seeing it, does not set up in the thread the CLI stopped
/// but starts the session whose settings are beside the link.
pub const ATTACH_NAME: &str = "libfntrace_attach.so";

/// The settings file of an attach to process `pid`, in the control
/// directory `dir`: written by `fntrace attach`, read by the runtime (whose
/// constructor looks for it beside the link it was loaded through).
pub fn settings_file(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.conf"))
}

/// Where the runtime says, in one line, why the session of `settings`
/// could not start — it cannot answer on a socket it could not open — so
/// that `fntrace attach` says why at once instead of waiting for an answer
/// that will not come.
pub fn start_error_file(settings: &Path) -> PathBuf {
    settings.with_extension("err")
}

/// Waits for the set-up; answers what was taken over.
pub const READY: &str = "ready";
/// Sites, sites traced, tracing on or off.
pub const STATUS: &str = "status";
/// `filter PATTERNS`: trace only these functions (none: all).
pub const FILTER: &str = "filter";
/// `notrace PATTERNS`: never trace these.
pub const NOTRACE: &str = "notrace";
/// `depth N`: record calls nested at most N deep (0: no limit).
pub const DEPTH: &str = "depth";
/// `tracing on|off`.
pub const TRACING: &str = "tracing";
/// Ends the session.
pub const DETACH: &str = "detach";
/// Before `filter` or `notrace` (`force filter PATTERNS`): applied even if
/// a pattern matches no function the runtime knows.
pub const FORCE: &str = "force";

/// The answer to a request done.
pub const OK: &str = "ok";
/// The answer to a request refused, with the reason.
pub const ERROR: &str = "error";
/// The reason a `filter` or `notrace` is refused when one of its patterns
/// matches no function the runtime knows: `error unmatched PATTERN`; the
/// filter in force stays.
pub const UNMATCHED: &str = "unmatched";

/// The reason of an `error` answer for `pattern`, which matches nothing.
pub fn unmatched(pattern: &str) -> String {
    format!("{UNMATCHED} {pattern}")
}

/// The pattern of an `error` answer's reason made by [`unmatched`].
pub fn parse_unmatched(reason: &str) -> Option<&str> {
    reason.strip_prefix(UNMATCHED)?.strip_prefix(' ')
}

/// A request to the runtime of an attached process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// [`READY`].
    Ready,
    /// [`STATUS`].
    Status,
    /// `[force] filter PATTERNS` ([`FILTER`]).
    Filter {
        /// The patterns (none: every function).
        patterns: Vec<String>,
        /// Set even if a pattern matches no function ([`FORCE`]).
        force: bool,
    },
    /// `[force] notrace PATTERNS` ([`NOTRACE`]).
    Notrace {
        /// The patterns.
        patterns: Vec<String>,
        /// Set even if a pattern matches no function ([`FORCE`]).
        force: bool,
    },
    /// `depth N` ([`DEPTH`]; 0: no limit).
    Depth(u32),
    /// `tracing on|off` ([`TRACING`]).
    Tracing(bool),
    /// [`DETACH`].
    Detach,
}

/// A request line that does not parse; the text is the `error` answer's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// `force` before another verb.
    #[error("'{FORCE}' goes before '{FILTER}' or '{NOTRACE}'")]
    Force,
    /// `depth` without a number.
    #[error("bad depth '{0}' (a number; 0: no limit)")]
    Depth(String),
    /// `tracing` without `on` or `off`.
    #[error("tracing takes on or off, not '{0}'")]
    Tracing(String),
    /// No such verb.
    #[error("unknown command '{0}'")]
    Unknown(String),
}

impl Request {
    /// The request line, without its line break.
    pub fn encode(&self) -> String {
        let filter = |verb: &str, patterns: &[String], force: bool| {
            let mut line = if force {
                format!("{FORCE} {verb}")
            } else {
                verb.to_string()
            };
            for p in patterns {
                line.push(' ');
                line.push_str(p);
            }
            line
        };
        match self {
            Request::Ready => READY.into(),
            Request::Status => STATUS.into(),
            Request::Filter { patterns, force } => filter(FILTER, patterns, *force),
            Request::Notrace { patterns, force } => filter(NOTRACE, patterns, *force),
            Request::Depth(n) => format!("{DEPTH} {n}"),
            Request::Tracing(on) => format!("{TRACING} {}", if *on { "on" } else { "off" }),
            Request::Detach => DETACH.into(),
        }
    }

    /// Parses a request line (`ready`, `status` and `detach` ignore what
    /// follows them).
    pub fn parse(line: &str) -> Result<Request, RequestError> {
        let line = line.trim();
        let (force, line) = match line.strip_prefix(FORCE) {
            Some(rest) if rest.starts_with(' ') => (true, rest.trim_start()),
            _ => (false, line),
        };
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        let rest = rest.trim();
        let list = || patterns(rest).map(str::to_string).collect();
        Ok(match verb {
            FILTER => Request::Filter {
                patterns: list(),
                force,
            },
            NOTRACE => Request::Notrace {
                patterns: list(),
                force,
            },
            _ if force => return Err(RequestError::Force),
            READY => Request::Ready,
            STATUS => Request::Status,
            DEPTH => Request::Depth(rest.parse().map_err(|_| RequestError::Depth(rest.into()))?),
            TRACING => match rest {
                "on" => Request::Tracing(true),
                "off" => Request::Tracing(false),
                _ => return Err(RequestError::Tracing(rest.into())),
            },
            DETACH => Request::Detach,
            _ => return Err(RequestError::Unknown(verb.into())),
        })
    }
}

/// The answer line for `result` (`ok [TEXT]` or `error REASON`), without
/// its line break.
pub fn answer(result: &Result<String, String>) -> String {
    match result {
        Ok(text) if text.is_empty() => OK.to_string(),
        Ok(text) => format!("{OK} {text}"),
        Err(e) => format!("{ERROR} {}", e.replace('\n', " ")),
    }
}

/// The result an answer line says; `None` for a line that is neither
/// `ok` nor `error`.
pub fn parse_answer(line: &str) -> Option<Result<String, String>> {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix(OK) {
        Some(Ok(rest.trim().to_string()))
    } else {
        line.strip_prefix(ERROR).map(|rest| Err(rest.trim().to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_back() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for request in [
            Request::Ready,
            Request::Status,
            Request::Filter {
                patterns: p(&["parse_*", "lex_*"]),
                force: false,
            },
            Request::Filter {
                patterns: vec![],
                force: true,
            },
            Request::Notrace {
                patterns: p(&["!a:mod:libm"]),
                force: true,
            },
            Request::Notrace {
                patterns: vec![],
                force: false,
            },
            Request::Depth(0),
            Request::Depth(u32::MAX),
            Request::Tracing(true),
            Request::Tracing(false),
            Request::Detach,
        ] {
            assert_eq!(
                Request::parse(&request.encode()),
                Ok(request.clone()),
                "{request:?}"
            );
        }
        assert_eq!(Request::Depth(3).encode(), "depth 3");
        assert_eq!(
            Request::Filter {
                patterns: p(&["a", "b"]),
                force: true
            }
            .encode(),
            "force filter a b"
        );
    }

    #[test]
    fn requests_as_people_type_them() {
        assert_eq!(
            Request::parse("  force   filter a,b  c\n"),
            Ok(Request::Filter {
                patterns: vec!["a".into(), "b".into(), "c".into()],
                force: true
            })
        );
        assert_eq!(
            Request::parse("filter"),
            Ok(Request::Filter {
                patterns: vec![],
                force: false
            })
        );
        assert_eq!(Request::parse("status now"), Ok(Request::Status));
        assert_eq!(
            Request::parse("forcefilter a"),
            Err(RequestError::Unknown("forcefilter".into()))
        );
    }

    #[test]
    fn bad_requests_are_errors() {
        let error = |line: &str| Request::parse(line).unwrap_err().to_string();
        assert_eq!(
            error("force depth 3"),
            "'force' goes before 'filter' or 'notrace'"
        );
        assert_eq!(error("force nope"), "'force' goes before 'filter' or 'notrace'");
        assert_eq!(error("depth x"), "bad depth 'x' (a number; 0: no limit)");
        assert_eq!(error("depth -1"), "bad depth '-1' (a number; 0: no limit)");
        assert_eq!(error("depth"), "bad depth '' (a number; 0: no limit)");
        assert_eq!(error("tracing maybe"), "tracing takes on or off, not 'maybe'");
        assert_eq!(error("jump"), "unknown command 'jump'");
        assert_eq!(error(""), "unknown command ''");
    }

    #[test]
    fn answers_read_back() {
        for result in [
            Ok(String::new()),
            Ok("sites=3 patched=2".into()),
            Err("unmatched x".into()),
        ] {
            assert_eq!(parse_answer(&answer(&result)), Some(result));
        }
        assert_eq!(answer(&Err("two\nlines".into())), "error two lines");
        assert_eq!(parse_answer("what"), None);
    }

    #[test]
    fn an_unmatched_pattern_reads_back() {
        assert_eq!(parse_unmatched(&unmatched("wrok*")), Some("wrok*"));
        assert_eq!(parse_unmatched(&unmatched("!a:mod:libm")), Some("!a:mod:libm"));
        assert_eq!(parse_unmatched("bad depth 'x'"), None);
        assert_eq!(parse_unmatched("unmatchedx"), None);
    }
}
