//! How large a thread's event buffer may be (`--buffer-size`,
//! `--flight-recorder`, `FNTRACE_BUFFER_SIZE`, `FNTRACE_FLIGHT`): one rule
//! for the CLI, which refuses a size outside it before anything runs, and
//! for the runtime, which refuses to trace with one whoever set it.
//!
//! A buffer is a ring of [`CHUNKS`] chunks, each a whole number of 4 KiB
//! pages, mapped by every thread on its first traced call. So:
//! - at least [`MIN_BUFFER`]: one page per chunk;
//! - at most a quarter of the machine's physical memory: each traced thread
//!   maps one, and a mapping the kernel may refuse (or that the OOM killer
//!   would end the program for) must be refused before the program runs;
//! - and never more than [`MAX_BUFFER`] (16 chunks of 2 GiB): a chunk's
//!   length is a 32-bit field of its header.

/// Chunks in a thread's buffer.
pub const CHUNKS: u64 = 16;
/// The deepest nesting of calls the runtime records in a thread (its
/// shadow stack; a deeper call is not traced, and counted) and a reader
/// follows.
pub const MAX_NESTING: usize = 131_072;
/// The page a chunk is made of.
pub const PAGE: u64 = 4096;
/// The smallest buffer: a page per chunk (64 KiB).
pub const MIN_BUFFER: u64 = CHUNKS * PAGE;
/// The largest buffer on any machine: 16 chunks of 2 GiB (32 GiB).
pub const MAX_BUFFER: u64 = CHUNKS << 31;

/// A buffer size outside the limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BufferError {
    /// Less than [`MIN_BUFFER`].
    #[error("{} is less than the smallest buffer, {} (16 chunks of a 4 KiB page)", bytes(*.size), bytes(MIN_BUFFER))]
    TooSmall {
        /// The size asked for.
        size: u64,
    },
    /// More than [`max_buffer`] allows on this machine.
    #[error(
        "{} is more than a thread's buffer may take here, {} (a quarter of the {} of memory, \
         at most {}: every traced thread maps its own)",
        bytes(*.size), bytes(*.max), physical.map_or_else(|| "unknown amount".to_string(), bytes), bytes(MAX_BUFFER)
    )]
    TooLarge {
        /// The size asked for.
        size: u64,
        /// The limit.
        max: u64,
        /// The machine's physical memory, if known.
        physical: Option<u64>,
    },
}

/// The largest buffer on a machine with `physical` bytes of memory
/// (unknown: [`MAX_BUFFER`]).
pub fn max_buffer(physical: Option<u64>) -> u64 {
    physical.map_or(MAX_BUFFER, |p| (p / 4).clamp(MIN_BUFFER, MAX_BUFFER))
}

/// Checks a per-thread buffer size against the limits of this machine.
pub fn check_buffer(size: u64) -> Result<u64, BufferError> {
    check_buffer_with(size, physical_memory())
}

/// Checks `size` for a machine with `physical` bytes of memory.
pub fn check_buffer_with(size: u64, physical: Option<u64>) -> Result<u64, BufferError> {
    let max = max_buffer(physical);
    if size < MIN_BUFFER {
        Err(BufferError::TooSmall { size })
    } else if size > max {
        Err(BufferError::TooLarge { size, max, physical })
    } else {
        Ok(size)
    }
}

/// The machine's physical memory (`MemTotal` of `/proc/meminfo`).
pub fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// A size for people: `64 KiB`, `5.8 GiB`, `16 EiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} bytes")
    } else if value.fract() == 0.0 || value >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        let gib = 1u64 << 30;
        assert_eq!(max_buffer(Some(24 * gib)), 6 * gib);
        assert_eq!(max_buffer(Some(1024 * gib)), MAX_BUFFER);
        assert_eq!(max_buffer(None), MAX_BUFFER);
        assert_eq!(max_buffer(Some(4096)), MIN_BUFFER);
        assert_eq!(check_buffer_with(4 << 20, Some(gib)), Ok(4 << 20));
        assert_eq!(check_buffer_with(MIN_BUFFER, Some(gib)), Ok(MIN_BUFFER));
        assert_eq!(
            check_buffer_with(MIN_BUFFER - 1, Some(gib)),
            Err(BufferError::TooSmall { size: MIN_BUFFER - 1 })
        );
        let e = check_buffer_with(u64::MAX, Some(24 * gib)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "16 EiB is more than a thread's buffer may take here, 6 GiB (a quarter of the 24 GiB of \
             memory, at most 32 GiB: every traced thread maps its own)"
        );
    }

    #[test]
    fn meminfo_and_sizes() {
        assert_eq!(
            parse_meminfo("MemTotal:       24576000 kB\nMemFree: 1 kB\n"),
            Some(24_576_000 * 1024)
        );
        assert_eq!(parse_meminfo("MemFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo("MemTotal: lots\n"), None);
        assert_eq!(bytes(100), "100 bytes");
        assert_eq!(bytes(65536), "64 KiB");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(bytes(u64::MAX), "16 EiB");
    }
}
