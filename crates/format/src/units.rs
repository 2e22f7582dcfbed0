//! Numbers with units as people type them and as the CLI passes them to
//! the runtime: sizes (`4096`, `512K`, `4M`; `--buffer-size`,
//! `FNTRACE_BUFFER_SIZE`) and durations (`100ns`, `1.5ms`;
//! `--time-filter`). One parser for both sides; sizes are printed back by
//! [`limits::bytes`](crate::limits::bytes).

/// A number with a unit that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// A duration with a unit other than `ns`, `us`, `ms`, `s`.
    #[error("bad duration '{text}': unit '{unit}' is not one of ns, us, ms, s")]
    DurationUnit {
        /// The text given.
        text: String,
        /// Its unit.
        unit: String,
    },
    /// A duration that is not a whole number of nanoseconds in a `u64`.
    #[error("bad duration '{text}' (expected e.g. 100ns, 2us, 1.5ms, 1s)")]
    Duration {
        /// The text given.
        text: String,
    },
    /// A size with a unit other than `K`, `M`, `G`.
    #[error("bad size '{text}': unit '{unit}' is not one of K, M, G")]
    SizeUnit {
        /// The text given.
        text: String,
        /// Its unit.
        unit: String,
    },
    /// A size of zero where one is needed.
    #[error("bad size '{text}': must be more than 0")]
    ZeroSize {
        /// The text given.
        text: String,
    },
    /// A size that is not a whole number of bytes in a `u64`.
    #[error("bad size '{text}' (expected e.g. 65536, 512K, 4M)")]
    Size {
        /// The text given.
        text: String,
    },
}

/// Parses a duration: `100ns`, `2us`, `1.5ms`, `1s`; a bare number is in
/// nanoseconds. The result must be a whole number of nanoseconds.
pub fn parse_duration(text: &str) -> Result<u64, UnitError> {
    let (number, unit) = split_unit(text);
    let scale: u64 = match unit {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => {
            return Err(UnitError::DurationUnit {
                text: text.into(),
                unit: unit.into(),
            })
        }
    };
    scaled(number, scale).ok_or_else(|| UnitError::Duration { text: text.into() })
}

/// Parses a size in bytes: `4096`, `512K`, `4M`, `1G` (powers of 1024; a
/// trailing `B` or `iB` is allowed). Zero is refused.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    match parse_bytes(text)? {
        0 => Err(UnitError::ZeroSize { text: text.into() }),
        n => Ok(n),
    }
}

/// Parses a size in bytes as [`parse_size`] does, zero included (the
/// runtime raises a buffer size below the minimum to it).
pub fn parse_bytes(text: &str) -> Result<u64, UnitError> {
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
        _ => {
            return Err(UnitError::SizeUnit {
                text: text.into(),
                unit: unit.into(),
            })
        }
    };
    scaled(number, scale).ok_or_else(|| UnitError::Size { text: text.into() })
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
    fn bytes_take_zero_and_errors_say_why() {
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("64K"), Ok(64 << 10));
        assert_eq!(
            parse_size("0").unwrap_err().to_string(),
            "bad size '0': must be more than 0"
        );
        assert_eq!(
            parse_size("4T").unwrap_err().to_string(),
            "bad size '4T': unit 'T' is not one of K, M, G"
        );
        assert_eq!(
            parse_bytes("17179869184G").unwrap_err().to_string(),
            "bad size '17179869184G' (expected e.g. 65536, 512K, 4M)"
        );
        assert!(parse_bytes("99999999999999999999").is_err());
        assert_eq!(
            parse_duration("1h").unwrap_err().to_string(),
            "bad duration '1h': unit 'h' is not one of ns, us, ms, s"
        );
    }
}
