//! Durations as the kernel's function_graph tracer and uftrace print them
//! (durations and sizes as users type them are parsed by
//! `fntrace_format::units`, the parser the runtime uses too).

/// The kernel's duration marks (`trace_find_mark`): the symbol for a call
/// longer than 1 s, 100 ms, 10 ms, 1 ms, 100 us, 10 us; else a space.
pub fn mark(ns: u64) -> char {
    match ns {
        1_000_000_001.. => '$',
        100_000_001.. => '@',
        10_000_001.. => '*',
        1_000_001.. => '#',
        100_001.. => '!',
        10_001.. => '+',
        _ => ' ',
    }
}

/// A duration as function_graph prints it: microseconds with up to three
/// decimals so that the number takes at most 8 characters, then ` us`,
/// padded to 12 columns (`trace_print_graph_duration`).
/// Appended to `out`, with no allocation of its own (a replay line's hot
/// path).
pub fn push_graph_duration(out: &mut String, ns: u64) {
    let start = out.len();
    push_decimal(out, ns / 1000);
    let digits = out.len() - start;
    if digits < 7 {
        let decimals = (7 - digits).min(3);
        out.push('.');
        let digits = thousandths(ns);
        out.push_str(std::str::from_utf8(&digits[..decimals]).unwrap_or(""));
    }
    let pad = 8usize.saturating_sub(out.len() - start);
    out.push_str(" us ");
    push_spaces(out, pad);
}

/// The ASCII digits of `n` in decimal, written into `buf`.
pub fn decimal(n: u64, buf: &mut [u8; 20]) -> &str {
    let mut n = n;
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buf[at..]).unwrap_or("?")
}

/// `n` in decimal, appended to `out`.
pub fn push_decimal(out: &mut String, n: u64) {
    out.push_str(decimal(n, &mut [0; 20]));
}

/// The three ASCII digits of `n % 1000` (the decimals of a time in the
/// unit above), zero-padded: `b"007"`.
pub fn thousandths(n: u64) -> [u8; 3] {
    let n = n % 1000;
    [
        b'0' + (n / 100) as u8,
        b'0' + (n / 10 % 10) as u8,
        b'0' + (n % 10) as u8,
    ]
}

/// `n` spaces, appended to `out`.
pub fn push_spaces(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
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

    fn graph_duration(ns: u64) -> String {
        let mut text = String::new();
        push_graph_duration(&mut text, ns);
        text
    }

    #[test]
    fn kernel_durations() {
        assert_eq!(graph_duration(190), "0.190 us    ");
        assert_eq!(graph_duration(11_356), "11.356 us   ");
        assert_eq!(graph_duration(1_234_567), "1234.567 us ");
        assert_eq!(graph_duration(12_345_678), "12345.67 us ");
        assert_eq!(graph_duration(123_456_789), "123456.7 us ");
        assert_eq!(graph_duration(1_234_567_890), "1234567 us  ");
        assert_eq!(graph_duration(0), "0.000 us    ");
        assert_eq!(graph_duration(u64::MAX), "18446744073709551 us ");
        let mut s = String::from("x");
        push_decimal(&mut s, 0);
        push_decimal(&mut s, 1_000_203);
        assert_eq!(s, "x01000203");
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
