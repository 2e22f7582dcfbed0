//! Chunk headers: every thread file is a sequence of chunks, each a 32-byte
//! header followed by `len` bytes of event words (`docs/FORMAT.md`,
//! "`t<TID>.events`: chunks"). All fields are little-endian.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `FNTC` |
//! | 4 | 2 | format version (2; 1 is still read) |
//! | 6 | 2 | flags ([`FLAG_FLIGHT`], [`FLAG_LAST`], [`FLAG_CONTINUED`]) |
//! | 8 | 4 | tid |
//! | 12 | 4 | sequence number of the chunk in the thread |
//! | 16 | 4 | `len`: bytes of events that follow |
//! | 20 | 4 | `lost`: events dropped just before this chunk |
//! | 24 | 8 | `start`: tick of the chunk start |

/// Bytes of a chunk header.
pub const HEADER_LEN: usize = 32;
/// The magic bytes that open every chunk.
pub const MAGIC: [u8; 4] = *b"FNTC";
/// The chunk version this crate writes: deltas count from the chunk's
/// *base* (its `start`, or the last `TIME` event's tick), so that an event
/// is complete in one word and a signal handler's events can be committed
/// between any two of the interrupted code's ([`Ticks`]).
pub const VERSION: u16 = 2;
/// The chunk version of a process that records values (arguments, return
/// values): version 2 with `DATA` events (`event::DATA_BIT`), which a
/// reader of version 2 would take for `TIME` events. Only such processes
/// write it, so every other trace stays readable by older readers.
pub const VERSION_DATA: u16 = 3;
/// The first chunk version, still read: deltas count from the previous
/// event.
pub const VERSION_PREVIOUS_EVENT: u16 = 1;
/// Flag: the chunk was kept by the flight recorder.
pub const FLAG_FLIGHT: u16 = 1;
/// Flag: the last chunk of the thread (written when the thread ended).
pub const FLAG_LAST: u16 = 2;
/// Flag: the rest of the chunk just before it in the file, which has the
/// same sequence number (a chunk written in two parts: its first part by a
/// flight recorder's dump or a final flush while it was being filled).
pub const FLAG_CONTINUED: u16 = 4;

/// The fields of a chunk header other than the magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// [`VERSION`] (how its deltas count), or [`VERSION_PREVIOUS_EVENT`].
    pub version: u16,
    /// [`FLAG_FLIGHT`], [`FLAG_LAST`], [`FLAG_CONTINUED`]; other bits are reserved (written 0,
    /// ignored when read).
    pub flags: u16,
    /// The thread that wrote the chunk.
    pub tid: u32,
    /// The sequence number of the chunk in its thread, from 0; a gap means
    /// chunks were lost.
    pub seq: u32,
    /// Bytes of events after the header (a multiple of 8).
    pub len: u32,
    /// Events dropped just before this chunk.
    pub lost: u32,
    /// The tick of the chunk start: the base of its first delta.
    pub start: u64,
}

impl Default for ChunkHeader {
    fn default() -> Self {
        ChunkHeader {
            version: VERSION,
            flags: 0,
            tid: 0,
            seq: 0,
            len: 0,
            lost: 0,
            start: 0,
        }
    }
}

impl ChunkHeader {
    /// The 32 bytes of this header, magic and version included.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&self.version.to_le_bytes());
        out[6..8].copy_from_slice(&self.flags.to_le_bytes());
        out[8..12].copy_from_slice(&self.tid.to_le_bytes());
        out[12..16].copy_from_slice(&self.seq.to_le_bytes());
        out[16..20].copy_from_slice(&self.len.to_le_bytes());
        out[20..24].copy_from_slice(&self.lost.to_le_bytes());
        out[24..32].copy_from_slice(&self.start.to_le_bytes());
        out
    }

    /// Reads a header from the first [`HEADER_LEN`] bytes of `bytes`.
    ///
    /// Fails, with the reason as a short phrase, when `bytes` is too short,
    /// the magic or the version is wrong, or `len` is not a multiple of 8.
    /// Whether `len` fits in the rest of the file is the reader's business.
    pub fn decode(bytes: &[u8]) -> Result<ChunkHeader, String> {
        let Some(bytes) = bytes.get(..HEADER_LEN) else {
            return Err(format!(
                "truncated chunk header ({} of {HEADER_LEN} bytes)",
                bytes.len()
            ));
        };
        let magic = &bytes[0..4];
        if magic != MAGIC {
            return Err(format!(
                "bad magic {:02x} {:02x} {:02x} {:02x} (expected 46 4e 54 43, \"FNTC\")",
                magic[0], magic[1], magic[2], magic[3]
            ));
        }
        let version = u16_at(bytes, 4);
        if !(VERSION_PREVIOUS_EVENT..=VERSION_DATA).contains(&version) {
            return Err(format!(
                "unsupported chunk version {version} (this reader reads {VERSION_PREVIOUS_EVENT} to {VERSION_DATA})"
            ));
        }
        let header = ChunkHeader {
            version,
            flags: u16_at(bytes, 6),
            tid: u32_at(bytes, 8),
            seq: u32_at(bytes, 12),
            len: u32_at(bytes, 16),
            lost: u32_at(bytes, 20),
            start: u64_at(bytes, 24),
        };
        if header.len & 7 != 0 {
            return Err(format!("chunk length {} is not a multiple of 8", header.len));
        }
        Ok(header)
    }

    /// Whether the flight recorder kept this chunk.
    pub fn is_flight(&self) -> bool {
        self.flags & FLAG_FLIGHT != 0
    }

    /// Whether the chunk may hold `DATA` events (version 3).
    pub fn has_data(&self) -> bool {
        self.version >= VERSION_DATA
    }

    /// Whether this is the last chunk of its thread.
    pub fn is_last(&self) -> bool {
        self.flags & FLAG_LAST != 0
    }

    /// Bytes of the whole chunk, header included.
    pub fn total_len(&self) -> u64 {
        HEADER_LEN as u64 + u64::from(self.len)
    }
}

/// Turns the deltas of one chunk into absolute ticks, by the chunk's
/// version: from the previous event (version 1), or from the base (version
/// 2: the chunk's `start`, then each `TIME` event's tick). Ticks never go
/// back within a chunk: an event whose base-relative time is earlier than
/// the previous event's (another core's counter slightly behind) is read
/// at the previous event's tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticks {
    by_base: bool,
    base: u64,
    tick: u64,
}

impl Ticks {
    /// At the start of the chunk `header` opens.
    pub fn new(header: &ChunkHeader) -> Ticks {
        Ticks {
            by_base: header.version != VERSION_PREVIOUS_EVENT,
            base: header.start,
            tick: header.start,
        }
    }

    /// The delta in ticks and the tick of the next event: of `kind`, with
    /// the delta `field` of its word (version 2: the delta plus one) and,
    /// for `TIME`, its payload.
    pub fn next(&mut self, kind: crate::event::Kind, field: u64, payload: Option<u64>) -> (u64, u64) {
        let delta = if self.by_base {
            field.saturating_sub(1)
        } else {
            field
        };
        self.tick = match (kind, payload) {
            (crate::event::Kind::Time, Some(tick)) => {
                self.base = tick;
                tick
            }
            _ if self.by_base => self.tick.max(self.base.wrapping_add(delta)),
            _ => self.tick.wrapping_add(delta),
        };
        (delta, self.tick)
    }

    /// Whether deltas count from the base (version 2), where a zero word
    /// is an event reserved and never written.
    pub fn counts_from_base(&self) -> bool {
        self.by_base
    }

    /// The tick of the last event read (the chunk's start before any).
    pub fn current(&self) -> u64 {
        self.tick
    }

    /// What the rest of the chunk counts from, as the `start` of a chunk
    /// that continues it (a chunk written in two parts): the base, or for
    /// version 1 the last event's tick.
    pub fn continuation_start(&self) -> u64 {
        if self.by_base {
            self.base
        } else {
            self.tick
        }
    }
}

// The helpers below are only called on a slice of exactly HEADER_LEN bytes
// with constant offsets inside it.
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ChunkHeader {
        ChunkHeader {
            version: VERSION,
            flags: FLAG_FLIGHT | FLAG_LAST,
            tid: 0x0102_0304,
            seq: 7,
            len: 4096,
            lost: 3,
            start: 0x1122_3344_5566_7788,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        let bytes = h.encode();
        assert_eq!(&bytes[0..4], b"FNTC");
        assert_eq!(&bytes[4..6], &[2, 0]);
        assert_eq!(&bytes[8..12], &[4, 3, 2, 1]);
        assert_eq!(ChunkHeader::decode(&bytes), Ok(h));
        assert!(h.is_flight() && h.is_last());
        assert_eq!(h.total_len(), 4128);
        assert_eq!(
            ChunkHeader::decode(&ChunkHeader::default().encode()),
            Ok(ChunkHeader::default())
        );
    }

    #[test]
    fn rejects_bad_headers() {
        let good = sample().encode();
        for n in 0..HEADER_LEN {
            assert!(ChunkHeader::decode(&good[..n]).unwrap_err().contains("truncated"));
        }
        let mut bad = good;
        bad[0] = b'X';
        assert!(ChunkHeader::decode(&bad).unwrap_err().contains("magic"));
        let mut bad = good;
        bad[4] = 4;
        assert!(ChunkHeader::decode(&bad).unwrap_err().contains("version 4"));
        let mut old = good;
        old[4] = 1;
        assert_eq!(
            ChunkHeader::decode(&old).map(|h| h.version),
            Ok(VERSION_PREVIOUS_EVENT)
        );
        let mut bad = good;
        bad[16] = 3;
        assert!(ChunkHeader::decode(&bad).unwrap_err().contains("multiple of 8"));
    }

    #[test]
    fn ticks_by_version() {
        use crate::event::Kind;
        let mut h = ChunkHeader {
            start: 100,
            ..ChunkHeader::default()
        };
        // Version 2: fields are the delta from the base plus one.
        let mut t = Ticks::new(&h);
        assert_eq!(t.next(Kind::Entry, 6, None), (5, 105));
        assert_eq!(t.next(Kind::Entry, 8, None), (7, 107));
        // Behind the previous event: read at its tick.
        assert_eq!(t.next(Kind::Exit, 7, None), (6, 107));
        assert_eq!(t.next(Kind::Time, 0, Some(1000)).1, 1000);
        assert_eq!(t.next(Kind::Exit, 4, None), (3, 1003));
        assert_eq!(t.continuation_start(), 1000);
        h.version = VERSION_PREVIOUS_EVENT;
        let mut t = Ticks::new(&h);
        assert_eq!(t.next(Kind::Entry, 5, None), (5, 105));
        assert_eq!(t.next(Kind::Entry, 7, None), (7, 112));
        assert_eq!(t.continuation_start(), 112);
    }
}
