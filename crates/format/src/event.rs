//! Event words: one 64-bit word per event, sometimes followed by one payload
//! word (`docs/FORMAT.md`, "Events").
//!
//! ```text
//!  63                        27 26                 3 2   0
//! +----------------------------+--------------------+-----+
//! |  delta (37 bits, ticks)    |   fid (24 bits)    |kind |
//! +----------------------------+--------------------+-----+
//! ```
//!
//! Everything here is a pure `const`-friendly function so that the runtime
//! can encode events on its hot path without allocation or I/O.

/// Bits of the event kind (the low bits of a word).
pub const KIND_BITS: u32 = 3;
/// Bits of the function id, above the kind.
pub const FID_BITS: u32 = 24;
/// Shift of the time delta: it takes the top 37 bits.
pub const DELTA_SHIFT: u32 = KIND_BITS + FID_BITS;
/// The largest delta (in ticks) that fits in a word; larger gaps are written
/// as a [`Kind::Time`] event first.
pub const MAX_DELTA: u64 = (1 << 37) - 1;
/// The largest function id.
pub const MAX_FID: u32 = (1 << 24) - 1;

const KIND_MASK: u64 = (1 << KIND_BITS) - 1;

/// The kind of an event (the low three bits of its word).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Function `fid` entered.
    Entry = 0,
    /// Function `fid` returned.
    Exit = 1,
    /// Function `fid` left without returning (`longjmp`, thread end, lost
    /// track).
    Unwind = 2,
    /// An entry with the caller's address as payload (tracer `function`).
    EntryCaller = 3,
    /// No function; the payload is the absolute tick of this event.
    Time = 4,
    /// Events were dropped here; the payload is how many.
    Lost = 5,
    /// A whole call of `fid` that ended at this event; the payload is its
    /// duration in ticks (`--time-filter`).
    Call = 6,
    /// Tracing turned off (`fid` 0) or on (`fid` 1) by a trigger.
    Mark = 7,
}

impl Kind {
    /// Every kind, in the order of their numbers.
    pub const ALL: [Kind; 8] = [
        Kind::Entry,
        Kind::Exit,
        Kind::Unwind,
        Kind::EntryCaller,
        Kind::Time,
        Kind::Lost,
        Kind::Call,
        Kind::Mark,
    ];

    /// The kind stored in the low three bits of `bits` (every value of three
    /// bits is a kind, so this cannot fail).
    pub const fn from_bits(bits: u64) -> Kind {
        match bits & KIND_MASK {
            0 => Kind::Entry,
            1 => Kind::Exit,
            2 => Kind::Unwind,
            3 => Kind::EntryCaller,
            4 => Kind::Time,
            5 => Kind::Lost,
            6 => Kind::Call,
            _ => Kind::Mark,
        }
    }

    /// Whether a payload word follows the event word
    /// (`EntryCaller`, `Time`, `Lost`, `Call`).
    pub const fn has_payload(self) -> bool {
        matches!(self, Kind::EntryCaller | Kind::Time | Kind::Lost | Kind::Call)
    }

    /// The name used in `docs/FORMAT.md` (`ENTRY`, `EXIT`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Entry => "ENTRY",
            Kind::Exit => "EXIT",
            Kind::Unwind => "UNWIND",
            Kind::EntryCaller => "ENTRY_CALLER",
            Kind::Time => "TIME",
            Kind::Lost => "LOST",
            Kind::Call => "CALL",
            Kind::Mark => "MARK",
        }
    }

    /// Bytes one event of this kind takes (8, or 16 with its payload).
    pub const fn size(self) -> usize {
        if self.has_payload() {
            16
        } else {
            8
        }
    }
}

/// The word of an event: `delta << 27 | fid << 3 | kind`.
///
/// The caller guarantees `delta <= MAX_DELTA` and `fid <= MAX_FID`; extra
/// bits are masked off so that they can never corrupt the other fields.
pub const fn encode(kind: Kind, fid: u32, delta: u64) -> u64 {
    ((delta & MAX_DELTA) << DELTA_SHIFT) | word_of(kind, fid)
}

/// The part of an event word without its delta: `fid << 3 | kind`. The
/// runtime precomputes it per site and ORs the delta in with
/// [`with_delta`].
pub const fn word_of(kind: Kind, fid: u32) -> u64 {
    (((fid & MAX_FID) as u64) << KIND_BITS) | kind as u64
}

/// `word` (from [`word_of`]) with `delta` added in its top bits. The caller
/// guarantees `delta <= MAX_DELTA` (see [`delta_fits`]).
pub const fn with_delta(word: u64, delta: u64) -> u64 {
    ((delta & MAX_DELTA) << DELTA_SHIFT) | (word & ((1 << DELTA_SHIFT) - 1))
}

/// Whether a delta fits in an event word; when it does not, a
/// [`Kind::Time`] event ([`TIME_WORD`] and the absolute tick) is written
/// instead of the delta.
pub const fn delta_fits(delta: u64) -> bool {
    delta <= MAX_DELTA
}

/// The delta from tick `prev` to tick `now` when it can be written in an
/// event word: `None` when time went backwards or the gap is larger than
/// [`MAX_DELTA`], in which case a [`Kind::Time`] event must come first.
pub const fn delta(prev: u64, now: u64) -> Option<u64> {
    match now.checked_sub(prev) {
        Some(d) if d <= MAX_DELTA => Some(d),
        _ => None,
    }
}

/// The largest delta from the base that a version 2 event word holds
/// (`chunk::VERSION`): its delta field is the delta plus one, so that no
/// event word is 0 — a zero word is one reserved and never written.
pub const MAX_DELTA_FROM_BASE: u64 = MAX_DELTA - 1;

/// The word of a version 2 event `delta` ticks after its chunk's base
/// (`delta <= MAX_DELTA_FROM_BASE`): never 0.
pub const fn encode_from_base(kind: Kind, fid: u32, delta: u64) -> u64 {
    encode(kind, fid, delta + 1)
}

/// The word of a [`Kind::Time`] event (its payload word, the absolute tick,
/// follows).
pub const TIME_WORD: u64 = word_of(Kind::Time, 0);

/// The word of a [`Kind::Mark`] event: tracing turned on or off.
pub const fn mark_word(on: bool, delta: u64) -> u64 {
    encode(Kind::Mark, on as u32, delta)
}

/// The `fid` bit that makes a `TIME` word a `DATA` event, in chunks of
/// version 3 (`chunk::VERSION_DATA`): values of the event just before it,
/// in as many payload words as its low 16 bits say (`crate::values`).
pub const DATA_BIT: u32 = 1 << 23;
/// `DATA` tag: the arguments of the `ENTRY` just before.
pub const DATA_ARGS: u32 = 1;
/// `DATA` tag: the return value of the `EXIT` just before.
pub const DATA_RETVAL: u32 = 2;
/// `DATA` tag: the arguments of the `ENTRY` just before, as the fast path
/// writes them: a descriptor word, then one word per argument register
/// (`crate::values::decode_registers`).
pub const DATA_REGISTERS: u32 = 3;
/// The most payload words of a `DATA` event.
pub const MAX_DATA_WORDS: u32 = 0xffff;

/// The word of a `DATA` event with tag `tag` ([`DATA_ARGS`],
/// [`DATA_RETVAL`]) and `words` payload words.
pub const fn data_word(tag: u32, words: u32) -> u64 {
    word_of(
        Kind::Time,
        DATA_BIT | (tag & 0x7f) << 16 | (words & MAX_DATA_WORDS),
    )
}

/// The tag and payload words of a `DATA` event, from its `fid` bits (of a
/// `TIME` word in a chunk of version 3); `None` for a plain `TIME`.
pub const fn data_of(fid: u32) -> Option<(u32, u32)> {
    if fid & DATA_BIT == 0 {
        None
    } else {
        Some((fid >> 16 & 0x7f, fid & MAX_DATA_WORDS))
    }
}

/// Splits an event word into its kind, function id and delta.
pub const fn decode(word: u64) -> (Kind, u32, u64) {
    let kind = Kind::from_bits(word);
    let fid = ((word >> KIND_BITS) as u32) & MAX_FID;
    let delta = word >> DELTA_SHIFT;
    (kind, fid, delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_constants() {
        assert_eq!(DELTA_SHIFT, 27);
        assert_eq!(KIND_BITS + FID_BITS + 37, 64);
        assert_eq!(MAX_DELTA, u64::MAX >> DELTA_SHIFT);
    }

    #[test]
    fn every_kind_round_trips() {
        for (i, kind) in Kind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, i);
            assert_eq!(Kind::from_bits(i as u64), kind);
            for fid in [0, 1, 12345, MAX_FID] {
                for delta in [0, 1, 1 << 20, MAX_DELTA] {
                    let word = encode(kind, fid, delta);
                    assert_eq!(decode(word), (kind, fid, delta));
                    assert_eq!(with_delta(word_of(kind, fid), delta), word);
                }
            }
        }
    }

    #[test]
    fn extra_bits_are_masked() {
        let word = encode(Kind::Exit, MAX_FID + 1 + 7, MAX_DELTA + 1 + 5);
        assert_eq!(decode(word), (Kind::Exit, 7, 5));
        assert_eq!(
            with_delta(encode(Kind::Entry, 9, 100), 3),
            encode(Kind::Entry, 9, 3)
        );
    }

    #[test]
    fn payload_kinds() {
        let with: Vec<Kind> = Kind::ALL.into_iter().filter(|k| k.has_payload()).collect();
        assert_eq!(with, [Kind::EntryCaller, Kind::Time, Kind::Lost, Kind::Call]);
        assert_eq!(Kind::Call.size(), 16);
        assert_eq!(Kind::Entry.size(), 8);
        assert_eq!(decode(TIME_WORD), (Kind::Time, 0, 0));
        assert_eq!(decode(mark_word(true, 4)), (Kind::Mark, 1, 4));
        assert_eq!(delta(10, 15), Some(5));
        assert_eq!(delta(15, 10), None);
        assert_eq!(delta(0, MAX_DELTA), Some(MAX_DELTA));
        assert_eq!(delta(0, MAX_DELTA + 1), None);
    }

    #[test]
    fn data_words() {
        let w = data_word(DATA_RETVAL, 3);
        let (kind, fid, delta) = decode(w);
        assert_eq!((kind, delta), (Kind::Time, 0));
        assert_eq!(data_of(fid), Some((DATA_RETVAL, 3)));
        assert_eq!(data_of(0), None);
        assert_ne!(w, 0);
    }
}
