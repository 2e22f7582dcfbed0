//! Durations as the kernel's function_graph tracer and uftrace print them
//! (durations and sizes as users type them are parsed by
//! `fntrace_format::units`, the parser the runtime uses too).

/// The kernel's duration marks (`trace_find_mark`): the symbol for a call
/// longer than 1 s, 100 ms, 10 ms, 1 ms, 100 us, 10 us; else a space.
pub fn mark(ns: u64) -> char {
    const MARKS: [(u64, char); 6] = [
        (1_000_000_000, '$'),
        (100_000_000, '@'),
        (10_000_000, '*'),
        (1_000_000, '#'),
        (100_000, '!'),
        (10_000, '+'),
    ];
    MARKS
        .iter()
        .find(|&&(limit, _)| ns > limit)
        .map_or(' ', |&(_, c)| c)
}

/// A duration as function_graph prints it: microseconds with up to three
/// decimals so that the number takes at most 8 characters, then ` us`,
/// padded to 12 columns (`trace_print_graph_duration`).
pub fn graph_duration(ns: u64) -> String {
    let us = (ns / 1000).to_string();
    let mut text = us.clone();
    if us.len() < 7 {
        let decimals = (7 - us.len()).min(3);
        let rem = format!("{:03}", ns % 1000);
        text.push('.');
        text.push_str(&rem[..decimals]);
    }
    let pad = 8usize.saturating_sub(text.len());
    format!("{text} us {:pad$}", "")
}

/// A duration as uftrace prints it in reports: `1.234 us`, `12.500 ms`,
/// `3.000  s`, ` 2.000  m`, with three decimals of the unit below.
pub fn human(ns: u64) -> String {
    const UNITS: [&str; 5] = ["us", "ms", " s", " m", " h"];
    const LIMITS: [u64; 6] = [1000, 1000, 1000, 60, 60, u64::MAX];
    let mut value = ns;
    let mut small = 0;
    let mut unit = UNITS[0];
    for (i, u) in UNITS.iter().enumerate() {
        small = value % LIMITS[i];
        value /= LIMITS[i];
        unit = u;
        if value < LIMITS[i + 1] {
            break;
        }
    }
    format!("{value}.{small:03} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_durations() {
        assert_eq!(graph_duration(190), "0.190 us    ");
        assert_eq!(graph_duration(11_356), "11.356 us   ");
        assert_eq!(graph_duration(1_234_567), "1234.567 us ");
        assert_eq!(graph_duration(12_345_678), "12345.67 us ");
        assert_eq!(graph_duration(123_456_789), "123456.7 us ");
        assert_eq!(graph_duration(1_234_567_890), "1234567 us  ");
        assert_eq!(mark(10_000), ' ');
        assert_eq!(mark(10_001), '+');
        assert_eq!(mark(100_001), '!');
        assert_eq!(mark(1_000_001), '#');
        assert_eq!(mark(10_000_001), '*');
        assert_eq!(mark(100_000_001), '@');
        assert_eq!(mark(1_000_000_001), '$');
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(0), "0.000 us");
        assert_eq!(human(1_234), "1.234 us");
        assert_eq!(human(999_999), "999.999 us");
        assert_eq!(human(12_500_000), "12.500 ms");
        assert_eq!(human(3_000_000_000), "3.000  s");
        assert_eq!(human(120_000_000_000), "2.000  m");
        assert_eq!(human(7_200_000_000_000), "2.000  h");
    }
}
