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
//! publishes both with one compare-exchange of the [`Shared::cursor`] word
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
//!
//! **Who refers to what.** A thread's state is two parts ([`Thread`]): the
//! [`Shared`] part, which other threads read (the writer its chunks and
//! cursor, an attach or `ctl` thread its depth, counts and `fend`), all
//! atomics or words fixed at its making, referred to only shared; and the
//! [`Own`] part, the generic path's bookkeeping, which only the thread
//! reads, through its one [`Owner`] (made by `enter` and `for_return`
//! while the busy mark keeps out any other). No `&mut` to memory another
//! thread reads ever exists.

use std::cell::UnsafeCell;
use std::ptr::NonNull;
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
/// The top byte of a hijacked frame's flags: the tag of its return value
/// when the fast return path records it (`args::fast_ret_tag`), else 0.
pub const F_RET_TAG_SHIFT: u32 = 24;
/// Where the fast return path reads that tag: its byte, from the end of
/// the frame (the top frame ends at the depth).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const RET_TAG_FROM_END: usize = 64 - std::mem::offset_of!(Frame, flags) - (F_RET_TAG_SHIFT as usize / 8);

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

/// Offsets of [`Thread`] fields, for the assembly (all in [`Shared`]).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub mod off {
    use super::Thread;
    use std::mem::offset_of;
    /// `cursor`.
    pub const CURSOR: usize = offset_of!(Thread, shared.cursor);
    /// `base`.
    pub const BASE: usize = offset_of!(Thread, shared.base);
    /// `fend`.
    pub const FEND: usize = offset_of!(Thread, shared.fend);
    /// `profile`.
    pub const PROFILE: usize = offset_of!(Thread, shared.profile);
    /// `profile_len`.
    pub const PROFILE_LEN: usize = offset_of!(Thread, shared.profile_len);
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
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const STEP_PUSH: u64 = 1 + (FRAME << DEPTH_SHIFT) + (1 << COUNT_SHIFT);
/// The cursor step of an event word and a frame popped.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const STEP_POP: u64 = (1 + (1 << COUNT_SHIFT)) - (FRAME << DEPTH_SHIFT);
/// The cursor step of an event word and its payload.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const STEP_PAYLOAD: u64 = 2 + (1 << COUNT_SHIFT);
/// The cursor step of a frame pushed without an event (the profiler): its
/// threads take no chunk, and the write pointer's bits count its commits
/// (module doc, "Signals").
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const STEP_FRAME_PUSH: u64 = 1 + (FRAME << DEPTH_SHIFT) + (1 << COUNT_SHIFT);
/// The cursor step of a frame popped without an event (the profiler).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
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

/// The cursor word with write pointer `words` (in words from the thread's
/// head; 0: no chunk) and `depth` frames, following cursor `old`: its
/// commit count one more.
#[inline]
pub const fn cursor_word(old: u64, words: u64, depth: usize) -> u64 {
    let count = (old >> COUNT_SHIFT).wrapping_add(1) << COUNT_SHIFT;
    count | (depth as u64 * FRAME) << DEPTH_SHIFT | words
}

/// Cursor `c` moved by `delta` (words, and frames in bytes), counted.
#[inline]
pub const fn cursor_bump(c: u64, delta: u64) -> u64 {
    c.wrapping_add(delta).wrapping_add(1 << COUNT_SHIFT)
}

/// The frames in use in cursor `c`.
#[inline]
pub const fn cursor_depth(c: u64) -> usize {
    (((c >> DEPTH_SHIFT) & DEPTH_MASK) / FRAME) as usize
}

/// The write pointer of cursor `c`, in words from the thread's head (0
/// while no chunk is taken; the profiler's commit count in its threads).
#[inline]
pub const fn cursor_words(c: u64) -> u64 {
    c as u32 as u64
}

/// A traced thread, at the head of its mapping. It is two parts, so that
/// no reference to what another thread reads is ever unique:
///
/// - [`Shared`]: everything another thread reads or writes (the writer, an
///   attach or `ctl` thread, a fork's child) and everything a signal
///   handler on the thread reads before it may enter the tracer — atomics,
///   and words fixed when the thread is made. Anyone may hold `&Shared`
///   ([`all`]); the assembly's fields are here, at the offsets in [`off`].
/// - [`Own`]: the generic path's bookkeeping of the shadow stack and of
///   the settings, which only the thread itself reads. It sits in an
///   `UnsafeCell` that no other thread refers into, and is reached only
///   through an [`Owner`], which exists only while the thread holds its
///   busy mark (`busy`): one at a time.
#[repr(C)]
pub struct Thread {
    /// What every thread may read.
    pub shared: Shared,
    /// What only the owner reads (through an [`Owner`]).
    own: UnsafeCell<Own>,
}

/// The part of a [`Thread`] other threads read: atomics, and words fixed
/// at its making. Its first fields are read and written by the fast paths
/// in assembly (`asm.rs`) at fixed offsets (see `off`). The owner alone
/// writes most of them (through its [`Owner`]); other threads only read,
/// except where a field says otherwise.
#[repr(C)]
pub struct Shared {
    /// Where the next event word goes (the low 32 bits, in words from the
    /// head; 0 while no chunk is taken) and how many frames are in use
    /// (above): one word, so that an event and a frame are published
    /// together (module doc).
    pub cursor: AtomicU64,
    /// The end of the current chunk minus room for one event with its
    /// payload and a `TIME` event (0 while no chunk is taken). Whoever
    /// changes it clears `fend`; `allow_fast` sets that again.
    pub wend: AtomicUsize,
    /// The tick event deltas count from: the chunk's start or the last
    /// `TIME` event's (moved only by the generic path; the writer reads it
    /// once the thread records no more).
    pub base: AtomicU64,
    /// Inside the tracer's generic path: its stack pointer then, else 0
    /// (a signal handler's calls meanwhile are not traced).
    pub busy: AtomicUsize,
    /// The current chunk, or `usize::MAX` while dropping.
    pub chunk: AtomicUsize,
    /// The end the fast paths may write to: `wend` while they may run
    /// (fast mode, not busy, not ended), else 0 — one comparison in the
    /// assembly checks both that they may run and that the chunk has room.
    /// The profiler's fast paths, which write no events, run while it is
    /// [`FEND_PROFILE`]. Any thread may clear it (new settings, the end).
    pub fend: AtomicUsize,
    /// The profile table (one cell per function id).
    pub profile: AtomicPtr<ProfileCell>,
    /// Its length.
    pub profile_len: AtomicU64,
    /// Its id (a fork's child changes it: [`Shared::set_tid`]).
    tid: AtomicU32,
    /// The next chunk's sequence number.
    pub seq: AtomicU32,
    /// The thread has ended (its key destructor ran).
    pub dead: AtomicBool,
    /// Everything it recorded was written and its memory may go (the
    /// writer sets it).
    pub drained: AtomicBool,
    /// Keep the oldest chunks? No: overwrite them (flight recorder).
    pub flight: bool,
    /// The chunk to try next while dropping.
    pub next_chunk: AtomicUsize,
    /// Events dropped since the last chunk started.
    pub dropped: AtomicU64,
    /// Events dropped in total.
    pub lost_total: AtomicU64,
    /// Calls not traced: the shadow stack was full, or a signal handler
    /// called them while the thread was inside the tracer's generic path.
    pub untraced: AtomicU64,
    /// Words per chunk.
    pub cap: usize,
    /// The mapping holding the head, frames, parked pairs and chunk data.
    pub data: *mut u8,
    /// Its size.
    pub data_len: usize,
    /// The next thread in the registry.
    next: AtomicPtr<Thread>,
    /// The chunks.
    pub chunks: [Chunk; NCHUNKS],
}

/// The part of a [`Thread`] only the thread itself reads: the generic
/// path's view of its shadow stack and settings. Reached through an
/// [`Owner`].
pub struct Own {
    /// The shadow stack.
    pub frames: *mut Frame,
    /// Recorded frames (for `--depth`; the fast paths, which run only
    /// without a depth limit, leave it alone).
    pub recorded: u32,
    /// The tracer's settings allow the fast paths.
    pub fast_mode: bool,
    /// ... and they are the profiler's (`fend` is then [`FEND_PROFILE`]).
    pub fast_profile: bool,
    /// The `GENERATION` of the settings `fast_mode` and `max_depth` came from.
    pub generation: u32,
    /// Deepest recorded nesting allowed.
    pub max_depth: u32,
    /// Open `--graph-function` frames.
    pub inside: u32,
    /// Open `--notrace` frames.
    pub hidden: u32,
    /// Real return addresses of frames ended without their return, by
    /// slot (a ring of [`PARKED`] pairs, in the data mapping): see `park`.
    pub parked: *mut [usize; 2],
    /// Pairs parked so far (the next goes at this modulo `PARKED`).
    pub parked_count: usize,
}

/// The thread's own access to its state, while it is inside the tracer's
/// generic path (from [`enter`] or [`for_return`] to `leave`): the
/// [`Own`] part, mutable (it derefs to it), and the [`Shared`] part as
/// every thread sees it. At most one exists per thread at a time: one is
/// made only by the thread itself, when its busy mark was clear (or stale:
/// the path that set it was left by `siglongjmp`, its `Owner` with it), and
/// the mark is set until it leaves. Not `Send`.
pub struct Owner {
    t: NonNull<Thread>,
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
pub fn enter() -> Option<Owner> {
    enter_at(true)
}

/// [`enter`] at an exit site: a call found inside the tracer is not counted
/// again (its entry was, or was traced before the tracer was entered).
pub fn enter_exit() -> Option<Owner> {
    enter_at(false)
}

fn enter_at(entry: bool) -> Option<Owner> {
    if crate::sys::in_runtime_thread() {
        return None;
    }
    let mut p = current_raw();
    if p.is_null() {
        if FINISHED.load(Ordering::Relaxed) {
            return None;
        }
        p = create()?;
    }
    // SAFETY: a registered thread's head is never unmapped.
    let s = unsafe { &(*p).shared };
    let busy = s.busy.load(Ordering::Relaxed);
    let reclaim = busy != 0 && stale(busy);
    if busy != 0 && !reclaim {
        s.untraced.fetch_add(u64::from(entry), Ordering::Relaxed);
        return None;
    }
    // SAFETY: this thread's state, and no `Owner` of it is live: the busy
    // mark was clear, or stale (the path that held it is gone).
    let mut t = unsafe { Owner::new(p) };
    if reclaim {
        t.reclaim();
    }
    if s.dead.load(Ordering::Relaxed) {
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
    t.mark_busy();
    if t.fast_profile
        && s.chunk.load(Ordering::Relaxed) == usize::MAX
        && cursor_words(s.cursor.load(Ordering::Relaxed)) >= PROFILE_COMMITS
    {
        // The profiler's commit count (no chunk is taken): back to 0.
        s.set_cursor(0, s.depth());
    }
    Some(t)
}

/// The state for the paths that must run even inside the tracer (a
/// hijacked function returning, an unwinder starting): marked busy, with
/// the previous mark to give back to [`Owner::leave_to`].
#[inline]
pub fn for_return() -> Option<(Owner, usize)> {
    let p = current_raw();
    if p.is_null() {
        return None;
    }
    // SAFETY: a registered thread's head is never unmapped.
    let busy = unsafe { &(*p).shared }.busy.load(Ordering::Relaxed);
    let reclaim = busy != 0 && stale(busy);
    // SAFETY: as in `enter`; these paths run only when a traced frame
    // returns or an unwinder starts, never inside the tracer's own code
    // (whose calls are not traced), so no `Owner` is live below them (a
    // stale mark left by `siglongjmp` is reclaimed).
    let mut t = unsafe { Owner::new(p) };
    if reclaim {
        t.reclaim();
    }
    let was = if reclaim { 0 } else { busy };
    t.mark_busy();
    Some((t, was))
}

/// Whether the busy mark `busy` is stale: the generic path that set it was
/// left without finishing (a signal handler interrupted it and jumped out
/// with `siglongjmp`). Code nested in that path (a handler) runs below it
/// on the same stack, or on the alternate signal stack; so the mark is
/// stale if the stack pointer is now above it on the same stack, or if the
/// mark is on the alternate stack and the thread is no longer on it.
fn stale(busy: usize) -> bool {
    let sp = sys::stack_pointer();
    let alt = sys::alt_stack();
    let on_alt = |a: usize| alt.is_some_and(|(start, end, _)| (start..end).contains(&a));
    match (on_alt(busy), on_alt(sp)) {
        (true, false) => true,
        (false, true) => false,
        _ => sp > busy,
    }
}

impl Owner {
    /// The owner's access to thread `p`.
    ///
    /// # Safety
    /// `p` is the calling thread's registered state, and no other `Owner`
    /// of it is live (its busy mark is clear or stale, or the thread is
    /// ending, or recording is over and it is outside the tracer).
    #[inline]
    pub unsafe fn new(p: *mut Thread) -> Owner {
        Owner {
            // SAFETY: registered states are not null (the caller's word).
            t: unsafe { NonNull::new_unchecked(p) },
        }
    }

    /// The shared part, as every thread sees it.
    #[inline]
    pub fn shared(&self) -> &'static Shared {
        // SAFETY: a registered thread's head is never unmapped; `Shared`
        // is only ever referred to shared.
        unsafe { &(*self.t.as_ptr()).shared }
    }

    /// Sets the busy mark (this path's stack pointer) and closes the fast
    /// paths.
    #[inline]
    pub fn mark_busy(&self) {
        let s = self.shared();
        s.busy.store(sys::stack_pointer(), Ordering::Relaxed);
        s.fend.store(0, Ordering::Relaxed);
    }

    /// Leaves the tracer.
    #[inline]
    pub fn leave(self) {
        self.leave_to(0);
    }

    /// Leaves a path entered with [`for_return`], giving back its mark.
    #[inline]
    pub fn leave_to(self, was: usize) {
        self.shared().busy.store(was, Ordering::Relaxed);
        self.allow_fast();
    }

    /// Clears a stale busy mark ([`stale`]); the counts the path it
    /// belonged to may have left half-done are taken again from the
    /// shadow stack.
    fn reclaim(&mut self) {
        self.shared().busy.store(0, Ordering::Relaxed);
        self.recount(None);
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
        self.shared().depth()
    }

    /// Pushes a frame: written first, then published.
    #[inline]
    pub fn push_frame(&mut self, f: Frame) {
        let depth = self.depth();
        *self.frame(depth) = f;
        self.shared().bump(FRAME << DEPTH_SHIFT);
    }

    /// Pops the innermost frame.
    #[inline]
    pub fn pop_frame(&mut self) -> Option<Frame> {
        let f = self.top()?;
        self.shared().bump((FRAME << DEPTH_SHIFT).wrapping_neg());
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
        let s = self.shared();
        let ok = self.fast_mode
            && s.busy.load(Ordering::Relaxed) == 0
            && !s.dead.load(Ordering::Relaxed)
            && !FINISHED.load(Ordering::Relaxed);
        let fend = match (ok, self.fast_profile) {
            (false, _) => 0,
            (true, false) => s.wend.load(Ordering::Relaxed),
            (true, true) => FEND_PROFILE,
        };
        s.fend.store(fend, Ordering::Relaxed);
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
    pub fn emit(&mut self, kind: Kind, fid: u32, now: u64, payload: Option<u64>) {
        match payload {
            Some(p) => self.emit_words(kind, fid, now, &[p]),
            None => self.emit_words(kind, fid, now, &[]),
        }
    }

    /// Writes an event (with its `payload` word, for the kinds that have
    /// one) followed by a `DATA` event of tag `tag` whose payload is
    /// `values` (bytes, zero-padded to whole words): both in one commit,
    /// so that nothing comes between them. Only the generic
    /// paths call it (exclusive: no handler's event can interleave).
    pub fn emit_values(
        &mut self,
        kind: Kind,
        fid: u32,
        now: u64,
        payload: Option<u64>,
        tag: u32,
        values: &[u8],
    ) {
        fn pack<const N: usize>(
            t: &mut Owner,
            (kind, fid, now, payload): (Kind, u32, u64, Option<u64>),
            tag: u32,
            values: &[u8],
        ) {
            let mut words = [0u64; N];
            // The event's own payload word first, then the DATA event.
            let at = usize::from(payload.is_some());
            words[0] = payload.unwrap_or(0);
            let n = values.len().div_ceil(8).min(N - 1 - at);
            words[at] = event::data_word(tag, n as u32);
            for (w, chunk) in words[at + 1..=at + n].iter_mut().zip(values.chunks(8)) {
                let mut bytes = [0u8; 8];
                bytes[..chunk.len()].copy_from_slice(chunk);
                *w = u64::from_le_bytes(bytes);
            }
            t.emit_words(kind, fid, now, &words[..=at + n]);
        }
        let event = (kind, fid, now, payload);
        if values.len() <= 14 * 8 {
            pack::<16>(self, event, tag, values);
        } else {
            pack::<{ 2 + fntrace_format::values::MAX_PAYLOAD / 8 }>(self, event, tag, values);
        }
    }

    /// Writes an event and the words `after` it (its payload, or a `DATA`
    /// event) at tick `now`, in one commit.
    #[inline]
    fn emit_words(&mut self, kind: Kind, fid: u32, mut now: u64, after: &[u64]) {
        if FINISHED.load(Ordering::Relaxed) {
            return;
        }
        let s = self.shared();
        // `wend` keeps four words of room below the chunk's end: a `TIME`
        // event, the event and one word after it; more words need as many
        // more below `wend`.
        let room = |s: &Shared| s.wptr() + after.len().max(1) * 8 <= s.wend.load(Ordering::Relaxed) + 8;
        if s.chunk.load(Ordering::Relaxed) == usize::MAX || !room(s) {
            let Some(waited) = self.switch() else {
                let dropped = s.dropped.load(Ordering::Relaxed);
                s.dropped.store(dropped + 1, Ordering::Relaxed);
                s.lost_total.fetch_add(1, Ordering::Relaxed);
                return;
            };
            if waited && matches!(kind, Kind::Entry | Kind::EntryCaller) {
                // The thread waited for the writer before the function
                // began: its entry is now, not the wait in its time.
                now = super::clock::now();
            }
            if !room(s) {
                // Larger than a chunk (never with the payload's bound and
                // the smallest buffer): the event without its values.
                return self.emit_words(kind, fid, now, &[]);
            }
        }
        let start = s.wptr();
        let mut w = start;
        let mut put = |word: u64| {
            // SAFETY: `room`: the words after the event fit below `wend`
            // but one, and four words fit below the chunk's end from it.
            unsafe { (w as *mut u64).write(word) };
            w += 8;
        };
        let mut delta = now.wrapping_sub(s.base.load(Ordering::Relaxed));
        if delta > MAX_DELTA_FROM_BASE {
            if (delta as i64) < 0 {
                // Another core's counter is behind the base: the event is
                // read at the previous event's time (time never goes back).
                delta = 0;
            } else {
                put(event::TIME_WORD);
                put(now);
                s.base.store(now, Ordering::Relaxed);
                delta = 0;
            }
        }
        put(event::encode_from_base(kind, fid, delta));
        for &word in after {
            put(word);
        }
        s.bump(((w - start) / 8) as u64);
    }

    /// Closes the current chunk and takes the next one, if it is free
    /// (the flight recorder takes it even if full: it keeps the newest),
    /// waiting for the writer to free it unless `--lossy`. `Some(waited)`
    /// when a chunk was taken; `None` when the events must be dropped.
    pub fn switch(&mut self) -> Option<bool> {
        let s = self.shared();
        let chunk = s.chunk.load(Ordering::Relaxed);
        if chunk != usize::MAX {
            let used = s.used();
            let c = &s.chunks[chunk];
            c.len.store((used * 8) as u32, Ordering::Release);
            c.state.store(FULL, Ordering::Release);
            s.next_chunk.store((chunk + 1) % NCHUNKS, Ordering::Relaxed);
            s.chunk.store(usize::MAX, Ordering::Relaxed);
            s.set_cursor(0, s.depth());
            s.wend.store(0, Ordering::Relaxed);
            s.fend.store(0, Ordering::Relaxed);
            super::writer::wake();
        }
        let next = if s.flight {
            s.next_chunk.load(Ordering::Relaxed)
        } else {
            s.chunk_to_fill()
        };
        let c = &s.chunks[next];
        let took = c
            .state
            .compare_exchange(FREE, FILLING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        let mut waited = false;
        if !took {
            if s.flight {
                // The flight recorder overwrites the oldest chunk, zeroed
                // first as the writer does the chunks it frees.
                if c.state
                    .compare_exchange(FULL, FILLING, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
                {
                    return None;
                }
                super::writer::clear(c, (s.cap * 8) as u32);
            } else if LOSSY.load(Ordering::Relaxed) || !wait_free(c) {
                return None;
            } else {
                waited = true;
            }
        }
        c.seq.store(s.seq.load(Ordering::Relaxed), Ordering::Relaxed);
        let dropped = s.dropped.load(Ordering::Relaxed);
        c.lost
            .store(dropped.min(u32::MAX as u64) as u32, Ordering::Relaxed);
        let flags = if s.flight {
            fntrace_format::chunk::FLAG_FLIGHT
        } else {
            0
        };
        c.flags.store(flags as u32, Ordering::Relaxed);
        c.start.store(s.base.load(Ordering::Relaxed), Ordering::Relaxed);
        c.len.store(0, Ordering::Release);
        s.seq
            .store(s.seq.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        s.dropped.store(0, Ordering::Relaxed);
        s.chunk.store(next, Ordering::Relaxed);
        s.wend.store(c.data as usize + (s.cap - 4) * 8, Ordering::Relaxed);
        s.set_cursor(c.data as usize, s.depth());
        Some(waited)
    }

    /// Ends the thread's recording: its last chunk is handed to the writer.
    pub fn end(&mut self) {
        let s = self.shared();
        s.fend.store(0, Ordering::Relaxed);
        let chunk = s.chunk.load(Ordering::Relaxed);
        if chunk != usize::MAX {
            let used = s.used();
            let c = &s.chunks[chunk];
            c.flags
                .fetch_or(fntrace_format::chunk::FLAG_LAST as u32, Ordering::Relaxed);
            c.len.store((used * 8) as u32, Ordering::Release);
            c.state.store(FULL, Ordering::Release);
            s.chunk.store(usize::MAX, Ordering::Relaxed);
            s.set_cursor(0, s.depth());
            s.wend.store(0, Ordering::Relaxed);
        }
        s.dead.store(true, Ordering::Release);
        super::writer::wake();
    }
}

impl std::ops::Deref for Owner {
    type Target = Own;
    #[inline]
    fn deref(&self) -> &Own {
        // SAFETY: `Own` is referred to only through this thread's one
        // `Owner` (its doc): no other reference to it is live.
        unsafe { &*(*self.t.as_ptr()).own.get() }
    }
}

impl std::ops::DerefMut for Owner {
    #[inline]
    fn deref_mut(&mut self) -> &mut Own {
        // SAFETY: as in `deref`; borrowed from the one `Owner` mutably.
        unsafe { &mut *(*self.t.as_ptr()).own.get() }
    }
}

impl Shared {
    /// Frames in use.
    #[inline]
    pub fn depth(&self) -> usize {
        cursor_depth(self.cursor.load(Ordering::Relaxed))
    }

    /// Where the next event word goes (0 while no chunk is taken).
    #[inline]
    pub fn wptr(&self) -> usize {
        match cursor_words(self.cursor.load(Ordering::Relaxed)) {
            0 => 0,
            words => self.data as usize + words as usize * 8,
        }
    }

    /// Words written in the current chunk.
    pub fn used(&self) -> usize {
        let chunk = self.chunk.load(Ordering::Relaxed);
        if chunk == usize::MAX {
            return 0;
        }
        (self.wptr() - self.chunks[chunk].data as usize) / 8
    }

    /// The thread's id.
    #[inline]
    pub fn tid(&self) -> u32 {
        self.tid.load(Ordering::Relaxed)
    }

    /// A fork's child: its one thread's new id.
    pub fn set_tid(&self, tid: u32) {
        self.tid.store(tid, Ordering::Relaxed);
    }

    /// Publishes a new write pointer and depth (one store, counted): by
    /// the owner, or by anyone once recording is finished.
    #[inline]
    fn set_cursor(&self, wptr: usize, depth: usize) {
        let old = self.cursor.load(Ordering::Relaxed);
        let words = if wptr == 0 {
            0
        } else {
            (wptr - self.data as usize) as u64 / 8
        };
        self.cursor
            .store(cursor_word(old, words, depth), Ordering::Release);
    }

    /// Moves the cursor by `delta` (words, and frames in bytes), counted:
    /// one load and one store, the generic path being alone on the thread.
    #[inline]
    fn bump(&self, delta: u64) {
        let c = self.cursor.load(Ordering::Relaxed);
        self.cursor.store(cursor_bump(c, delta), Ordering::Release);
    }

    /// The chunk to fill next, outside the flight recorder: the first
    /// free one, so that a thread the writer keeps up with goes back and
    /// forth between the first chunks, whose memory it has touched, and
    /// touches the rest of its buffer only when the writer falls behind (a
    /// page of fresh memory costs a fault, about as much as the hundred
    /// calls that fill it: `BENCHMARKS.md`, "Arguments"); else the oldest
    /// full one, which the writer frees first (it writes them in order).
    fn chunk_to_fill(&self) -> usize {
        let state = |i: usize| self.chunks[i].state.load(Ordering::Acquire);
        (0..NCHUNKS)
            .find(|&i| state(i) == FREE)
            .or_else(|| {
                (0..NCHUNKS)
                    .filter(|&i| state(i) != FILLING)
                    .min_by_key(|&i| self.chunks[i].seq.load(Ordering::Relaxed))
            })
            .unwrap_or(0)
    }

    /// Throws away everything buffered (a forked child: the parent writes
    /// it; a new session: the last one's). Only with recording finished,
    /// or from the thread itself: its owner then writes no event.
    pub fn reset_buffers(&self) {
        for c in &self.chunks {
            if c.state.load(Ordering::Relaxed) != FREE {
                super::writer::clear(c, (self.cap * 8) as u32);
            }
            c.state.store(FREE, Ordering::Relaxed);
            c.len.store(0, Ordering::Relaxed);
        }
        self.chunk.store(usize::MAX, Ordering::Relaxed);
        self.next_chunk.store(0, Ordering::Relaxed);
        self.seq.store(0, Ordering::Relaxed);
        self.dropped.store(0, Ordering::Relaxed);
        self.set_cursor(0, self.depth());
        self.wend.store(0, Ordering::Relaxed);
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
        shared: Shared {
            cursor: AtomicU64::new(0),
            wend: AtomicUsize::new(0),
            base: AtomicU64::new(now),
            busy: AtomicUsize::new(0),
            chunk: AtomicUsize::new(usize::MAX),
            fend: AtomicUsize::new(0),
            profile: AtomicPtr::new(std::ptr::null_mut()),
            profile_len: AtomicU64::new(0),
            tid: AtomicU32::new(sys::gettid()),
            seq: AtomicU32::new(0),
            dead: AtomicBool::new(false),
            drained: AtomicBool::new(false),
            flight: FLIGHT.load(Ordering::Relaxed),
            next_chunk: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            lost_total: AtomicU64::new(0),
            untraced: AtomicU64::new(0),
            cap: chunk_bytes / 8,
            data: base,
            data_len: len,
            next: AtomicPtr::new(std::ptr::null_mut()),
            chunks,
        },
        own: UnsafeCell::new(Own {
            frames: frames_ptr,
            recorded: 0,
            fast_mode: config.fast,
            fast_profile: config.fast && config.kind == super::Tracer::Profile,
            generation,
            max_depth: config.max_depth,
            inside: 0,
            hidden: 0,
            parked,
            parked_count: 0,
        }),
    };
    // SAFETY: `head_mem` is the start of a fresh mapping with room for a
    // Thread before the frames.
    unsafe { head_mem.write(t) };
    // SAFETY: written just above; not yet published, never unmapped.
    let shared = unsafe { &(*head_mem).shared };
    let mut head_ptr = THREADS.load(Ordering::Acquire);
    loop {
        shared.next.store(head_ptr, Ordering::Relaxed);
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
    for t in all() {
        t.reset_buffers();
        t.drained.store(false, Ordering::Relaxed);
    }
}

/// A fork's child: `me` (this thread's state, or null) is the only thread
/// left, with nothing buffered (its events are the parent's) and its new
/// id.
pub fn keep_only(me: *mut Thread) {
    if !me.is_null() {
        // SAFETY: a registered thread's head is never unmapped.
        let s = unsafe { &(*me).shared };
        s.next.store(std::ptr::null_mut(), Ordering::Relaxed);
        s.set_tid(sys::gettid());
        s.reset_buffers();
    }
    THREADS.store(me, Ordering::Release);
}

/// Every registered thread, as other threads see it.
pub fn all() -> impl Iterator<Item = &'static Shared> {
    let mut p = THREADS.load(Ordering::Acquire);
    std::iter::from_fn(move || {
        if p.is_null() {
            return None;
        }
        // SAFETY: registered threads' heads are never unmapped; their
        // `Shared` part is only ever referred to shared.
        let t = unsafe { &(*p).shared };
        p = t.next.load(Ordering::Acquire);
        Some(t)
    })
}

#[cfg(test)]
mod tests;
