//! The events of several threads merged by time: a k-way merge of the
//! per-thread streams, holding one event per thread (bounded memory).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use fntrace_format::read::Event;

use crate::narrow::Narrowed;

/// One thread's stream and its next event.
struct Stream {
    tid: u32,
    events: Narrowed,
    next: Option<Event>,
}

/// Threads merged by event time; ties go to the thread given first.
pub struct Merge {
    streams: Vec<Stream>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    /// The thread whose event was last taken, to put back in the heap.
    taken: Option<usize>,
}

impl Merge {
    pub fn new(threads: Vec<(u32, Narrowed)>) -> Merge {
        let mut streams: Vec<Stream> = threads
            .into_iter()
            .map(|(tid, events)| Stream {
                tid,
                events,
                next: None,
            })
            .collect();
        let mut heap = BinaryHeap::with_capacity(streams.len());
        for (i, s) in streams.iter_mut().enumerate() {
            s.next = s.events.next();
            if let Some(ev) = &s.next {
                heap.push(Reverse((ev.ns, i)));
            }
        }
        Merge {
            streams,
            heap,
            taken: None,
        }
    }

    /// The next event of all threads: the thread's index, and the event.
    pub fn next_event(&mut self) -> Option<(usize, Event)> {
        if let Some(i) = self.taken.take() {
            if let Some(ev) = &self.streams[i].next {
                self.heap.push(Reverse((ev.ns, i)));
            }
        }
        let Reverse((_, i)) = self.heap.pop()?;
        let ev = self.advance(i)?;
        self.taken = Some(i);
        Some((i, ev))
    }

    /// The next event of thread `i` (the one `next_event` just returned
    /// an event of), without taking it.
    pub fn peek(&self, i: usize) -> Option<&Event> {
        self.streams[i].next.as_ref()
    }

    /// Takes the next event of thread `i`, out of time order: for an entry
    /// immediately followed by its exit.
    pub fn take(&mut self, i: usize) -> Option<Event> {
        debug_assert_eq!(self.taken, Some(i));
        self.advance(i)
    }

    fn advance(&mut self, i: usize) -> Option<Event> {
        let s = &mut self.streams[i];
        let ev = s.next.take();
        s.next = s.events.next();
        ev
    }

    /// The tid of thread `i`.
    pub fn tid(&self, i: usize) -> u32 {
        self.streams[i].tid
    }

    /// The name of thread `i`'s file in damage notes.
    pub fn label(&self, i: usize) -> &str {
        self.streams[i].events.label()
    }

    /// The number of threads.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// The damage notes of the threads, once they were read to the end.
    pub fn damage(&self) -> Vec<String> {
        self.streams.iter().flat_map(|s| s.events.damage()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fntrace_format::meta::Clock;
    use fntrace_format::read::EventKind;
    use fntrace_format::write::ChunkBuilder;

    use fntrace_format::read::ThreadEvents;

    fn thread(tid: u32, ticks: &[u64]) -> (u32, Narrowed) {
        let mut c = ChunkBuilder::new(tid, 0, 0);
        for &t in ticks {
            c.entry(tid, t);
        }
        let events = ThreadEvents::from_bytes(c.bytes(), format!("t{tid}"), Some(tid), Clock::monotonic(0));
        (tid, Narrowed::all(events))
    }

    #[test]
    fn merges_by_time_then_thread_order() {
        let mut m = Merge::new(vec![
            thread(1, &[5, 10, 20]),
            thread(2, &[1, 10, 30]),
            thread(3, &[]),
        ]);
        let mut seen = Vec::new();
        while let Some((i, ev)) = m.next_event() {
            assert_eq!(ev.kind, EventKind::Entry);
            seen.push((m.tid(i), ev.ns));
        }
        assert_eq!(seen, [(2, 1), (1, 5), (1, 10), (2, 10), (1, 20), (2, 30)]);
        assert!(m.damage().is_empty());
    }

    #[test]
    fn take_consumes_out_of_order() {
        let mut m = Merge::new(vec![thread(1, &[1, 50]), thread(2, &[10])]);
        let (i, ev) = m.next_event().unwrap();
        assert_eq!((m.tid(i), ev.ns), (1, 1));
        assert_eq!(m.peek(i).map(|e| e.ns), Some(50));
        assert_eq!(m.take(i).map(|e| e.ns), Some(50));
        let (i, ev) = m.next_event().unwrap();
        assert_eq!((m.tid(i), ev.ns), (2, 10));
        assert!(m.next_event().is_none());
    }
}
