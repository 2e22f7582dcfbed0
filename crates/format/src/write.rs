//! Building whole chunks in memory: for tools, tests and any writer that
//! does not need the runtime's lock-free buffers.
//!
//! The runtime encodes words itself with [`crate::event`] and
//! [`crate::chunk`]; [`ChunkBuilder`] does the same with the two rules of
//! the format applied for you: deltas are counted from the previous event
//! (the first from the chunk's `start`), and a delta that does not fit in an
//! event word is preceded by a `TIME` event carrying the absolute tick.

use crate::chunk::{ChunkHeader, HEADER_LEN};
use crate::event::{self, Kind};

/// One chunk being built: a header and its event words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkBuilder {
    header: ChunkHeader,
    base: u64,
    words: Vec<u64>,
}

impl ChunkBuilder {
    /// An empty chunk of thread `tid` with sequence number `seq`, starting
    /// at tick `start`.
    pub fn new(tid: u32, seq: u32, start: u64) -> Self {
        ChunkBuilder {
            header: ChunkHeader {
                tid,
                seq,
                start,
                ..ChunkHeader::default()
            },
            base: start,
            words: Vec::new(),
        }
    }

    /// Sets the header's count of events dropped just before this chunk.
    pub fn set_lost(&mut self, lost: u32) -> &mut Self {
        self.header.lost = lost;
        self
    }

    /// Sets the header's flags (`FLAG_FLIGHT`, `FLAG_LAST`).
    pub fn set_flags(&mut self, flags: u16) -> &mut Self {
        self.header.flags = flags;
        self
    }

    /// Appends an event of `kind` for `fid` at absolute tick `tick`.
    /// `payload` is written only for the kinds that have one (0 when it is
    /// `None`). A `TIME` event is inserted first when the delta from the
    /// base does not fit (or is below it). For
    /// [`Kind::Time`] itself the payload is `tick`.
    pub fn push(&mut self, kind: Kind, fid: u32, tick: u64, payload: Option<u64>) -> &mut Self {
        if kind == Kind::Time {
            self.words.push(event::TIME_WORD);
            self.words.push(tick);
            self.base = tick;
            return self;
        }
        let delta = match tick.checked_sub(self.base) {
            Some(d) if d <= event::MAX_DELTA_FROM_BASE => d,
            _ => {
                self.words.push(event::TIME_WORD);
                self.words.push(tick);
                self.base = tick;
                0
            }
        };
        self.words.push(event::encode_from_base(kind, fid, delta));
        if kind.has_payload() {
            self.words.push(payload.unwrap_or(0));
        }
        self
    }

    /// Appends an `ENTRY` of `fid` at `tick`.
    pub fn entry(&mut self, fid: u32, tick: u64) -> &mut Self {
        self.push(Kind::Entry, fid, tick, None)
    }

    /// Appends an `EXIT` of `fid` at `tick`.
    pub fn exit(&mut self, fid: u32, tick: u64) -> &mut Self {
        self.push(Kind::Exit, fid, tick, None)
    }

    /// Appends an `UNWIND` of `fid` at `tick`.
    pub fn unwind(&mut self, fid: u32, tick: u64) -> &mut Self {
        self.push(Kind::Unwind, fid, tick, None)
    }

    /// Appends an `ENTRY_CALLER` of `fid` at `tick` called from `caller`.
    pub fn entry_caller(&mut self, fid: u32, tick: u64, caller: u64) -> &mut Self {
        self.push(Kind::EntryCaller, fid, tick, Some(caller))
    }

    /// Appends a `TIME` event: the absolute tick `tick`.
    pub fn time(&mut self, tick: u64) -> &mut Self {
        self.push(Kind::Time, 0, tick, None)
    }

    /// Appends a `LOST` event: `count` events dropped, dropping ended at
    /// `tick`.
    pub fn lost(&mut self, count: u64, tick: u64) -> &mut Self {
        self.push(Kind::Lost, 0, tick, Some(count))
    }

    /// Appends a `CALL` event: a whole call of `fid` that lasted
    /// `duration` ticks and ended at `tick`.
    pub fn call(&mut self, fid: u32, tick: u64, duration: u64) -> &mut Self {
        self.push(Kind::Call, fid, tick, Some(duration))
    }

    /// Appends a `MARK` event: tracing turned on or off at `tick`.
    pub fn mark(&mut self, on: bool, tick: u64) -> &mut Self {
        self.push(Kind::Mark, u32::from(on), tick, None)
    }

    /// Appends a `DATA` event with tag `tag` (`event::DATA_ARGS`,
    /// `event::DATA_RETVAL`) and payload `words` (`crate::values`): the
    /// values of the event just pushed. The chunk becomes version 3.
    pub fn data(&mut self, tag: u32, words: &[u64]) -> &mut Self {
        self.header.version = crate::chunk::VERSION_DATA;
        self.words.push(event::data_word(tag, words.len() as u32));
        self.words.extend_from_slice(words);
        self
    }

    /// The event words so far.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The header as it will be written (with `len` filled in).
    pub fn header(&self) -> ChunkHeader {
        ChunkHeader {
            len: self.event_len(),
            ..self.header
        }
    }

    fn event_len(&self) -> u32 {
        u32::try_from(self.words.len() * 8).unwrap_or(!7)
    }

    /// The whole chunk: header then event words, little-endian.
    ///
    /// A chunk cannot hold more than 4 GiB of events; words beyond that are
    /// left out (build smaller chunks).
    pub fn bytes(&self) -> Vec<u8> {
        let header = self.header();
        let words = header.len as usize / 8;
        let mut out = Vec::with_capacity(HEADER_LEN + header.len as usize);
        out.extend_from_slice(&header.encode());
        for word in self.words.iter().take(words) {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{decode, MAX_DELTA};

    #[test]
    fn deltas_and_time_events() {
        let mut c = ChunkBuilder::new(5, 0, 1000);
        c.entry(1, 1010)
            .exit(1, 1015)
            .entry(2, 1015 + MAX_DELTA + 1)
            .exit(2, 10);
        let w = c.words();
        // Deltas from the base, plus one.
        assert_eq!(decode(w[0]), (Kind::Entry, 1, 11));
        assert_eq!(decode(w[1]), (Kind::Exit, 1, 16));
        assert_eq!(decode(w[2]), (Kind::Time, 0, 0));
        assert_eq!(w[3], 1015 + MAX_DELTA + 1);
        assert_eq!(decode(w[4]), (Kind::Entry, 2, 1));
        assert_eq!(decode(w[5]), (Kind::Time, 0, 0));
        assert_eq!(w[6], 10);
        assert_eq!(decode(w[7]), (Kind::Exit, 2, 1));
        let bytes = c.bytes();
        assert_eq!(bytes.len(), HEADER_LEN + 8 * 8);
        let h = ChunkHeader::decode(&bytes).unwrap();
        assert_eq!((h.tid, h.seq, h.len, h.start), (5, 0, 64, 1000));
    }
}
