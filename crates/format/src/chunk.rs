//! Chunk headers: every thread file is a sequence of chunks, each a 32-byte
//! header followed by `len` bytes of event words (`docs/FORMAT.md`,
//! "`t<TID>.events`: chunks"). All fields are little-endian.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `FNTC` |
//! | 4 | 2 | format version (1) |
//! | 6 | 2 | flags ([`FLAG_FLIGHT`], [`FLAG_LAST`]) |
//! | 8 | 4 | tid |
//! | 12 | 4 | sequence number of the chunk in the thread |
//! | 16 | 4 | `len`: bytes of events that follow |
//! | 20 | 4 | `lost`: events dropped just before this chunk |
//! | 24 | 8 | `start`: tick of the chunk start |

/// Bytes of a chunk header.
pub const HEADER_LEN: usize = 32;
/// The magic bytes that open every chunk.
pub const MAGIC: [u8; 4] = *b"FNTC";
/// The format version this crate writes and reads.
pub const VERSION: u16 = 1;
/// Flag: the chunk was kept by the flight recorder.
pub const FLAG_FLIGHT: u16 = 1;
/// Flag: the last chunk of the thread (written when the thread ended).
pub const FLAG_LAST: u16 = 2;

/// The fields of a chunk header other than the magic and the version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkHeader {
    /// [`FLAG_FLIGHT`], [`FLAG_LAST`]; other bits are reserved (written 0,
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

impl ChunkHeader {
    /// The 32 bytes of this header, magic and [`VERSION`] included.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&VERSION.to_le_bytes());
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
        if version != VERSION {
            return Err(format!(
                "unsupported chunk version {version} (this reader reads {VERSION})"
            ));
        }
        let header = ChunkHeader {
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

    /// Whether this is the last chunk of its thread.
    pub fn is_last(&self) -> bool {
        self.flags & FLAG_LAST != 0
    }

    /// Bytes of the whole chunk, header included.
    pub fn total_len(&self) -> u64 {
        HEADER_LEN as u64 + u64::from(self.len)
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
        assert_eq!(&bytes[4..6], &[1, 0]);
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
        bad[4] = 2;
        assert!(ChunkHeader::decode(&bad).unwrap_err().contains("version 2"));
        let mut bad = good;
        bad[16] = 3;
        assert!(ChunkHeader::decode(&bad).unwrap_err().contains("multiple of 8"));
    }
}
