//! The calls a thread has open, for every reader that follows them (the
//! [`CallBuilder`](crate::CallBuilder), replay's call graph, the Chrome and
//! Perfetto exports), bounded whatever the data says (`docs/FORMAT.md`,
//! "Limits"):
//! - at most [`MAX_DEPTH`] calls are open: an entry deeper than that is
//!   left out and counted ([`CallStack::note`]), so memory does not grow
//!   with a nesting depth read from a file;
//! - the innermost open call of a function is found without walking down
//!   the stack when the function has no open call, so an exit that matches
//!   nothing costs constant time, not a look at every open call. When it
//!   has one, the look stops there, and the caller closes the calls above
//!   it: each frame is looked at once before it is closed.
//!
//! - a loss ([`CallStack::lose`]: events dropped while these calls were
//!   open) marks every call open then: its exit may be among the events
//!   lost, and an exit of its function read later may be another call's
//!   (one entered and left in the gap), so its end is unknown
//!   ([`CallStack::top_spans_loss`]). The calls open at a loss are always
//!   the outermost ones, so the mark is one number.
//!
//! The runtime's own stack holds 131,072 frames per thread (a deeper call
//! is not traced, and counted); a deeper nesting in a file comes from
//! damage (or lost exits).

use rustc_hash::FxHashMap;

/// The most calls a reader keeps open in one thread: the runtime's own
/// limit, so that everything recorded reads back.
pub const MAX_DEPTH: usize = crate::limits::MAX_NESTING;

/// Open calls, innermost last: each a function id and what the reader
/// keeps about it.
#[derive(Debug, Clone)]
pub struct CallStack<T> {
    frames: Vec<(u32, T)>,
    /// How many calls of each function are open.
    open: FxHashMap<u32, u32>,
    left_out: u64,
    /// How many of the outermost frames were open at a loss.
    spanning: usize,
}

impl<T> Default for CallStack<T> {
    fn default() -> Self {
        CallStack {
            frames: Vec::new(),
            open: FxHashMap::default(),
            left_out: 0,
            spanning: 0,
        }
    }
}

impl<T> CallStack<T> {
    /// An empty stack.
    pub fn new() -> Self {
        CallStack::default()
    }

    /// Opens a call of `fid`; `false` (and the call is left out, counted)
    /// when [`MAX_DEPTH`] calls are open already.
    pub fn push(&mut self, fid: u32, value: T) -> bool {
        if self.frames.len() >= MAX_DEPTH {
            self.left_out += 1;
            return false;
        }
        self.frames.push((fid, value));
        *self.open.entry(fid).or_default() += 1;
        true
    }

    /// Closes the innermost call.
    pub fn pop(&mut self) -> Option<(u32, T)> {
        let (fid, value) = self.frames.pop()?;
        self.spanning = self.spanning.min(self.frames.len());
        if let Some(n) = self.open.get_mut(&fid) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(&fid);
            }
        }
        Some((fid, value))
    }

    /// Where the innermost open call of `fid` is (0: the outermost call);
    /// `None`, at once, when no call of `fid` is open.
    pub fn position(&self, fid: u32) -> Option<usize> {
        if !self.open.contains_key(&fid) {
            return None;
        }
        self.frames.iter().rposition(|(f, _)| *f == fid)
    }

    /// What is kept about each open call, the outermost first.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.frames.iter_mut().map(|(_, v)| v)
    }

    /// The innermost open call.
    pub fn last(&self) -> Option<&(u32, T)> {
        self.frames.last()
    }

    /// What is kept about the innermost open call.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.frames.last_mut().map(|(_, v)| v)
    }

    /// The number of open calls.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether no call is open.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Events were lost here: every call open now may have lost its exit.
    pub fn lose(&mut self) {
        self.spanning = self.frames.len();
    }

    /// Whether the innermost open call was open at a loss: its exit may
    /// have been lost, so its end (and its time) is unknown.
    pub fn top_spans_loss(&self) -> bool {
        !self.frames.is_empty() && self.frames.len() <= self.spanning
    }

    /// Entries left out because [`MAX_DEPTH`] calls were open.
    pub fn left_out(&self) -> u64 {
        self.left_out
    }

    /// The damage note of a thread file `label` whose entries were left
    /// out: `p1/t2.events: N calls nested deeper than 131072 left out`.
    pub fn note(&self, label: &str) -> Option<String> {
        (self.left_out > 0).then(|| {
            format!(
                "{label}: {} calls nested deeper than {MAX_DEPTH} left out",
                self.left_out
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn innermost_call_of_a_function() {
        let mut s = CallStack::new();
        for (fid, v) in [(1, 'a'), (2, 'b'), (1, 'c'), (3, 'd')] {
            assert!(s.push(fid, v));
        }
        assert_eq!(s.position(1), Some(2));
        assert_eq!(s.position(2), Some(1));
        assert_eq!(s.position(9), None);
        assert_eq!(s.pop(), Some((3, 'd')));
        assert_eq!(s.pop(), Some((1, 'c')));
        assert_eq!(s.position(1), Some(0));
        assert_eq!(s.last(), Some(&(2, 'b')));
        *s.last_mut().unwrap() = 'B';
        assert_eq!(s.pop(), Some((2, 'B')));
        assert_eq!(s.position(2), None);
        assert_eq!((s.len(), s.note("t")), (1, None));
    }

    #[test]
    fn calls_open_at_a_loss_are_marked() {
        let mut s = CallStack::new();
        assert!(!s.top_spans_loss());
        s.lose();
        s.push(1, ());
        s.push(2, ());
        s.lose();
        s.push(3, ());
        assert!(!s.top_spans_loss(), "entered after the loss");
        s.pop();
        assert!(s.top_spans_loss());
        s.pop();
        s.push(4, ());
        assert!(!s.top_spans_loss(), "the mark went with the call it was on");
        s.pop();
        assert!(s.top_spans_loss());
        s.pop();
        assert!(!s.top_spans_loss() && s.is_empty());
    }

    #[test]
    fn entries_past_the_limit_are_left_out() {
        let mut s = CallStack::new();
        for i in 0..MAX_DEPTH + 3 {
            s.push(7, i);
        }
        assert_eq!((s.len(), s.left_out()), (MAX_DEPTH, 3));
        assert_eq!(s.last(), Some(&(7, MAX_DEPTH - 1)));
        assert_eq!(
            s.note("p1/t2.events").as_deref(),
            Some("p1/t2.events: 3 calls nested deeper than 131072 left out")
        );
        while s.pop().is_some() {}
        assert!(s.is_empty() && s.position(7).is_none());
    }
}
