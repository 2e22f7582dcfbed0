//! Numbers with units, both ways: durations and sizes as users type them
//! (`1.5ms`, `4M`), and durations as the kernel's function_graph tracer and
//! uftrace print them.

/// Parses a duration: `100ns`, `2us`, `1.5ms`, `1s`; a bare number is in
/// nanoseconds. The result must be a whole number of nanoseconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let (number, unit) = split_unit(text);
    let scale: u64 = match unit {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => {
            return Err(format!(
                "bad duration '{text}': unit '{unit}' is not one of ns, us, ms, s"
            ))
        }
    };
    scaled(number, scale)
        .ok_or_else(|| format!("bad duration '{text}' (expected e.g. 100ns, 2us, 1.5ms, 1s)"))
}

/// Parses a size in bytes: `4096`, `512K`, `4M`, `1G` (powers of 1024; a
/// trailing `B` or `iB` is allowed). Zero is refused.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = split_unit(text);
    let unit = unit
        .strip_suffix("iB")
        .or_else(|| unit.strip_suffix('B'))
        .unwrap_or(unit);
    let scale: u64 = match unit {
        "" => 1,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        _ => return Err(format!("bad size '{text}': unit '{unit}' is not one of K, M, G")),
    };
    match scaled(number, scale) {
        Some(0) => Err(format!("bad size '{text}': must be more than 0")),
        Some(n) => Ok(n),
        None => Err(format!("bad size '{text}' (expected e.g. 65536, 512K, 4M)")),
    }
}

/// The number at the start of `text` (digits and dots) and the unit after it.
fn split_unit(text: &str) -> (&str, &str) {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    t.split_at(split)
}

/// `number * scale` for a decimal number with an optional fraction, when
/// the result is a whole number that fits in a `u64`.
fn scaled(number: &str, scale: u64) -> Option<u64> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole) || !all_digits(fraction) {
        return None;
    }
    let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > 18 {
        return None;
    }
    let numerator = u128::from(fraction.parse::<u64>().unwrap_or(0)) * u128::from(scale);
    let denominator = 10u128.pow(fraction.len() as u32);
    if numerator % denominator != 0 {
        return None;
    }
    let part = u64::try_from(numerator / denominator).ok()?;
    whole.checked_mul(scale)?.checked_add(part)
}

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
    fn durations() {
        assert_eq!(parse_duration("100ns"), Ok(100));
        assert_eq!(parse_duration("100"), Ok(100));
        assert_eq!(parse_duration("2us"), Ok(2_000));
        assert_eq!(parse_duration("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration(".25s"), Ok(250_000_000));
        assert_eq!(
            parse_duration("0.0015us"),
            Err(parse_duration("0.0015us").unwrap_err())
        );
        assert_eq!(parse_duration("1.0ns"), Ok(1));
        for bad in [
            "",
            "ms",
            "1.5.1ms",
            "-1ms",
            "1 hour",
            "1h",
            "1.5ns",
            "99999999999999999999",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        for bad in ["", "0", "0K", "K", "4T", "-4", "1.0001K"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

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
