//! `CallBuilder`: events to calls.

use fntrace_format::calls::{calls, Call, CallBuilder, End};
use fntrace_format::meta::Clock;
use fntrace_format::write::ChunkBuilder;
use fntrace_format::{Event, EventKind, ThreadEvents};

fn ev(ns: u64, kind: EventKind, fid: u32) -> Event {
    Event::new(ns, kind, fid)
}
fn entry(ns: u64, fid: u32) -> Event {
    ev(ns, EventKind::Entry, fid)
}
fn exit(ns: u64, fid: u32) -> Event {
    ev(ns, EventKind::Exit, fid)
}
fn whole(end_ns: u64, fid: u32, dur_ns: u64) -> Event {
    ev(end_ns, EventKind::Call { dur_ns }, fid)
}

fn call(fid: u32, parent: Option<u32>, depth: u32, span: (u64, u64), self_ns: u64, end: End) -> Call {
    Call {
        fid,
        parent,
        depth,
        start_ns: span.0,
        end_ns: span.1,
        self_ns,
        end,
        args: None,
        ret: None,
    }
}

#[test]
fn nesting_and_self_time() {
    // main(0) { a(1) { b(2) } a(1) } at 0..100
    let got = calls([
        entry(0, 0),
        entry(10, 1),
        entry(20, 2),
        exit(25, 2),
        exit(40, 1),
        ev(41, EventKind::EntryCaller(0x1234), 1),
        ev(46, EventKind::Mark(true), 1),
        exit(60, 1),
        exit(100, 0),
    ]);
    assert_eq!(
        got,
        [
            call(2, Some(1), 2, (20, 25), 5, End::Returned),
            call(1, Some(0), 1, (10, 40), 25, End::Returned),
            call(1, Some(0), 1, (41, 60), 19, End::Returned),
            call(0, None, 0, (0, 100), 51, End::Returned),
        ]
    );
    assert_eq!(got[3].total_ns(), 100);
}

#[test]
fn unwound_and_unfinished() {
    let mut b = CallBuilder::new();
    let mut out = Vec::new();
    for e in [entry(0, 0), entry(5, 1), entry(6, 2), ev(9, EventKind::Unwind, 1)] {
        b.push(&e, &mut out);
    }
    // Unwinding 1 takes 2 with it.
    assert_eq!(
        out,
        [
            call(2, Some(1), 2, (6, 9), 3, End::Unwound),
            call(1, Some(0), 1, (5, 9), 1, End::Unwound)
        ]
    );
    b.push(&entry(10, 3), &mut out);
    assert_eq!(b.depth(), 2);
    b.finish(30, &mut out);
    assert_eq!(
        out[2..],
        [
            call(3, Some(0), 1, (10, 30), 20, End::Unfinished),
            call(0, None, 0, (0, 30), 30 - 4 - 20, End::Unfinished)
        ]
    );
}

#[test]
fn exit_without_entry_is_ignored() {
    // The trace started inside 7 and 8.
    let got = calls([
        exit(1, 8),
        entry(2, 1),
        exit(3, 1),
        exit(4, 7),
        ev(5, EventKind::Unwind, 9),
    ]);
    assert_eq!(got, [call(1, None, 0, (2, 3), 1, End::Returned)]);
}

#[test]
fn longjmp_like_skipped_exits() {
    // main -> setjmp_caller(1) -> deep(2) -> deeper(3), longjmp back into 1,
    // which then returns normally: 3 and 2 never exit.
    let got = calls([
        entry(0, 0),
        entry(10, 1),
        entry(20, 2),
        entry(30, 3),
        exit(50, 1),
        exit(60, 0),
    ]);
    assert_eq!(
        got,
        [
            call(3, Some(2), 3, (30, 50), 20, End::Unwound),
            call(2, Some(1), 2, (20, 50), 10, End::Unwound),
            call(1, Some(0), 1, (10, 50), 10, End::Returned),
            call(0, None, 0, (0, 60), 20, End::Returned),
        ]
    );
}

#[test]
fn recursion_closes_the_innermost_call() {
    let got = calls([
        entry(0, 5),
        entry(1, 5),
        entry(2, 5),
        exit(3, 5),
        exit(4, 5),
        exit(6, 5),
    ]);
    let spans: Vec<(u32, u64, u64)> = got.iter().map(|c| (c.depth, c.start_ns, c.end_ns)).collect();
    assert_eq!(spans, [(2, 2, 3), (1, 1, 4), (0, 0, 6)]);
    assert_eq!(got[2].self_ns, 3);
}

#[test]
fn time_filter_calls_nest_by_containment() {
    // Written in return order: b (12..18) and c (20..28) inside a (10..30),
    // d (22..25) inside c, then a, then e (40..50) alone; f has the same span
    // as e and returned after it, so it is e's parent.
    let got = calls([
        whole(18, 2, 6),
        whole(25, 4, 3),
        whole(28, 3, 8),
        whole(30, 1, 20),
        whole(50, 5, 10),
        whole(50, 6, 10),
    ]);
    assert_eq!(
        got,
        [
            call(2, Some(1), 1, (12, 18), 6, End::Returned),
            call(4, Some(3), 2, (22, 25), 3, End::Returned),
            call(3, Some(1), 1, (20, 28), 5, End::Returned),
            call(1, None, 0, (10, 30), 6, End::Returned),
            call(5, Some(6), 1, (40, 50), 10, End::Returned),
            call(6, None, 0, (40, 50), 0, End::Returned),
        ]
    );
}

#[test]
fn time_filter_calls_with_overlap_or_mixed_events() {
    // Overlapping spans (damaged data) are not nested; a duration longer
    // than the time saturates at 0.
    let got = calls([whole(20, 1, 10), whole(25, 2, 10), whole(5, 3, 100)]);
    let shape: Vec<(u32, Option<u32>, u32, u64)> = got
        .iter()
        .map(|c| (c.fid, c.parent, c.depth, c.start_ns))
        .collect();
    assert_eq!(shape, [(3, None, 0, 0), (1, None, 0, 10), (2, None, 0, 15)]);

    // Mixed with Entry/Exit: separate trees, whole calls last.
    let got = calls([entry(0, 1), whole(5, 2, 3), exit(10, 1)]);
    assert_eq!(
        got,
        [
            call(1, None, 0, (0, 10), 10, End::Returned),
            call(2, None, 0, (2, 5), 3, End::Returned)
        ]
    );
}

#[test]
fn times_going_backwards_do_not_panic() {
    let got = calls([
        entry(100, 1),
        entry(50, 2),
        exit(10, 2),
        exit(0, 1),
        entry(u64::MAX, 3),
    ]);
    assert!(got
        .iter()
        .all(|c| c.end_ns >= c.start_ns && c.self_ns <= c.total_ns()));
    assert_eq!(got.len(), 3);
}

/// The calls of a thread file made of `chunks`, read as a reader reads it.
fn calls_of_chunks(chunks: &[ChunkBuilder]) -> Vec<Call> {
    let bytes: Vec<u8> = chunks.iter().flat_map(ChunkBuilder::bytes).collect();
    calls(ThreadEvents::from_bytes(
        bytes,
        "t1.events",
        Some(1),
        Clock::monotonic(0),
    ))
}

#[test]
fn calls_open_at_a_loss_end_with_their_exit_lost() {
    // main(0) loops over work(1), which calls leaf(2). While leaf runs in
    // the first work, the buffer is full: the first work's and leaf's exits,
    // the second work's entry and exit, and the third's entry and leaf's
    // are dropped (6 events, counted in the next chunk's header). The leaf
    // and work exits read next are the third work's, not the first's: the
    // calls open at the loss have an unknown end.
    let mut first = ChunkBuilder::new(1, 0, 0);
    first.entry(0, 0).entry(1, 10).entry(2, 20);
    let mut second = ChunkBuilder::new(1, 1, 5000);
    second.set_lost(6);
    second
        .exit(2, 5010)
        .exit(1, 5020)
        .entry(1, 5100)
        .exit(1, 5150)
        .exit(0, 9000);
    let got = calls_of_chunks(&[first, second]);
    assert_eq!(
        got,
        [
            call(2, Some(1), 2, (20, 5010), 4990, End::ExitLost),
            call(1, Some(0), 1, (10, 5020), 20, End::ExitLost),
            call(1, Some(0), 1, (5100, 5150), 50, End::Returned),
            call(0, None, 0, (0, 9000), 9000 - 5010 - 50, End::ExitLost),
        ]
    );
}

#[test]
fn a_loss_is_not_an_unwind() {
    // An exit of a caller after a loss closes the calls above it with their
    // exits lost (not unwound: nothing says they were left without
    // returning); a call entered after the loss and skipped by that exit
    // was unwound (longjmp), as without a loss; so do the missing chunks of
    // a sequence gap.
    let mut first = ChunkBuilder::new(1, 0, 0);
    first.entry(0, 0).entry(1, 10).entry(2, 20);
    let mut third = ChunkBuilder::new(1, 2, 100);
    third.entry(3, 110).exit(1, 120).exit(0, 130);
    let got = calls_of_chunks(&[first, third]);
    let ends: Vec<(u32, End)> = got.iter().map(|c| (c.fid, c.end)).collect();
    assert_eq!(
        ends,
        [
            (3, End::Unwound),
            (2, End::ExitLost),
            (1, End::ExitLost),
            (0, End::ExitLost)
        ]
    );

    // A LOST event in a chunk, and a call open at the end of the thread.
    let mut only = ChunkBuilder::new(1, 0, 0);
    only.entry(0, 0).entry(1, 10).lost(2, 15).exit(1, 20).entry(2, 30);
    let got = calls_of_chunks(&[only]);
    let ends: Vec<(u32, End)> = got.iter().map(|c| (c.fid, c.end)).collect();
    assert_eq!(
        ends,
        [(1, End::ExitLost), (2, End::Unfinished), (0, End::ExitLost)]
    );
}

#[test]
fn a_loss_with_nothing_open_marks_nothing() {
    // The flight recorder's first chunk kept is not chunk 0: the gap comes
    // before any call.
    let mut kept = ChunkBuilder::new(1, 7, 0);
    kept.lost(3, 1).entry(0, 10).exit(0, 20);
    assert_eq!(
        calls_of_chunks(&[kept]),
        [call(0, None, 0, (10, 20), 10, End::Returned)]
    );
}
