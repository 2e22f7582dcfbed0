//! `CallBuilder`: events to calls.

use fntrace_format::calls::{calls, Call, CallBuilder, End};
use fntrace_format::{Event, EventKind};

fn ev(ns: u64, kind: EventKind, fid: u32) -> Event {
    Event { ns, kind, fid }
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
        ev(45, EventKind::Lost(3), 0),
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
