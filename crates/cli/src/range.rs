//! `-r START~STOP` (uftrace's `--time-range`): only what happened between
//! two times. Each end is a timestamp (seconds of the monotonic clock, as
//! `replay -f time` shows them: `84718.7933`), or, with a unit, the time
//! elapsed since the process began (`20ms`, as `-f elapsed` shows it);
//! either end may be left out (`~30ms`, `20ms~`).

use fntrace_format::units::parse_duration;

/// One end of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// A timestamp (monotonic ns).
    At(u64),
    /// Since the process began (ns).
    Elapsed(u64),
}

/// A time range, as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    from: Option<Bound>,
    to: Option<Bound>,
}

impl TimeRange {
    /// The range in monotonic ns, `[from, to]`, for a process that began
    /// at `start_ns`.
    pub fn resolve(&self, start_ns: u64) -> (u64, u64) {
        let at = |b: Bound| match b {
            Bound::At(ns) => ns,
            Bound::Elapsed(ns) => start_ns.saturating_add(ns),
        };
        (self.from.map_or(0, at), self.to.map_or(u64::MAX, at))
    }
}
impl std::fmt::Display for TimeRange {
    /// As [`parse`] reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let end = |b: Option<Bound>| match b {
            None => String::new(),
            Some(Bound::At(ns)) => format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000),
            Some(Bound::Elapsed(ns)) => format!("{ns}ns"),
        };
        write!(f, "{}~{}", end(self.from), end(self.to))
    }
}

/// Parses `START~STOP` (the clap value parser of `-r`).
pub fn parse(text: &str) -> Result<TimeRange, String> {
    let (from, to) = text
        .split_once('~')
        .ok_or_else(|| format!("expected START~STOP, not '{text}' (e.g. 20ms~30ms, 84718.79~)"))?;
    let range = TimeRange {
        from: bound(from)?,
        to: bound(to)?,
    };
    if let (Some(a), Some(b)) = (range.from, range.to) {
        let same_kind = matches!(
            (a, b),
            (Bound::At(_), Bound::At(_)) | (Bound::Elapsed(_), Bound::Elapsed(_))
        );
        if same_kind && range.resolve(0).0 > range.resolve(0).1 {
            return Err(format!("'{text}' ends before it starts"));
        }
    }
    Ok(range)
}

fn bound(text: &str) -> Result<Option<Bound>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if text.ends_with(|c: char| c.is_ascii_alphabetic()) {
        return parse_duration(text)
            .map(|ns| Some(Bound::Elapsed(ns)))
            .map_err(|e| format!("'{text}': {e}"));
    }
    // A timestamp: seconds, and up to nine decimals.
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    let bad = || format!("'{text}' is neither a timestamp (SECONDS.FRACTION) nor a time with a unit (20ms)");
    if secs.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let secs: u64 = secs.parse().map_err(|_| bad())?;
    let frac: u64 = format!("{frac:0<9}").parse().map_err(|_| bad())?;
    secs.checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(frac))
        .map(|ns| Some(Bound::At(ns)))
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_of_either_kind() {
        let r = parse("20ms~30ms").unwrap();
        assert_eq!(r.resolve(1000), (20_001_000, 30_001_000));
        let r = parse("5.000000100~5.0000004").unwrap();
        assert_eq!(r.resolve(77), (5_000_000_100, 5_000_000_400));
        assert_eq!(parse("~1us").unwrap().resolve(10), (0, 1010));
        assert_eq!(parse("2~").unwrap().resolve(10), (2_000_000_000, u64::MAX));
        for text in ["20ms~30ms", "5.000000100~5.0000004", "~1us", "2~", "~"] {
            let r = parse(text).unwrap();
            assert_eq!(parse(&r.to_string()).unwrap(), r, "{text} as {r}");
        }
        for bad in ["20ms", "x~y", "1.0123456789~", "30ms~20ms", "1.5~1.2", "-1~"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
