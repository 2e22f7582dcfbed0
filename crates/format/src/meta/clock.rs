//! The clock of a process: how event ticks become nanoseconds.
//!
//! Two calibration points `(tick0, mono0_ns)` and `(tick1, mono1_ns)` give
//! `ns(t) = mono0_ns + (t - tick0) * (mono1_ns - mono0_ns) / (tick1 - tick0)`.
//! For the `monotonic` source, `ns(t) = t`. If the points are less than
//! 1 ms apart (in nanoseconds), `tsc_hz` is used when present; otherwise
//! ticks are read as nanoseconds from `mono0_ns`, and
//! [`Clock::is_calibrated`] says so.
//!
//! All arithmetic saturates: a corrupt clock gives wrong times, never a
//! panic.

use serde::{Deserialize, Serialize};

/// The `monotonic` source: ticks are `CLOCK_MONOTONIC` nanoseconds.
pub const SOURCE_MONOTONIC: &str = "monotonic";
/// The `tsc` source: ticks are TSC cycles.
pub const SOURCE_TSC: &str = "tsc";

/// The shortest span between calibration points that is trusted.
pub const MIN_CALIBRATION_NS: u64 = 1_000_000;

/// The `clock` object of `process.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    /// `tsc` or `monotonic`; any other value is read like `tsc` (through
    /// the calibration points).
    pub source: String,
    /// The tick of the first calibration point.
    pub tick0: u64,
    /// `CLOCK_MONOTONIC` at the first point (ns).
    pub mono0_ns: u64,
    /// The tick of the latest calibration point.
    pub tick1: u64,
    /// `CLOCK_MONOTONIC` at the latest point (ns).
    pub mono1_ns: u64,
    /// The TSC frequency, if the runtime knew it (used while the two points
    /// are less than 1 ms apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_hz: Option<f64>,
}

/// How ticks scale to nanoseconds.
#[derive(Debug, Clone, Copy)]
enum Rate {
    /// Ticks are nanoseconds and times are absolute (`monotonic`).
    Identity,
    /// `ns = ticks * num / den` (`num >= 1 ms`, `den > 0`).
    Ratio { num: u64, den: u64 },
    /// `ns = ticks * 1e9 / hz` (`hz` finite and positive).
    Hz(f64),
    /// Not calibrated: ticks read as nanoseconds from `mono0_ns`.
    Uncalibrated,
}

impl Default for Clock {
    /// `Clock::monotonic(0)`.
    fn default() -> Self {
        Clock::monotonic(0)
    }
}

impl Clock {
    /// A `monotonic` clock (ticks are nanoseconds) with both points at
    /// `now_ns`.
    pub fn monotonic(now_ns: u64) -> Clock {
        Clock {
            source: SOURCE_MONOTONIC.to_string(),
            tick0: now_ns,
            mono0_ns: now_ns,
            tick1: now_ns,
            mono1_ns: now_ns,
            tsc_hz: None,
        }
    }

    fn rate(&self) -> Rate {
        if self.source == SOURCE_MONOTONIC {
            return Rate::Identity;
        }
        let span = self.mono1_ns.checked_sub(self.mono0_ns);
        let ticks = self.tick1.checked_sub(self.tick0);
        if let (Some(num), Some(den)) = (span, ticks) {
            if num >= MIN_CALIBRATION_NS && den > 0 {
                return Rate::Ratio { num, den };
            }
        }
        match self.tsc_hz {
            Some(hz) if hz.is_finite() && hz > 0.0 => Rate::Hz(hz),
            _ => Rate::Uncalibrated,
        }
    }

    /// Whether ticks convert to real nanoseconds: `false` when the clock is
    /// a `tsc` whose calibration points are less than 1 ms apart and no
    /// `tsc_hz` is known, so ticks are read as nanoseconds.
    pub fn is_calibrated(&self) -> bool {
        !matches!(self.rate(), Rate::Uncalibrated)
    }

    /// A one-line note for readers to print when the clock is not
    /// calibrated.
    pub fn note(&self) -> Option<String> {
        if self.is_calibrated() {
            return None;
        }
        Some(format!(
            "clock `{}` not calibrated (calibration points less than 1 ms apart, no tsc_hz): ticks are read as nanoseconds",
            self.source
        ))
    }

    /// The time (ns, `CLOCK_MONOTONIC`) of absolute tick `tick`.
    pub fn to_ns(&self, tick: u64) -> u64 {
        if let Rate::Identity = self.rate() {
            return tick;
        }
        if tick >= self.tick0 {
            self.mono0_ns.saturating_add(self.ticks_to_ns(tick - self.tick0))
        } else {
            self.mono0_ns.saturating_sub(self.ticks_to_ns(self.tick0 - tick))
        }
    }

    /// The length (ns) of a duration of `ticks`.
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        match self.rate() {
            Rate::Identity | Rate::Uncalibrated => ticks,
            Rate::Ratio { num, den } => mul_div(ticks, num, den),
            // `as` saturates from f64 (NaN gives 0).
            Rate::Hz(hz) => (ticks as f64 * 1e9 / hz) as u64,
        }
    }

    /// The number of ticks of a duration of `ns` nanoseconds (the inverse
    /// of [`Clock::ticks_to_ns`], rounded down).
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        match self.rate() {
            Rate::Identity | Rate::Uncalibrated => ns,
            Rate::Ratio { num, den } => mul_div(ns, den, num),
            Rate::Hz(hz) => (ns as f64 * hz / 1e9) as u64,
        }
    }
}

/// `a * b / c` without overflow, saturating at `u64::MAX`; `c > 0`.
fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    let q = u128::from(a) * u128::from(b) / u128::from(c.max(1));
    u64::try_from(q).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tsc(tick0: u64, mono0: u64, tick1: u64, mono1: u64) -> Clock {
        Clock {
            source: SOURCE_TSC.into(),
            tick0,
            mono0_ns: mono0,
            tick1,
            mono1_ns: mono1,
            tsc_hz: None,
        }
    }

    #[test]
    fn two_points() {
        // 3 ticks per ns, from (3000, 1000) to (3_003_000, 1_001_000).
        let c = tsc(3000, 1000, 3_003_000, 1_001_000);
        assert!(c.is_calibrated() && c.note().is_none());
        assert_eq!(c.to_ns(3000), 1000);
        assert_eq!(c.to_ns(3300), 1100);
        assert_eq!(c.to_ns(0), 0);
        assert_eq!(c.to_ns(300), 100);
        assert_eq!(c.ticks_to_ns(30), 10);
        assert_eq!(c.ns_to_ticks(10), 30);
        assert_eq!(c.to_ns(u64::MAX), 1000 + (u64::MAX - 3000) / 3);
    }

    #[test]
    fn monotonic_is_identity() {
        let mut c = tsc(5, 99, 1_000_000_000, 2_000_000_000);
        c.source = SOURCE_MONOTONIC.into();
        assert_eq!(c.to_ns(12345), 12345);
        assert_eq!(c.ticks_to_ns(7), 7);
        assert_eq!(Clock::monotonic(3).to_ns(42), 42);
    }

    #[test]
    fn close_points_use_tsc_hz_or_nothing() {
        let mut c = tsc(100, 1000, 200, 1500);
        assert!(!c.is_calibrated());
        assert!(c.note().unwrap().contains("not calibrated"));
        assert_eq!(c.to_ns(150), 1050);
        c.tsc_hz = Some(2e9);
        assert!(c.is_calibrated());
        assert_eq!(c.to_ns(300), 1100);
        assert_eq!(c.ns_to_ticks(100), 200);
        c.tsc_hz = Some(f64::NAN);
        assert!(!c.is_calibrated());
    }

    #[test]
    fn corrupt_clocks_do_not_panic() {
        let c = tsc(u64::MAX, u64::MAX, 0, 0);
        for t in [0, 1, u64::MAX] {
            let _ = (c.to_ns(t), c.ticks_to_ns(t), c.ns_to_ticks(t));
        }
        let c = tsc(0, 0, 1, u64::MAX);
        assert_eq!(c.to_ns(u64::MAX), u64::MAX);
        assert_eq!(c.ns_to_ticks(u64::MAX), 1);
    }
}
