//! The protocol of the control channel between `fntrace attach` or
//! `fntrace ctl` and the runtime in an attached process (`docs/ATTACH.md`,
//! "The control channel"): one request line per connection, `VERB [ARG]`,
//! and one answer line back, `ok ...` or `error ...`. Both sides take the
//! names from here.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unmatched_pattern_reads_back() {
        assert_eq!(parse_unmatched(&unmatched("wrok*")), Some("wrok*"));
        assert_eq!(parse_unmatched(&unmatched("!a:mod:libm")), Some("!a:mod:libm"));
        assert_eq!(parse_unmatched("bad depth 'x'"), None);
        assert_eq!(parse_unmatched("unmatchedx"), None);
    }
}
