//! The chunk layer of a thread file: headers and event words as written,
//! checked but not interpreted (for `fntrace dump`, and under
//! [`ThreadEvents`](super::ThreadEvents)).
//!
//! The file is read through a `BufReader`, one header or word at a time, so
//! memory stays bounded whatever a header's `len` says. Reading stops at the
//! first damage — bad magic or version, `len` not a multiple of 8 or past
//! the end of the file, a truncated header, a missing payload word, a chunk
//! of another thread, a sequence number that goes back — and
//! [`RawEvents::damage`] tells where and why.

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::Path;

use super::file;
use crate::chunk::{ChunkHeader, Ticks, HEADER_LEN};
use crate::event::{self, Kind};

/// One item of a thread file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawItem {
    /// A `DATA` event (chunk version 3): values of the event before it;
    /// its payload words are [`RawEvents::data`] until the next item.
    Data {
        /// Byte offset of the event word in the file.
        offset: u64,
        /// `event::DATA_ARGS` or `event::DATA_RETVAL` (others are
        /// reserved: readers skip them).
        tag: u32,
        /// Its payload words.
        words: u32,
    },
    /// A chunk header.
    Chunk {
        /// Byte offset of the header in the file.
        offset: u64,
        /// The header.
        header: ChunkHeader,
        /// Chunks missing just before this one (a gap in sequence numbers).
        missing: u64,
    },
    /// An event word, with its payload word when its kind has one.
    Event {
        /// Byte offset of the event word in the file.
        offset: u64,
        /// The kind.
        kind: Kind,
        /// The `fid` bits.
        fid: u32,
        /// The delta bits (ignored by `TIME` events).
        delta: u64,
        /// The payload word, for the kinds that have one.
        payload: Option<u64>,
        /// The absolute tick of the event: the chunk's `start` plus the
        /// deltas so far, or a `TIME` event's payload.
        tick: u64,
    },
}

/// The chunks and words of one thread file, read up to the first damage.
pub struct RawEvents {
    reader: BufReader<Box<dyn Read + Send>>,
    label: String,
    tid: Option<u32>,
    file_len: Option<u64>,
    offset: u64,
    chunk_end: u64,
    ticks: Ticks,
    next_seq: u64,
    last_seen: bool,
    done: bool,
    damage: Option<String>,
    unwritten: u64,
    /// The current chunk may hold `DATA` events.
    data_chunk: bool,
    /// The payload of the last `DATA` event read.
    data: Vec<u64>,
}

impl std::fmt::Debug for RawEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawEvents")
            .field("label", &self.label)
            .field("offset", &self.offset)
            .field("damage", &self.damage)
            .finish_non_exhaustive()
    }
}

impl RawEvents {
    /// Reads the file at `path`, up to its size when opened. `label` names
    /// it in damage notes (`p1/t2.events`); `tid`, when given, is the
    /// thread every chunk must belong to. A file that cannot be opened, or
    /// is not a regular file, reads as empty with a damage note.
    pub fn open(path: &Path, label: impl Into<String>, tid: Option<u32>) -> RawEvents {
        RawEvents::open_with(path, label, tid, |file| file)
    }

    /// [`RawEvents::open`], reading the file through `wrap` (which counts
    /// the bytes read, for instance).
    pub fn open_with<R: Read + Send + 'static>(
        path: &Path,
        label: impl Into<String>,
        tid: Option<u32>,
        wrap: impl FnOnce(File) -> R,
    ) -> RawEvents {
        let label = label.into();
        match file::open_regular(path) {
            Ok((file, len)) => RawEvents::from_reader(wrap(file).take(len), Some(len), label, tid),
            Err(e) => {
                let mut raw = RawEvents::from_reader(std::io::empty(), Some(0), label, tid);
                raw.stop(e.to_string());
                raw
            }
        }
    }

    /// Reads a thread file held in memory.
    pub fn from_bytes(bytes: Vec<u8>, label: impl Into<String>, tid: Option<u32>) -> RawEvents {
        let len = bytes.len() as u64;
        RawEvents::from_reader(std::io::Cursor::new(bytes), Some(len), label, tid)
    }

    /// Reads a thread file from `reader`; `len`, when known, lets a chunk
    /// that claims more bytes than the file has be refused before any of
    /// its events is returned.
    pub fn from_reader(
        reader: impl Read + Send + 'static,
        len: Option<u64>,
        label: impl Into<String>,
        tid: Option<u32>,
    ) -> RawEvents {
        RawEvents {
            reader: BufReader::new(Box::new(reader)),
            label: label.into(),
            tid,
            file_len: len,
            offset: 0,
            chunk_end: 0,
            ticks: Ticks::new(&ChunkHeader::default()),
            next_seq: 0,
            last_seen: false,
            done: false,
            damage: None,
            unwritten: 0,
            data_chunk: false,
            data: Vec::new(),
        }
    }

    /// The name of the file in damage notes.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Why reading stopped early: `LABEL: offset N: reason` (or `LABEL:
    /// cannot read: ...`); `None` while reading goes on and after a clean
    /// end.
    pub fn damage(&self) -> Option<&str> {
        self.damage.as_deref()
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Words read as zero so far: events reserved and never written, each
    /// one lost event (yielded as a `LOST` event of 1).
    pub fn unwritten(&self) -> u64 {
        self.unwritten
    }

    /// Whether a chunk flagged as the thread's last was read.
    pub fn saw_last(&self) -> bool {
        self.last_seen
    }

    fn stop(&mut self, reason: String) {
        self.done = true;
        self.damage = Some(format!("{}: {reason}", self.label));
    }

    fn stop_at(&mut self, offset: u64, reason: String) {
        self.stop(format!("offset {offset}: {reason}"));
    }

    /// Fills `buf` as far as the file allows; the number of bytes read.
    fn read_full(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.reader.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// The next word of the current chunk, or the damage reason.
    fn read_word(&mut self) -> Result<u64, String> {
        let mut w = [0u8; 8];
        match self.read_full(&mut w) {
            Ok(8) => {
                self.offset += 8;
                Ok(u64::from_le_bytes(w))
            }
            Ok(_) => Err("the file ends inside the chunk".to_string()),
            Err(e) => Err(format!("cannot read: {e}")),
        }
    }

    fn next_event(&mut self) -> Option<RawItem> {
        let at = self.offset;
        let word = match self.read_word() {
            Ok(w) => w,
            Err(reason) => {
                self.stop_at(at, reason);
                return None;
            }
        };
        if word == 0 && self.ticks.counts_from_base() {
            // A word reserved and never written (version 2): one lost event.
            self.unwritten += 1;
            return Some(RawItem::Event {
                offset: at,
                kind: Kind::Lost,
                fid: 0,
                delta: 0,
                payload: Some(1),
                tick: self.ticks.current(),
            });
        }
        let (kind, fid, field) = event::decode(word);
        if kind == Kind::Time && self.data_chunk {
            if let Some((tag, words)) = event::data_of(fid) {
                return self.next_data(at, tag, words);
            }
        }
        let payload = if kind.has_payload() {
            if self.chunk_end.saturating_sub(self.offset) < 8 {
                self.stop_at(
                    at,
                    format!(
                        "{} event without its payload word at the end of the chunk",
                        kind.name()
                    ),
                );
                return None;
            }
            let pat = self.offset;
            match self.read_word() {
                Ok(p) => Some(p),
                Err(reason) => {
                    self.stop_at(pat, reason);
                    return None;
                }
            }
        } else {
            None
        };
        let (delta, tick) = self.ticks.next(kind, field, payload);
        Some(RawItem::Event {
            offset: at,
            kind,
            fid,
            delta,
            payload,
            tick,
        })
    }

    fn next_data(&mut self, at: u64, tag: u32, words: u32) -> Option<RawItem> {
        if self.chunk_end.saturating_sub(self.offset) < u64::from(words) * 8 {
            self.stop_at(
                at,
                format!("DATA event of {words} words goes past the end of the chunk"),
            );
            return None;
        }
        self.data.clear();
        for _ in 0..words {
            match self.read_word() {
                Ok(w) => self.data.push(w),
                Err(reason) => {
                    self.stop_at(at, reason);
                    return None;
                }
            }
        }
        Some(RawItem::Data {
            offset: at,
            tag,
            words,
        })
    }

    /// The payload words of the last [`RawItem::Data`] read.
    pub fn data(&self) -> &[u64] {
        &self.data
    }

    fn next_chunk(&mut self) -> Option<RawItem> {
        let at = self.offset;
        let mut bytes = [0u8; HEADER_LEN];
        let n = match self.read_full(&mut bytes) {
            Ok(n) => n,
            Err(e) => {
                self.stop_at(at, format!("cannot read: {e}"));
                return None;
            }
        };
        if n == 0 {
            self.done = true;
            return None;
        }
        let header = match ChunkHeader::decode(&bytes[..n]) {
            Ok(h) => h,
            Err(reason) => {
                self.stop_at(at, reason);
                return None;
            }
        };
        self.offset += HEADER_LEN as u64;
        if let Some(tid) = self.tid.filter(|&t| t != header.tid) {
            self.stop_at(
                at,
                format!("chunk of thread {} in the file of thread {tid}", header.tid),
            );
            return None;
        }
        if let Some(rest) = self.file_len.map(|l| l.saturating_sub(self.offset)) {
            if u64::from(header.len) > rest {
                self.stop_at(
                    at,
                    format!(
                        "chunk length {} goes past the end of the file ({rest} bytes left)",
                        header.len
                    ),
                );
                return None;
            }
        }
        let seq = u64::from(header.seq);
        // The rest of the chunk before it, written later: no chunk missing.
        let continued = header.flags & crate::chunk::FLAG_CONTINUED != 0 && seq + 1 == self.next_seq;
        if seq < self.next_seq && !continued {
            self.stop_at(
                at,
                format!(
                    "chunk sequence number {seq} goes back (expected {} or more)",
                    self.next_seq
                ),
            );
            return None;
        }
        let missing = (seq + 1).saturating_sub(self.next_seq + u64::from(!continued));
        self.next_seq = seq + 1;
        self.chunk_end = self.offset + u64::from(header.len);
        self.ticks = Ticks::new(&header);
        self.data_chunk = header.has_data();
        self.last_seen |= header.is_last();
        Some(RawItem::Chunk {
            offset: at,
            header,
            missing,
        })
    }
}

impl Iterator for RawEvents {
    type Item = RawItem;

    fn next(&mut self) -> Option<RawItem> {
        if self.done {
            return None;
        }
        if self.offset < self.chunk_end {
            self.next_event()
        } else {
            self.next_chunk()
        }
    }
}
