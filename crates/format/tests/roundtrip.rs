//! Every event kind written with `ChunkBuilder` reads back as written.

mod common;

use common::tsc3;
use fntrace_format::chunk::{ChunkHeader, FLAG_LAST};
use fntrace_format::event::{self, Kind};
use fntrace_format::{ChunkBuilder, Clock, Event, EventKind, RawEvents, RawItem, ThreadEvents};

fn ev(ns: u64, kind: EventKind, fid: u32) -> Event {
    Event::new(ns, kind, fid)
}

fn read(bytes: Vec<u8>, clock: Clock) -> (Vec<Event>, ThreadEvents) {
    let mut it = ThreadEvents::from_bytes(bytes, "p1/t7.events", Some(7), clock);
    let events: Vec<Event> = it.by_ref().collect();
    (events, it)
}

#[test]
fn every_kind_round_trips() {
    let mut c = ChunkBuilder::new(7, 0, 3000);
    c.entry(1, 3030)
        .entry_caller(2, 3060, 0x0040_1122)
        .exit(2, 3090)
        .unwind(1, 3120)
        .time(3300)
        .lost(17, 3330)
        .call(3, 3600, 300)
        .mark(false, 3603)
        .mark(true, 3606);
    let (events, it) = read(c.bytes(), tsc3());
    assert_eq!(it.damage(), None);
    assert_eq!(it.lost(), 17);
    assert_eq!(
        events,
        [
            ev(1010, EventKind::Entry, 1),
            ev(1020, EventKind::EntryCaller(0x0040_1122), 2),
            ev(1030, EventKind::Exit, 2),
            ev(1040, EventKind::Unwind, 1),
            ev(1110, EventKind::Lost(17), 0),
            ev(1200, EventKind::Call { dur_ns: 100 }, 3),
            ev(1201, EventKind::Mark(false), 0),
            ev(1202, EventKind::Mark(true), 1),
        ]
    );
}

#[test]
fn raw_items_show_words_and_headers() {
    let mut c = ChunkBuilder::new(7, 0, 100);
    c.entry(5, 110).call(5, 120, 4);
    c.set_flags(FLAG_LAST);
    let items: Vec<RawItem> = RawEvents::from_bytes(c.bytes(), "t7.events", Some(7)).collect();
    assert_eq!(items.len(), 3);
    let RawItem::Chunk {
        offset: 0,
        header,
        missing: 0,
    } = items[0]
    else {
        panic!("{:?}", items[0]);
    };
    assert_eq!(
        header,
        ChunkHeader {
            flags: FLAG_LAST,
            tid: 7,
            version: fntrace_format::chunk::VERSION,
            seq: 0,
            len: 24,
            lost: 0,
            start: 100
        }
    );
    assert_eq!(
        items[1],
        RawItem::Event {
            offset: 32,
            kind: Kind::Entry,
            fid: 5,
            delta: 10,
            payload: None,
            tick: 110
        }
    );
    assert_eq!(
        items[2],
        RawItem::Event {
            offset: 40,
            kind: Kind::Call,
            fid: 5,
            // From the chunk's base (its start), not from the previous event.
            delta: 20,
            payload: Some(4),
            tick: 120
        }
    );
    let mut it = ThreadEvents::from_bytes(c.bytes(), "t7.events", Some(7), Clock::monotonic(0));
    assert_eq!(it.by_ref().count(), 2);
    assert!(it.saw_last());
}

#[test]
fn delta_overflow_goes_through_time_events() {
    let clock = Clock::monotonic(0);
    let max = event::MAX_DELTA_FROM_BASE;
    let far = 3000 + max + 1;
    let mut c = ChunkBuilder::new(7, 0, 3000);
    c.entry(1, 3000 + max) // fits exactly
        .entry(2, far + max) // does not fit
        .exit(2, u64::MAX) // far beyond
        .exit(1, 5); // backwards
    let words = c.words();
    assert_eq!(words.len(), 1 + 3 + 3 + 3);
    assert_eq!(event::decode(words[1]), (Kind::Time, 0, 0));
    let (events, it) = read(c.bytes(), clock);
    assert_eq!(it.damage(), None);
    assert_eq!(
        events,
        [
            ev(3000 + max, EventKind::Entry, 1),
            ev(far + max, EventKind::Entry, 2),
            ev(u64::MAX, EventKind::Exit, 2),
            ev(5, EventKind::Exit, 1),
        ]
    );
}

#[test]
fn hand_written_words_decode() {
    // A TIME event in the middle of deltas, written by hand: its delta bits
    // are ignored, later deltas count from its tick (version 2: a delta
    // field is the delta from the base plus one).
    let words = [
        event::encode(Kind::Entry, 9, 6),
        event::encode(Kind::Time, 0, 12345),
        1_000_000,
        event::encode(Kind::Exit, 9, 8),
    ];
    let bytes = hand_written(fntrace_format::chunk::VERSION, &words);
    let (events, it) = read(bytes, Clock::monotonic(0));
    assert_eq!(it.damage(), None);
    assert_eq!(
        events,
        [ev(15, EventKind::Entry, 9), ev(1_000_007, EventKind::Exit, 9)]
    );
}

/// A chunk of thread 7 starting at tick 10, of `version`, holding `words`.
fn hand_written(version: u16, words: &[u64]) -> Vec<u8> {
    let mut bytes = ChunkHeader {
        version,
        tid: 7,
        len: 8 * words.len() as u32,
        start: 10,
        ..Default::default()
    }
    .encode()
    .to_vec();
    for w in words {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    bytes
}

#[test]
fn version_1_chunks_count_from_the_previous_event() {
    // The first version's deltas (files written before version 2) still read.
    let words = [
        event::encode(Kind::Entry, 9, 5),
        event::encode(Kind::Entry, 8, 5),
        event::encode(Kind::Time, 0, 0),
        1_000_000,
        event::encode(Kind::Exit, 8, 7),
        event::encode(Kind::Exit, 9, 3),
    ];
    let bytes = hand_written(fntrace_format::chunk::VERSION_PREVIOUS_EVENT, &words);
    let (events, it) = read(bytes, Clock::monotonic(0));
    assert_eq!(it.damage(), None);
    assert_eq!(
        events,
        [
            ev(15, EventKind::Entry, 9),
            ev(20, EventKind::Entry, 8),
            ev(1_000_007, EventKind::Exit, 8),
            ev(1_000_010, EventKind::Exit, 9)
        ]
    );
}

#[test]
fn many_chunks_keep_their_own_start() {
    let mut bytes = Vec::new();
    for seq in 0..5u32 {
        let start = 10_000 * u64::from(seq);
        let mut c = ChunkBuilder::new(7, seq, start);
        c.entry(seq, start + 1).exit(seq, start + 2);
        bytes.extend(c.bytes());
    }
    let (events, it) = read(bytes, Clock::monotonic(0));
    assert_eq!(it.damage(), None);
    assert_eq!(events.len(), 10);
    assert_eq!(events[8], ev(40_001, EventKind::Entry, 4));
    assert_eq!((it.lost(), it.lost_chunks(), it.saw_last()), (0, 0, false));
}

/// Values written after an entry and an exit (a `DATA` event each, chunk
/// version 3) come back attached to them; the events around are unchanged,
/// and a chunk of version 2 reads a `TIME` word with the data bit as before.
#[test]
fn values_ride_on_their_events() {
    use fntrace_format::event::{DATA_ARGS, DATA_RETVAL};
    use fntrace_format::values::{self, Value, Writer, KIND_SIGNED};
    let payload = |vals: &[i64]| {
        let mut buf = [0u8; 64];
        let mut w = Writer::new(&mut buf);
        for v in vals {
            w.scalar(KIND_SIGNED, 4, *v as u64);
        }
        let n = w.words();
        buf[..n * 8]
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<u64>>()
    };
    let mut c = ChunkBuilder::new(9, 0, 1000);
    c.entry(1, 1001)
        .data(DATA_ARGS, &payload(&[3, 4]))
        .entry(2, 1002)
        .exit(2, 1003)
        .exit(1, 1004)
        .data(DATA_RETVAL, &payload(&[7]));
    assert_eq!(c.header().version, fntrace_format::chunk::VERSION_DATA);
    let events: Vec<Event> = ThreadEvents::from_bytes(
        c.bytes(),
        "t9",
        Some(9),
        fntrace_format::meta::Clock::monotonic(0),
    )
    .collect();
    let shown: Vec<(EventKind, u32, Option<String>)> = events
        .iter()
        .map(|e| (e.kind, e.fid, e.values.as_ref().map(|v| values::list(v))))
        .collect();
    assert_eq!(
        shown,
        [
            (EventKind::Entry, 1, Some("3, 4".to_string())),
            (EventKind::Entry, 2, None),
            (EventKind::Exit, 2, None),
            (EventKind::Exit, 1, Some("7".to_string())),
        ]
    );
    assert_eq!(events[0].ns, 1001);
    assert_eq!(events[3].values.as_deref(), Some(&[Value::Signed(7)][..]));
}
