//! Damaged thread files: every event before the damage, a note, never a
//! panic.

mod common;

use common::{tsc3, Rng, TempDir};
use fntrace_format::calls;
use fntrace_format::chunk::{ChunkHeader, HEADER_LEN};
use fntrace_format::event::{self, Kind};
use fntrace_format::{ChunkBuilder, Clock, Event, EventKind, RawEvents, ThreadEvents};

const LABEL: &str = "p1/t7.events";

/// Three chunks of thread 7, the offsets where they end, and the events
/// of the first 0, 1, 2, 3 chunks.
fn sample() -> (Vec<u8>, Vec<usize>, Vec<Vec<Event>>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    let mut prefixes = vec![Vec::new()];
    for seq in 0..3u32 {
        let start = 3000 + 3000 * u64::from(seq);
        let mut c = ChunkBuilder::new(7, seq, start);
        c.entry(1, start + 3)
            .entry_caller(2, start + 6, 0xdead_beef)
            .call(3, start + 9, 3)
            .exit(2, start + 12)
            .lost(2, start + 15)
            .exit(1, start + 18);
        bytes.extend(c.bytes());
        ends.push(bytes.len());
        let (events, damage) = read_all(bytes.clone(), true);
        assert_eq!(damage, None);
        prefixes.push(events);
    }
    (bytes, ends, prefixes)
}

/// The words of thread file `bytes`, with the file length known or not.
fn raw(bytes: Vec<u8>, len_known: bool) -> RawEvents {
    if len_known {
        RawEvents::from_bytes(bytes, LABEL, Some(7))
    } else {
        RawEvents::from_reader(std::io::Cursor::new(bytes), None, LABEL, Some(7))
    }
}

/// Reads `bytes` with the file length known or not.
fn read_all(bytes: Vec<u8>, len_known: bool) -> (Vec<Event>, Option<String>) {
    let mut it = ThreadEvents::new(raw(bytes, len_known), tsc3());
    let events: Vec<Event> = it.by_ref().collect();
    assert!(it.next().is_none(), "iteration stays stopped");
    (events, it.damage().map(str::to_string))
}

#[test]
fn the_sample_reads_whole() {
    let (bytes, _, prefixes) = sample();
    let (events, damage) = read_all(bytes, true);
    assert_eq!(damage, None);
    assert_eq!(events.len(), 18);
    assert_eq!(events, prefixes[3]);
    assert_eq!(events[0], Event::new(1001, EventKind::Entry, 1));
}

#[test]
fn truncation_at_every_offset() {
    let (bytes, ends, prefixes) = sample();
    for cut in 0..=bytes.len() {
        let whole_chunks = ends.iter().filter(|&&e| e <= cut).count();
        let boundary = cut == 0 || ends.contains(&cut);
        let chunk_start = if whole_chunks == 0 {
            0
        } else {
            ends[whole_chunks - 1]
        };

        // Length known: a cut chunk is refused at its header.
        let (events, damage) = read_all(bytes[..cut].to_vec(), true);
        assert_eq!(events, prefixes[whole_chunks], "cut {cut}");
        if boundary {
            assert_eq!(damage, None, "cut {cut}");
        } else {
            let damage = damage.unwrap_or_else(|| panic!("cut {cut}: no damage"));
            assert!(
                damage.starts_with(&format!("{LABEL}: offset {chunk_start}: ")),
                "cut {cut}: {damage}"
            );
        }

        // Length unknown: the events of the cut chunk before the cut come too.
        let (events, damage) = read_all(bytes[..cut].to_vec(), false);
        let all = &prefixes[3];
        assert!(
            events.len() <= all.len() && events[..] == all[..events.len()],
            "cut {cut}"
        );
        assert!(events.len() >= prefixes[whole_chunks].len(), "cut {cut}");
        assert_eq!(damage.is_none(), boundary, "cut {cut}: {damage:?}");
    }
}

#[test]
fn truncated_files_on_disk() {
    let tmp = TempDir::new("trunc");
    let (bytes, ends, prefixes) = sample();
    let path = tmp.path().join("t7.events");
    for cut in [
        0,
        5,
        HEADER_LEN,
        ends[0],
        ends[0] + 1,
        ends[1] + 40,
        bytes.len() - 1,
        bytes.len(),
    ] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let mut it = ThreadEvents::open(&path, LABEL, Some(7), tsc3());
        let events: Vec<Event> = it.by_ref().collect();
        let whole = ends.iter().filter(|&&e| e <= cut).count();
        assert_eq!(events, prefixes[whole], "cut {cut}");
        assert_eq!(
            it.damage().is_none(),
            cut == 0 || ends.contains(&cut),
            "cut {cut}"
        );
    }
    let mut it = ThreadEvents::open(&tmp.path().join("t8.events"), "p1/t8.events", Some(8), tsc3());
    assert_eq!(it.next(), None);
    assert!(it.damage().unwrap().starts_with("p1/t8.events: cannot read: "));
}

fn expect_damage(bytes: Vec<u8>, events: usize, note: &str) {
    let (got, damage) = read_all(bytes, true);
    assert_eq!(got.len(), events, "{damage:?}");
    let damage = damage.expect("a damage note");
    assert!(damage.contains(note), "{damage} does not contain {note}");
}

#[test]
fn header_damage() {
    let (bytes, ends, _) = sample();
    let second = ends[0];
    let edit = |at: usize, value: &[u8]| {
        let mut b = bytes.clone();
        b[at..at + value.len()].copy_from_slice(value);
        b
    };
    expect_damage(edit(second, b"FNTX"), 6, &format!("offset {second}: bad magic"));
    expect_damage(edit(second + 4, &[9, 0]), 6, "unsupported chunk version 9");
    expect_damage(
        edit(second + 16, &[4, 0, 0, 0]),
        6,
        "chunk length 4 is not a multiple of 8",
    );
    expect_damage(
        edit(second + 16, &[0, 0, 1, 0]),
        6,
        "chunk length 65536 goes past the end of the file",
    );
    expect_damage(
        edit(second + 8, &[8, 0, 0, 0]),
        6,
        "chunk of thread 8 in the file of thread 7",
    );
    expect_damage(
        edit(second + 12, &[0, 0, 0, 0]),
        6,
        "chunk sequence number 0 goes back (expected 1 or more)",
    );
    expect_damage(edit(0, b"\0\0\0\0"), 0, "offset 0: bad magic");
    let mut trailing = bytes.clone();
    trailing.extend_from_slice(b"FNTC\x01");
    expect_damage(trailing, 18, "truncated chunk header (5 of 32 bytes)");
}

#[test]
fn payload_word_missing_at_the_end_of_a_chunk() {
    for kind in [Kind::EntryCaller, Kind::Time, Kind::Lost, Kind::Call] {
        let mut bytes = ChunkHeader {
            tid: 7,
            len: 16,
            start: 3000,
            ..Default::default()
        }
        .encode()
        .to_vec();
        bytes.extend_from_slice(&event::encode(Kind::Entry, 1, 3).to_le_bytes());
        bytes.extend_from_slice(&event::encode(kind, 2, 3).to_le_bytes());
        // The next chunk's header would be taken for the payload otherwise.
        bytes.extend(ChunkBuilder::new(7, 1, 3000).entry(3, 3003).bytes());
        expect_damage(
            bytes,
            1,
            &format!("offset 40: {} event without its payload word", kind.name()),
        );
    }
}

#[test]
fn lost_counts_and_sequence_gaps() {
    let mut bytes = Vec::new();
    let mut c = ChunkBuilder::new(7, 2, 3000); // chunks 0 and 1 missing
    c.entry(1, 3003);
    bytes.extend(c.bytes());
    let mut c = ChunkBuilder::new(7, 3, 6000);
    c.set_lost(5).exit(1, 6003);
    bytes.extend(c.bytes());
    let mut c = ChunkBuilder::new(7, 6, 9000); // 4, 5 missing, and 9 events
    c.set_lost(9).lost(4, 9003);
    bytes.extend(c.bytes());
    let mut it = ThreadEvents::from_bytes(bytes, LABEL, Some(7), tsc3());
    let events: Vec<Event> = it.by_ref().collect();
    let lost = |ns, n| Event::new(ns, EventKind::Lost(n), 0);
    assert_eq!(
        events,
        [
            lost(1000, 0),
            Event::new(1001, EventKind::Entry, 1),
            lost(2000, 5),
            Event::new(2001, EventKind::Exit, 1),
            lost(3000, 0),
            lost(3000, 9),
            lost(3001, 4),
        ]
    );
    assert_eq!((it.lost(), it.lost_chunks(), it.damage()), (18, 4, None));
}

#[test]
fn empty_file_is_no_events() {
    let (events, damage) = read_all(Vec::new(), true);
    assert!(events.is_empty() && damage.is_none());
}

fn corrupt(rng: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        if bytes.is_empty() {
            break;
        }
        let at = rng.below(bytes.len() as u64) as usize;
        match rng.below(6) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = rng.next() as u8,
            2 => bytes.truncate(at),
            3 => bytes.insert(at, rng.next() as u8),
            4 => {
                // A whole random word, aligned, often over a header field.
                let at = at & !7;
                let end = (at + 8).min(bytes.len());
                let w = rng.next().to_le_bytes();
                bytes[at..end].copy_from_slice(&w[..end - at]);
            }
            _ => {
                bytes.remove(at);
            }
        }
    }
    bytes
}

#[test]
fn random_corruption_never_panics() {
    let (bytes, _, prefixes) = sample();
    let all = &prefixes[3];
    let mut rng = Rng::new(0x5eed_f00d);
    let clocks = [
        tsc3(),
        Clock::monotonic(0),
        Clock {
            tick0: u64::MAX,
            tsc_hz: Some(1e-300),
            ..tsc3()
        },
    ];
    for case in 0..5000 {
        let bad = corrupt(&mut rng, bytes.clone());
        let mut it = ThreadEvents::new(raw(bad.clone(), case % 2 == 0), clocks[case % 3].clone());
        let events: Vec<Event> = it.by_ref().take(1000).collect();
        // Every event word takes 8 bytes at least: corruption cannot invent
        // more events than the file holds (Lost ones come from headers).
        assert!(events.len() <= bad.len() / 8 + 2, "case {case}");
        if let Some(d) = it.damage() {
            assert!(d.starts_with(LABEL) && !d.contains('\n'), "case {case}: {d}");
        }
        let _ = calls::calls(events.iter().cloned());
        if bad == bytes && case % 3 == 0 {
            assert_eq!(&events, all);
        }
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(42);
    for case in 0..2000 {
        // Start with a valid magic and version half the time so that the
        // reader gets past the header check.
        let len = rng.below(200) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if case % 2 == 0 && len >= 6 {
            bytes[..6].copy_from_slice(b"FNTC\x01\x00");
        }
        let mut it = ThreadEvents::from_bytes(bytes, LABEL, None, tsc3());
        let events: Vec<Event> = it.by_ref().collect();
        assert!(events.len() <= len / 8 + 2);
    }
}
