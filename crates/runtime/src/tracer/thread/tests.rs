//! The thread buffer's cursor encoding, and its split: the owner records
//! through its `Owner` while other threads read the `Shared` part.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

use fntrace_format::event::Kind;

use super::*;

const FRAME_BYTES: u64 = std::mem::size_of::<Frame>() as u64;

fn parts(c: u64) -> (u64, usize, u64) {
    (cursor_words(c), cursor_depth(c), c >> COUNT_SHIFT)
}

#[test]
fn a_cursor_word_holds_write_pointer_depth_and_count() {
    let c = cursor_word(0, 5, 3);
    assert_eq!(parts(c), (5, 3, 1));
    // The count goes on from the old word, whatever its other parts.
    assert_eq!(parts(cursor_word(c, 0, 0)), (0, 0, 2));
    assert_eq!(
        parts(cursor_word(c, u32::MAX as u64, SHADOW)),
        (u32::MAX as u64, SHADOW, 2)
    );
}

#[test]
fn the_commit_count_wraps_without_touching_the_rest() {
    let c = cursor_word(255 << COUNT_SHIFT, 7, 2);
    assert_eq!(parts(c), (7, 2, 0));
    let c = cursor_bump(cursor_word(254 << COUNT_SHIFT, 7, 2), 0);
    assert_eq!(parts(c), (7, 2, 0));
}

#[test]
fn the_generic_paths_moves_count_each_commit() {
    let c = cursor_word(0, 10, 4);
    // An event word: the write pointer moves, the depth stays.
    assert_eq!(parts(cursor_bump(c, 1)), (11, 4, 2));
    // A frame pushed, then popped.
    let pushed = cursor_bump(c, FRAME_BYTES << DEPTH_SHIFT);
    assert_eq!(parts(pushed), (10, 5, 2));
    let popped = cursor_bump(pushed, (FRAME_BYTES << DEPTH_SHIFT).wrapping_neg());
    assert_eq!(parts(popped), (10, 4, 3));
}

#[test]
fn the_fast_paths_steps_are_one_commit_each() {
    let c = cursor_word(0, 10, 4);
    assert_eq!(parts(c.wrapping_add(STEP_PUSH)), (11, 5, 2));
    assert_eq!(parts(c.wrapping_add(STEP_POP)), (11, 3, 2));
    assert_eq!(parts(c.wrapping_add(STEP_PAYLOAD)), (12, 4, 2));
    assert_eq!(parts(c.wrapping_add(STEP_FRAME_PUSH)), (11, 5, 2));
    assert_eq!(parts(c.wrapping_add(STEP_FRAME_POP)), (11, 3, 2));
}

#[test]
fn the_profilers_commits_never_carry_into_the_depth() {
    // The last fast entry allowed (count just below the limit) with a
    // full shadow stack: every exit after it still fits in 32 bits.
    let mut c = cursor_word(0, PROFILE_COMMITS - 1, SHADOW - 1).wrapping_add(STEP_FRAME_PUSH);
    for _ in 0..SHADOW {
        c = c.wrapping_add(STEP_FRAME_POP);
    }
    assert_eq!(cursor_depth(c), 0);
    assert_eq!(cursor_words(c), PROFILE_COMMITS + SHADOW as u64);
}

#[test]
fn the_assemblys_fields_are_in_the_shared_part() {
    let shared = std::mem::offset_of!(Thread, shared);
    let end = shared + std::mem::size_of::<Shared>();
    for off in [off::CURSOR, off::BASE, off::FEND, off::PROFILE, off::PROFILE_LEN] {
        assert!((shared..end).contains(&off), "{off}");
    }
    assert!(std::mem::offset_of!(Thread, own) >= end);
    assert!(std::mem::size_of::<Thread>() <= HEAD);
}

/// Settings for a thread to trace with (set once: they are the process's).
fn configure() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if super::super::configured().is_none() {
            super::super::set_config(super::super::Config {
                kind: super::super::Tracer::Graph,
                max_depth: u32::MAX,
                time_filter: 0,
                has_graph: false,
                tracing: AtomicBool::new(true),
                fast: false,
                libcall: Default::default(),
                graph: Default::default(),
                notrace: Default::default(),
                triggers: Vec::new(),
                args: Default::default(),
            });
        }
    });
}

/// The test thread's state, made by its first `enter`.
fn mine() -> &'static Shared {
    configure();
    enter().expect("a thread state").leave();
    // SAFETY: made just above, never unmapped.
    unsafe { &(*current_raw()).shared }
}

#[test]
fn events_go_to_the_chunk_and_a_switch_hands_it_to_the_writer() {
    let s = mine();
    let mut t = enter().expect("not busy");
    let frame = Frame {
        slot: 1,
        fid: 9,
        ..Frame::default()
    };
    t.push_frame(frame);
    t.emit(Kind::Entry, 9, 100, None);
    t.emit(Kind::Call, 9, 110, Some(10));
    assert_eq!(s.depth(), 1);
    let chunk = s.chunk.load(Ordering::Relaxed);
    assert_ne!(chunk, usize::MAX);
    assert_eq!(s.chunks[chunk].state.load(Ordering::Relaxed), FILLING);
    let used = s.used();
    assert!(used >= 3, "{used}");
    assert_eq!(t.pop_frame().map(|f| f.fid), Some(9));
    assert_eq!(s.depth(), 0);
    let seq = s.seq.load(Ordering::Relaxed);
    assert_eq!(t.switch(), Some(false));
    let c = &s.chunks[chunk];
    assert_eq!(c.state.load(Ordering::Relaxed), FULL);
    assert_eq!(c.len.load(Ordering::Relaxed) as usize, used * 8);
    let next = s.chunk.load(Ordering::Relaxed);
    assert_eq!(next, (chunk + 1) % NCHUNKS);
    assert_eq!(s.used(), 0);
    assert_eq!(s.seq.load(Ordering::Relaxed), seq + 1);
    t.leave();
}

#[test]
fn a_nested_entry_finds_the_thread_busy_and_counts_the_call() {
    let s = mine();
    let t = enter().expect("not busy");
    assert_ne!(s.busy.load(Ordering::Relaxed), 0);
    assert_eq!(s.fend.load(Ordering::Relaxed), 0);
    let before = s.untraced.load(Ordering::Relaxed);
    // What a signal handler's traced call would do here.
    assert!(enter().is_none());
    assert!(enter_exit().is_none());
    assert_eq!(s.untraced.load(Ordering::Relaxed), before + 1);
    t.leave();
    assert_eq!(s.busy.load(Ordering::Relaxed), 0);
    enter().expect("not busy any more").leave();
}

#[test]
fn the_owner_records_while_another_thread_reads() {
    let s = mine();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = Arc::clone(&stop);
        let me = s as *const Shared as usize;
        std::thread::spawn(move || {
            let mut seen = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for t in all() {
                    seen = seen.wrapping_add(t.cursor.load(Ordering::Acquire) ^ t.depth() as u64);
                    for c in &t.chunks {
                        seen = seen.wrapping_add(u64::from(c.state.load(Ordering::Acquire)));
                    }
                    seen += u64::from(std::ptr::eq(t, me as *const Shared));
                }
            }
            seen
        })
    };
    let lost = s.lost_total.load(Ordering::Relaxed);
    let mut t = enter().expect("not busy");
    // More than every chunk holds: with no writer, the rest is dropped
    // and counted.
    let events = (NCHUNKS * s.cap) as u64;
    for i in 0..events {
        t.emit(Kind::Entry, 1, i, None);
    }
    t.leave();
    stop.store(true, Ordering::Relaxed);
    reader.join().expect("the reader");
    let full = s
        .chunks
        .iter()
        .filter(|c| c.state.load(Ordering::Relaxed) != FREE)
        .count();
    assert_eq!(full, NCHUNKS);
    assert!(s.lost_total.load(Ordering::Relaxed) > lost);
    // Emptied again, as before a new session.
    s.reset_buffers();
    assert!(s.chunks.iter().all(|c| c.state.load(Ordering::Relaxed) == FREE));
    assert_eq!(s.chunk.load(Ordering::Relaxed), usize::MAX);
    assert_eq!(s.lost_total.load(Ordering::Relaxed), 0);
}
