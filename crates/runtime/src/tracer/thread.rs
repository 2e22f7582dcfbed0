//! A traced thread's own state: its event buffer (a ring of chunks the
//! writer empties), its shadow stack of hijacked returns, and its profile
//! table. Made on the thread's first traced call, in memory from `mmap`
//! (safe in a signal handler), found through one thread-local pointer.
//!
//! Only the owning thread writes events and frames; the writer thread takes
//! chunks the owner marked full (`FULL` → `WRITING` → `FREE`), and at the end
//! reads the prefix of the chunk being filled (up to the cursor's write
//! pointer). Nothing on the recording path locks or makes a system call.
//!
//! **Signals.** A signal handler may call traced functions at any
//! instruction of the thread, the tracer's own included. The fast paths
//! (`asm.rs`) are made for that: each writes its event past the write
//! pointer and its frame past the depth — places nobody reads yet — and
//! publishes both with one compare-exchange of the [`Thread::cursor`] word
//! (write pointer and depth together). A handler that ran in between moved
//! the cursor: the exchange fails and the path starts again, after the
//! handler's events. The exchange must see every handler's work: the
//! write pointer moves with each event, and a commit count in the top byte
//! changes with each commit, event or not. The profiler's fast paths write
//! no event, and a storm chaining 64 handlers (4 commits each) into the few
//! instructions before their exchange brought that byte back to where it
//! was, with the frame being written overwritten: so they count their
//! commits in the write pointer's bits too (their threads never take a
//! chunk), and fall back to the generic path, which sets that count back
//! to 0, before it could carry into the depth. A handler that never
//! returns (`siglongjmp`) leaves nothing half-published. Event times count from a base that only the
//! generic path moves (chunk version 2), so no "last event" time has to be
//! published with them. The generic (Rust) paths are exclusive instead:
//! while one runs, `busy` holds its stack pointer and the fast paths are
//! closed (`fend` 0); a handler's traced call meanwhile is not traced
//! (counted in `untraced`), and a generic path left by `siglongjmp` is
//! recognised by a stack pointer above the one it recorded.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use fntrace_format::event::{self, Kind, MAX_DELTA_FROM_BASE};

use super::profile::Cell as ProfileCell;
use crate::sys;

/// Chunk states.
pub const FREE: u32 = 0;
/// Being filled by its thread.
pub const FILLING: u32 = 1;
/// Full, waiting for the writer.
pub const FULL: u32 = 2;
/// Being written out.
pub const WRITING: u32 = 3;

/// Chunks per thread.
pub const NCHUNKS: usize = 16;
/// Frames in the shadow stack: deeper calls are not traced (counted, and
/// said). 8 MiB of address space a thread, touched only as deep as calls
/// go: a 100,000-deep recursion is recorded whole.
pub const SHADOW: usize = fntrace_format::limits::MAX_NESTING;

/// Return addresses kept for frames ended without their return.
pub const PARKED: usize = 1024;

/// Frame flags.
pub const F_HIJACKED: u32 = 1;
/// The return address was put back (an exception or `pthread_exit` is
/// unwinding): the frame ends without passing the return trampoline.
pub const F_RESTORED: u32 = 2;
/// The frame is a `--graph-function` frame.
pub const F_GRAPH: u32 = 4;
/// The frame set a new depth limit (trigger `depth=N`).
pub const F_DEPTH: u32 = 8;
/// A `--notrace` function: not recorded, nor anything it calls.
pub const F_NOTRACE: u32 = 16;
/// Put back for a forced unwind (`pthread_exit`): the frame ends without
/// returning (`UNWIND`), as C frames do.
pub const F_FORCED: u32 = 32;

/// One part of a thread's buffer.
#[repr(C)]
pub struct Chunk {
    /// `FREE`, `FILLING`, `FULL` or `WRITING`.
    pub state: AtomicU32,
    /// Bytes of events written (published after each event).
    pub len: AtomicU32,
    /// Sequence number in the thread.
    pub seq: AtomicU32,
    /// Events dropped just before it.
    pub lost: AtomicU32,
    /// Chunk flags (`fntrace_format::chunk::FLAG_*`).
    pub flags: AtomicU32,
    /// Tick its first delta counts from.
    pub start: AtomicU64,
    /// Its events.
    pub data: *mut u64,
}

/// One traced call in progress.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct Frame {
    /// The stack slot of the function's return address.
    pub slot: usize,
    /// The real return address, if hijacked.
    pub orig: usize,
    /// Tick at entry.
    pub start: u64,
    /// The function's total time in this thread when the call began
    /// (profiler: `profile.rs`, "Recursion").
    pub total0: u64,
    /// The function.
    pub fid: u32,
    /// `F_*`.
    pub flags: u32,
    /// The depth limit before this frame changed it.
    pub saved_max: u32,
    /// The address of the function's profile cell in this thread, or of
    /// the sink (profiler: `profile.rs`); 0 in other tracers' frames.
    pub cell: usize,
    /// Up to 64 bytes (a shift in the fast paths).
    pub pad: u64,
}

// The fast paths' view of a frame.
const _: () = assert!(std::mem::size_of::<Frame>() == 64);
const _: () = assert!(std::mem::offset_of!(Frame, start) == 16);
const _: () = assert!(std::mem::offset_of!(Frame, total0) == 24);
const _: () = assert!(std::mem::offset_of!(Frame, fid) == 32);
const _: () = assert!(std::mem::offset_of!(Frame, flags) == 36);
const _: () = assert!(std::mem::offset_of!(Frame, cell) == 48);

/// Offsets of [`Thread`] fields, for the assembly.
pub mod off {
    use super::Thread;
    use std::mem::offset_of;
    /// `cursor`.
    pub const CURSOR: usize = offset_of!(Thread, cursor);
    /// `base`.
    pub const BASE: usize = offset_of!(Thread, base);
    /// `fend`.
    pub const FEND: usize = offset_of!(Thread, fend);
    /// `profile`.
    pub const PROFILE: usize = offset_of!(Thread, profile);
    /// `profile_len`.
    pub const PROFILE_LEN: usize = offset_of!(Thread, profile_len);
}

/// The cursor: bits 0–31 the write pointer, in words from the thread's
/// head (0: no chunk taken); bits 32–55 the depth, in bytes of frames
/// (depth × 64); bits 56–63 a count of commits, bumped by every one, so
/// that a signal handler that recorded nothing (its events dropped) and
/// left the depth as it was still changes the word, and the code it
/// interrupted sees it changed.
pub const DEPTH_SHIFT: u32 = 32;
/// The depth's bits (in bytes), once shifted down.
pub const DEPTH_MASK: u64 = (1 << 24) - 1;
/// Where the commit count starts.
pub const COUNT_SHIFT: u32 = 56;
const FRAME: u64 = std::mem::size_of::<Frame>() as u64;
const _: () = assert!((SHADOW as u64) * FRAME < DEPTH_MASK && DEPTH_MASK << DEPTH_SHIFT < 1 << COUNT_SHIFT);
/// The cursor step of an event word and a frame pushed.
pub const STEP_PUSH: u64 = 1 + (FRAME << DEPTH_SHIFT) + (1 << COUNT_SHIFT);
/// The cursor step of an event word and a frame popped.
pub const STEP_POP: u64 = (1 + (1 << COUNT_SHIFT)) - (FRAME << DEPTH_SHIFT);
/// The cursor step of an event word and its payload.
pub const STEP_PAYLOAD: u64 = 2 + (1 << COUNT_SHIFT);
/// The cursor step of a frame pushed without an event (the profiler): its
/// threads take no chunk, and the write pointer's bits count its commits
/// (module doc, "Signals").
pub const STEP_FRAME_PUSH: u64 = 1 + (FRAME << DEPTH_SHIFT) + (1 << COUNT_SHIFT);
/// The cursor step of a frame popped without an event (the profiler).
pub const STEP_FRAME_POP: u64 = (1 + (1 << COUNT_SHIFT)) - (FRAME << DEPTH_SHIFT);
/// The profiler's fast entries run while its commit count (the cursor's
/// low 32 bits) is below this: the exits after them cannot carry it into
/// the depth, and the generic path sets it back to 0.
pub const PROFILE_COMMITS: u64 = 1 << 31;
/// `fend` while the profiler's fast paths may run: they write no event,
/// and the event-writing fast paths, which compare the write pointer (at
/// least the thread's address) with it, never pass.
pub const FEND_PROFILE: usize = 1;
/// The largest per-thread mapping the cursor's word offset can address.
pub const MAX_DATA: usize = (u32::MAX as usize) * 8;
/// Where the sentinel frame is, from the thread's head.
pub const HEAD: usize = std::mem::size_of::<Thread>().next_multiple_of(4096);
/// Where the frames are, from the thread's head.
pub const FRAMES_OFF: usize = HEAD + FRAME as usize;
/// Where the chunks are, from the thread's head.
pub const CHUNKS_OFF: usize = (FRAMES_OFF + SHADOW * FRAME as usize + PARKED * 16).next_multiple_of(4096);

/// A traced thread. The first fields are read and written by the fast
/// paths in assembly (`asm.rs`) at fixed offsets (see `off`).
#[repr(C)]
pub struct Thread {
    /// Where the next event word goes (the low 48 bits; 0 while no chunk
    /// is taken) and how many frames are in use (above): one word, so that
    /// an event and a frame are published together (module doc).
    pub cursor: AtomicU64,
    /// The end of the current chunk minus room for one event with its
    /// payload and a `TIME` event (0 while no chunk is taken). Whoever
    /// changes it clears `fend`; `allow_fast` sets that again.
    pub wend: usize,
    /// The tick event deltas count from: the chunk's start or the last
    /// `TIME` event's (moved only by the generic path).
    pub base: u64,
    /// The shadow stack.
    pub frames: *mut Frame,
    /// Recorded frames (for `--depth`; the fast paths, which run only
    /// without a depth limit, leave it alone).
    pub recorded: u32,
    /// The end the fast paths may write to: `wend` while they may run
    /// (fast mode, not busy, not ended), else 0 — one comparison in the
    /// assembly checks both that they may run and that the chunk has room.
    /// The profiler's fast paths, which write no events, run while it is
    /// [`FEND_PROFILE`].
    pub fend: AtomicUsize,
    /// Inside the tracer's generic path: its stack pointer then, else 0
    /// (a signal handler's calls meanwhile are not traced).
    pub busy: usize,
    /// The tracer's settings allow the fast paths.
    pub fast_mode: bool,
    /// ... and they are the profiler's (`fend` is then [`FEND_PROFILE`]).
    pub fast_profile: bool,
    /// The `GENERATION` of the settings `fast_mode` and `max_depth` came from.
    pub generation: u32,
    /// Its id.
    pub tid: u32,
    /// The thread has ended (its key destructor ran).
    pub dead: AtomicBool,
    /// Everything it recorded was written and its memory may go.
    pub drained: AtomicBool,
    /// Words per chunk.
    pub cap: usize,
    /// The current chunk, or `usize::MAX` while dropping.
    pub chunk: usize,
    /// The chunk to try next while dropping.
    pub next_chunk: usize,
    /// The next chunk's sequence number.
    pub seq: u32,
    /// Events dropped since the last chunk started.
    pub dropped: u64,
    /// Events dropped in total.
    pub lost_total: AtomicU64,
    /// Keep the oldest chunks? No: overwrite them (flight recorder).
    pub flight: bool,
    /// The chunks.
    pub chunks: [Chunk; NCHUNKS],
    /// Deepest recorded nesting allowed.
    pub max_depth: u32,
    /// Open `--graph-function` frames.
    pub inside: u32,
    /// Open `--notrace` frames.
    pub hidden: u32,
    /// Calls not traced: the shadow stack was full, or a signal handler
    /// called them while the thread was inside the tracer's generic path.
    pub untraced: AtomicU64,
    /// The profile table (one cell per function id).
    pub profile: AtomicPtr<ProfileCell>,
    /// Its length.
    pub profile_len: AtomicU64,
    /// The next thread in the registry.
    pub next: *mut Thread,
    /// Real return addresses of frames ended without their return, by
    /// slot (a ring of [`PARKED`] pairs, in the data mapping): see `park`.
    pub parked: *mut [usize; 2],
    /// Pairs parked so far (the next goes at this modulo `PARKED`).
    pub parked_count: usize,
    /// The mapping holding frames, parked pairs and chunk data.
    pub data: *mut u8,
    /// Its size.
    pub data_len: usize,
}

/// Every thread that ever traced, newest first (never unlinked).
pub static THREADS: AtomicPtr<Thread> = AtomicPtr::new(std::ptr::null_mut());

/// The buffer geometry, set at start.
pub static CHUNK_BYTES: AtomicU64 = AtomicU64::new(256 * 1024);
/// Flight-recorder mode.
pub static FLIGHT: AtomicBool = AtomicBool::new(false);
/// Set after the final flush: nothing more is recorded.
pub static FINISHED: AtomicBool = AtomicBool::new(false);

/// This thread's state, if it has one.
#[inline(always)]
pub fn current_raw() -> *mut Thread {
    super::asm::tls_get() as *mut Thread
}

/// Enters the tracer's generic path on this thread at a call's entry: its
/// state (made on first use), marked busy, or `None` if the thread is
/// already inside the tracer (a signal handler interrupted it: the call is
/// counted as not traced), has ended, or tracing has finished.
pub fn enter() -> Option<&'static mut Thread> {
    enter_at(true)
}

/// [`enter`] at an exit site: a call found inside the tracer is not counted
/// again (its entry was, or was traced before the tracer was entered).
pub fn enter_exit() -> Option<&'static mut Thread> {
    enter_at(false)
}

fn enter_at(entry: bool) -> Option<&'static mut Thread> {
    let mut p = current_raw();
    if p.is_null() {
        if FINISHED.load(Ordering::Relaxed) {
            return None;
        }
        p = create()?;
    }
    // SAFETY: `p` is this thread's state, only ever used by this thread
    // (the writer touches only atomics and full chunks); `busy` keeps a
    // signal handler from using it while we do.
    let t = unsafe { &mut *p };
    if t.busy != 0 && !t.reclaim() {
        t.untraced.fetch_add(u64::from(entry), Ordering::Relaxed);
        return None;
    }
    if t.dead.load(Ordering::Relaxed) {
        return None;
    }
    let generation = super::GENERATION.load(Ordering::Acquire);
    if t.generation != generation {
        // New settings (`fntrace ctl`): this thread's copy of them.
        let cfg = super::config();
        t.generation = generation;
        t.fast_mode = cfg.fast;
        t.fast_profile = cfg.fast && cfg.kind == super::Tracer::Profile;
        if cfg.kind == super::Tracer::Profile {
            // The profiler's exits add to their caller's cell: frames of
            // another tracer's session (attached before) get the sink.
            for i in 0..t.depth() {
                let f = t.frame(i);
                if f.cell == 0 {
                    f.cell = super::profile::sink();
                }
            }
        }
        t.recount(Some(cfg.max_depth));
    }
    t.busy = sys::stack_pointer();
    t.fend.store(0, Ordering::Relaxed);
    if t.fast_profile
        && t.chunk == usize::MAX
        && t.cursor.load(Ordering::Relaxed) as u32 as u64 >= PROFILE_COMMITS
    {
        // The profiler's commit count (no chunk is taken): back to 0.
        t.set_cursor(0, t.depth());
    }
    Some(t)
}

/// The state for the paths that must run even inside the tracer (a
/// hijacked function returning, an unwinder starting): marked busy, with
/// the previous mark to give back to [`Thread::leave_to`].
#[inline]
pub fn for_return() -> Option<(&'static mut Thread, usize)> {
    let p = current_raw();
    if p.is_null() {
        return None;
    }
    // SAFETY: as in `enter`; these paths run only when a traced frame
    // returns or an unwinder starts, never inside the tracer's own code
    // (a stale mark left by `siglongjmp` is reclaimed).
    let t = unsafe { &mut *p };
    let was = if t.busy != 0 && t.reclaim() { 0 } else { t.busy };
    t.busy = sys::stack_pointer();
    t.fend.store(0, Ordering::Relaxed);
    Some((t, was))
}

impl Thread {
    /// Leaves the tracer.
    #[inline]
    pub fn leave(&mut self) {
        self.leave_to(0);
    }

    /// Leaves a path entered with [`for_return`], giving back its mark.
    #[inline]
    pub fn leave_to(&mut self, was: usize) {
        self.busy = was;
        self.allow_fast();
    }

    /// Whether the busy mark is stale: the generic path that set it was
    /// left without finishing (a signal handler interrupted it and jumped
    /// out with `siglongjmp`). Code nested in that path (a handler) runs
    /// below it on the same stack, or on the alternate signal stack; so
    /// the mark is stale if the stack pointer is now above it on the same
    /// stack, or if the mark is on the alternate stack and the thread is
    /// no longer on it. Then the mark is cleared and the counts the path
    /// may have left half-done are taken again from the shadow stack.
    fn reclaim(&mut self) -> bool {
        let sp = sys::stack_pointer();
        let alt = sys::alt_stack();
        let on_alt = |a: usize| alt.is_some_and(|(start, end, _)| (start..end).contains(&a));
        let stale = match (on_alt(self.busy), on_alt(sp)) {
            (true, false) => true,
            (false, true) => false,
            _ => sp > self.busy,
        };
        if !stale {
            return false;
        }
        self.busy = 0;
        self.recount(None);
        true
    }

    /// Takes the counts the generic path keeps (and the fast paths do not)
    /// again from the shadow stack; with `max_depth`, the depth limit too
    /// unless a frame set it.
    fn recount(&mut self, max_depth: Option<u32>) {
        let (mut recorded, mut hidden, mut inside, mut depth_frame) = (0, 0, 0, false);
        for i in 0..self.depth() {
            let flags = self.frame(i).flags;
            if flags & F_NOTRACE != 0 {
                hidden += 1;
                continue;
            }
            recorded += 1;
            inside += u32::from(flags & F_GRAPH != 0);
            depth_frame |= flags & F_DEPTH != 0;
        }
        (self.recorded, self.hidden, self.inside) = (recorded, hidden, inside);
        if let (Some(max), false) = (max_depth, depth_frame) {
            self.max_depth = max;
        }
    }

    /// Frames in use.
    #[inline]
    pub fn depth(&self) -> usize {
        (((self.cursor.load(Ordering::Relaxed) >> DEPTH_SHIFT) & DEPTH_MASK) / FRAME) as usize
    }

    /// Where the next event word goes (0 while no chunk is taken).
    #[inline]
    pub fn wptr(&self) -> usize {
        match self.cursor.load(Ordering::Relaxed) as u32 {
            0 => 0,
            words => self.data as usize + words as usize * 8,
        }
    }

    /// Publishes a new write pointer and depth (one store, counted).
    #[inline]
    fn set_cursor(&self, wptr: usize, depth: usize) {
        let old = self.cursor.load(Ordering::Relaxed);
        let words = if wptr == 0 {
            0
        } else {
            (wptr - self.data as usize) as u64 / 8
        };
        let count = (old >> COUNT_SHIFT).wrapping_add(1) << COUNT_SHIFT;
        self.cursor.store(
            count | (depth as u64 * FRAME) << DEPTH_SHIFT | words,
            Ordering::Release,
        );
    }

    /// Moves the cursor by `delta` (words, and frames in bytes), counted:
    /// one load and one store, the generic path being alone on the thread.
    #[inline]
    fn bump(&self, delta: u64) {
        let c = self.cursor.load(Ordering::Relaxed);
        self.cursor.store(
            c.wrapping_add(delta).wrapping_add(1 << COUNT_SHIFT),
            Ordering::Release,
        );
    }

    /// Pushes a frame: written first, then published.
    #[inline]
    pub fn push_frame(&mut self, f: Frame) {
        let depth = self.depth();
        *self.frame(depth) = f;
        self.bump(FRAME << DEPTH_SHIFT);
    }

    /// Pops the innermost frame.
    #[inline]
    pub fn pop_frame(&mut self) -> Option<Frame> {
        let f = self.top()?;
        self.bump((FRAME << DEPTH_SHIFT).wrapping_neg());
        Some(f)
    }

    /// Keeps the real return address `orig` of a frame at `slot` that
    /// ended without its return: its function may still return through
    /// the trampoline, if its return address was copied before (a context
    /// switch tail-called from it saved the trampoline's address as the
    /// place to resume). The oldest of [`PARKED`] is forgotten first.
    pub fn park(&mut self, slot: usize, orig: usize) {
        let i = self.parked_count % PARKED;
        // SAFETY: `parked` holds PARKED pairs; `i` is below that.
        unsafe { *self.parked.add(i) = [slot, orig] };
        self.parked_count += 1;
    }

    /// The real return address parked for `slot`, the newest first; taken.
    pub fn unpark(&mut self, slot: usize) -> Option<usize> {
        let n = self.parked_count.min(PARKED);
        (0..n).find_map(|k| {
            let i = (self.parked_count - 1 - k) % PARKED;
            // SAFETY: `parked` holds PARKED pairs; `i` is below that.
            let pair = unsafe { &mut *self.parked.add(i) };
            (pair[0] == slot).then(|| {
                pair[0] = 0;
                pair[1]
            })
        })
    }

    /// Lets the fast paths run again if nothing forbids them.
    #[inline]
    pub fn allow_fast(&self) {
        let ok = self.fast_mode
            && self.busy == 0
            && !self.dead.load(Ordering::Relaxed)
            && !FINISHED.load(Ordering::Relaxed);
        let fend = match (ok, self.fast_profile) {
            (false, _) => 0,
            (true, false) => self.wend,
            (true, true) => FEND_PROFILE,
        };
        self.fend.store(fend, Ordering::Relaxed);
    }

    /// Words written in the current chunk.
    pub fn used(&self) -> usize {
        if self.chunk == usize::MAX {
            return 0;
        }
        (self.wptr() - self.chunks[self.chunk].data as usize) / 8
    }

    /// The frame `i` (0 = outermost).
    #[inline]
    pub fn frame(&mut self, i: usize) -> &mut Frame {
        debug_assert!(i < SHADOW);
        // SAFETY: `frames` holds SHADOW frames; callers keep `i` below depth.
        unsafe { &mut *self.frames.add(i) }
    }

    /// The innermost frame's slot.
    #[inline]
    pub fn top_slot(&mut self) -> Option<usize> {
        match self.depth() {
            0 => None,
            d => Some(self.frame(d - 1).slot),
        }
    }

    /// The innermost frame.
    #[inline]
    pub fn top(&mut self) -> Option<Frame> {
        match self.depth() {
            0 => None,
            d => Some(*self.frame(d - 1)),
        }
    }

    /// Writes one event (and its payload word) at tick `now`: the words
    /// first, then the write pointer (a handler jumping out in between
    /// leaves nothing half-written).
    #[inline]
    pub fn emit(&mut self, kind: Kind, fid: u32, mut now: u64, payload: Option<u64>) {
        if FINISHED.load(Ordering::Relaxed) {
            return;
        }
        if self.chunk == usize::MAX || self.wptr() > self.wend {
            let Some(waited) = self.switch() else {
                self.dropped += 1;
                self.lost_total.fetch_add(1, Ordering::Relaxed);
                return;
            };
            if waited && matches!(kind, Kind::Entry | Kind::EntryCaller) {
                // The thread waited for the writer before the function
                // began: its entry is now, not the wait in its time.
                now = super::clock::now();
            }
        }
        let start = self.wptr();
        let mut w = start;
        let mut put = |word: u64| {
            // SAFETY: `wptr <= wend`: four words fit below the chunk's end.
            unsafe { (w as *mut u64).write(word) };
            w += 8;
        };
        let mut delta = now.wrapping_sub(self.base);
        if delta > MAX_DELTA_FROM_BASE {
            if (delta as i64) < 0 {
                // Another core's counter is behind the base: the event is
                // read at the previous event's time (time never goes back).
                delta = 0;
            } else {
                put(event::TIME_WORD);
                put(now);
                self.base = now;
                delta = 0;
            }
        }
        put(event::encode_from_base(kind, fid, delta));
        if let Some(p) = payload {
            put(p);
        }
        self.bump(((w - start) / 8) as u64);
    }

    /// Closes the current chunk and takes the next one, if it is free
    /// (the flight recorder takes it even if full: it keeps the newest),
    /// waiting for the writer to free it unless `--lossy`. `Some(waited)`
    /// when a chunk was taken; `None` when the events must be dropped.
    pub fn switch(&mut self) -> Option<bool> {
        if self.chunk != usize::MAX {
            let used = self.used();
            let c = &self.chunks[self.chunk];
            c.len.store((used * 8) as u32, Ordering::Release);
            c.state.store(FULL, Ordering::Release);
            self.next_chunk = (self.chunk + 1) % NCHUNKS;
            self.chunk = usize::MAX;
            self.set_cursor(0, self.depth());
            self.wend = 0;
            self.fend.store(0, Ordering::Relaxed);
            super::writer::wake();
        }
        let next = self.next_chunk;
        let c = &self.chunks[next];
        let took = c
            .state
            .compare_exchange(FREE, FILLING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        let mut waited = false;
        if !took {
            if self.flight {
                // The flight recorder overwrites the oldest chunk, zeroed
                // first as the writer does the chunks it frees.
                if c.state
                    .compare_exchange(FULL, FILLING, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
                {
                    return None;
                }
                super::writer::clear(c, (self.cap * 8) as u32);
            } else if LOSSY.load(Ordering::Relaxed) || !wait_free(c) {
                return None;
            } else {
                waited = true;
            }
        }
        c.seq.store(self.seq, Ordering::Relaxed);
        c.lost
            .store(self.dropped.min(u32::MAX as u64) as u32, Ordering::Relaxed);
        let flags = if self.flight {
            fntrace_format::chunk::FLAG_FLIGHT
        } else {
            0
        };
        c.flags.store(flags as u32, Ordering::Relaxed);
        c.start.store(self.base, Ordering::Relaxed);
        c.len.store(0, Ordering::Release);
        self.seq += 1;
        self.dropped = 0;
        self.chunk = next;
        self.wend = c.data as usize + (self.cap - 4) * 8;
        self.set_cursor(c.data as usize, self.depth());
        Some(waited)
    }

    /// Ends the thread's recording: its last chunk is handed to the writer.
    pub fn end(&mut self) {
        self.fend.store(0, Ordering::Relaxed);
        if self.chunk != usize::MAX {
            let used = self.used();
            let c = &self.chunks[self.chunk];
            c.flags
                .fetch_or(fntrace_format::chunk::FLAG_LAST as u32, Ordering::Relaxed);
            c.len.store((used * 8) as u32, Ordering::Release);
            c.state.store(FULL, Ordering::Release);
            self.chunk = usize::MAX;
            self.set_cursor(0, self.depth());
            self.wend = 0;
        }
        self.dead.store(true, Ordering::Release);
        super::writer::wake();
    }

    /// Throws away everything buffered (a forked child: the parent writes it).
    pub fn reset_buffers(&mut self) {
        for c in &self.chunks {
            if c.state.load(Ordering::Relaxed) != FREE {
                super::writer::clear(c, (self.cap * 8) as u32);
            }
            c.state.store(FREE, Ordering::Relaxed);
            c.len.store(0, Ordering::Relaxed);
        }
        self.chunk = usize::MAX;
        self.next_chunk = 0;
        self.seq = 0;
        self.dropped = 0;
        self.set_cursor(0, self.depth());
        self.wend = 0;
        self.fend.store(0, Ordering::Relaxed);
        self.lost_total.store(0, Ordering::Relaxed);
        self.untraced.store(0, Ordering::Relaxed);
    }
}

/// Lossy mode (`--lossy`): a thread whose buffers are full drops events
/// (and counts them) rather than wait for the writer.
pub static LOSSY: AtomicBool = AtomicBool::new(false);

/// Waits until the writer frees chunk `c` and takes it; false if it cannot
/// wait (no writer running, recording finished, or this thread holds what
/// the writer needs: `writer::can_wait`). The backpressure of the default
/// lossless mode: a thread that outruns the writer waits for it.
fn wait_free(c: &Chunk) -> bool {
    super::writer::wake();
    // A writer that frees nothing for 10 s is stuck, not slow: drop then.
    for _ in 0..200 {
        match c
            .state
            .compare_exchange(FREE, FILLING, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => return true,
            Err(state) => {
                if FINISHED.load(Ordering::Relaxed) || !super::writer::can_wait() {
                    return false;
                }
                super::writer::WAITERS.fetch_add(1, Ordering::AcqRel);
                sys::futex_wait(&c.state, state, 50);
                super::writer::WAITERS.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
    false
}

/// Makes this thread's state and registers it.
fn create() -> Option<*mut Thread> {
    let _errno = sys::ErrnoGuard::new();
    let chunk_bytes = CHUNK_BYTES.load(Ordering::Relaxed) as usize;
    // One mapping: the head, the frames (one more than SHADOW: the first
    // is a sentinel whose slot is above any stack, so the fast paths need
    // no empty-stack test) and parked pairs, then the chunks — at fixed
    // offsets from the head, which the fast paths address from it.
    let len = NCHUNKS
        .checked_mul(chunk_bytes)
        .and_then(|b| b.checked_add(CHUNKS_OFF))
        .filter(|&len| len <= MAX_DATA);
    let Some((base, len)) = len.and_then(|len| Some((sys::map_anon(len)?, len))) else {
        static SAID: AtomicBool = AtomicBool::new(false);
        if !SAID.swap(true, Ordering::Relaxed) {
            sys::write_stderr(b"fntrace: cannot map a thread's trace buffers (--buffer-size too large?); threads without them are not traced\n");
        }
        return None;
    };
    let head_mem = base as *mut Thread;
    let chunks = std::array::from_fn(|i| Chunk {
        state: AtomicU32::new(FREE),
        len: AtomicU32::new(0),
        seq: AtomicU32::new(0),
        lost: AtomicU32::new(0),
        flags: AtomicU32::new(0),
        start: AtomicU64::new(0),
        // SAFETY: inside the mapping.
        data: unsafe { base.add(CHUNKS_OFF + i * chunk_bytes) } as *mut u64,
    });
    // SAFETY: the sentinel frame, then SHADOW frames, zeroed, inside the
    // mapping; the parked pairs follow the frames.
    let (frames_ptr, parked) = unsafe {
        (*(base.add(HEAD) as *mut Frame)).slot = usize::MAX;
        // The profiler's fast exits add to the caller's cell.
        (*(base.add(HEAD) as *mut Frame)).cell = super::profile::sink();
        let frames = base.add(FRAMES_OFF) as *mut Frame;
        (frames, frames.add(SHADOW) as *mut [usize; 2])
    };
    let now = super::clock::now();
    // The generation before the settings: settings newer than the
    // generation read are taken again at the next slow entry, never the
    // other way round.
    let generation = super::GENERATION.load(Ordering::Acquire);
    let config = super::config();
    let t = Thread {
        cursor: AtomicU64::new(0),
        wend: 0,
        base: now,
        frames: frames_ptr,
        recorded: 0,
        fend: AtomicUsize::new(0),
        busy: 0,
        fast_mode: config.fast,
        fast_profile: config.fast && config.kind == super::Tracer::Profile,
        generation,
        tid: sys::gettid(),
        dead: AtomicBool::new(false),
        drained: AtomicBool::new(false),
        cap: chunk_bytes / 8,
        chunk: usize::MAX,
        next_chunk: 0,
        seq: 0,
        dropped: 0,
        lost_total: AtomicU64::new(0),
        flight: FLIGHT.load(Ordering::Relaxed),
        chunks,
        max_depth: config.max_depth,
        inside: 0,
        hidden: 0,
        untraced: AtomicU64::new(0),
        profile: AtomicPtr::new(std::ptr::null_mut()),
        profile_len: AtomicU64::new(0),
        next: std::ptr::null_mut(),
        parked,
        parked_count: 0,
        data: base,
        data_len: len,
    };
    // SAFETY: `head_mem` is the start of a fresh mapping with room for a
    // Thread before the frames.
    unsafe { head_mem.write(t) };
    let mut head_ptr = THREADS.load(Ordering::Acquire);
    loop {
        // SAFETY: not yet published: ours alone.
        unsafe { (*head_mem).next = head_ptr };
        match THREADS.compare_exchange_weak(head_ptr, head_mem, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(h) => head_ptr = h,
        }
    }
    super::asm::tls_set(head_mem as usize);
    super::on_thread_start();
    Some(head_mem)
}

/// Before a new session in a process traced before (`fntrace attach`
/// again): every thread's buffers are emptied. Recording is finished, so
/// no thread writes events meanwhile; a thread takes a fresh chunk at its
/// next event.
pub fn reset_all() {
    debug_assert!(FINISHED.load(Ordering::Relaxed));
    let mut p = THREADS.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: registered threads' heads are never unmapped; with
        // recording finished their owners only read these fields, on the
        // way out of the tracer (`emit` returns first).
        unsafe {
            (*p).reset_buffers();
            (*p).drained.store(false, Ordering::Relaxed);
            p = (*p).next;
        }
    }
}

/// Every registered thread.
pub fn all() -> impl Iterator<Item = &'static Thread> {
    let mut p = THREADS.load(Ordering::Acquire);
    std::iter::from_fn(move || {
        if p.is_null() {
            return None;
        }
        // SAFETY: registered threads' heads are never unmapped.
        let t = unsafe { &*p };
        p = t.next;
        Some(t)
    })
}
