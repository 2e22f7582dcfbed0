//! A traced thread's own state: its event buffer (a ring of chunks the
//! writer empties), its shadow stack of hijacked returns, and its profile
//! table. Made on the thread's first traced call, in memory from `mmap`
//! (safe in a signal handler), found through one thread-local pointer.
//!
//! Only the owning thread writes events and frames; the writer thread takes
//! chunks the owner marked full (`FULL` → `WRITING` → `FREE`), and at the end
//! reads the prefix of the chunk being filled (its `len` is published after
//! each event). Nothing on the recording path locks or makes a system call.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use fntrace_format::event::{self, Kind, MAX_DELTA};

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
/// Frames in the shadow stack: deeper calls are not traced (counted).
pub const SHADOW: usize = 4096;

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
    /// Ticks spent in traced children (profiler).
    pub children: u64,
    /// The function.
    pub fid: u32,
    /// `F_*`.
    pub flags: u32,
    /// The depth limit before this frame changed it.
    pub saved_max: u32,
    /// Up to 64 bytes (a shift in the fast paths).
    pub pad: [u32; 5],
}

// The fast paths' view of a frame.
const _: () = assert!(std::mem::size_of::<Frame>() == 64);
const _: () = assert!(std::mem::offset_of!(Frame, fid) == 32);
const _: () = assert!(std::mem::offset_of!(Frame, flags) == 36);

/// Offsets of [`Thread`] fields, for the assembly.
pub mod off {
    use super::Thread;
    use std::mem::offset_of;
    /// `wptr`.
    pub const WPTR: usize = offset_of!(Thread, wptr);
    /// `last`.
    pub const LAST: usize = offset_of!(Thread, last);
    /// `depth`.
    pub const DEPTH: usize = offset_of!(Thread, depth);
    /// `frames`.
    pub const FRAMES: usize = offset_of!(Thread, frames);
    /// `fend`.
    pub const FEND: usize = offset_of!(Thread, fend);
}

/// A traced thread. The first fields are read and written by the fast
/// paths in assembly (`asm.rs`) at fixed offsets (see `off`).
#[repr(C)]
pub struct Thread {
    /// Where the next event word goes (0 while no chunk is taken).
    pub wptr: AtomicUsize,
    /// The end of the current chunk minus room for one event with its
    /// payload and a `TIME` event (0 while no chunk is taken). Whoever
    /// changes it clears `fend`; `allow_fast` sets that again.
    pub wend: usize,
    /// Tick of the last event.
    pub last: u64,
    /// Frames in use.
    pub depth: usize,
    /// The shadow stack.
    pub frames: *mut Frame,
    /// Recorded frames (for `--depth`; the fast paths, which run only
    /// without a depth limit, leave it alone).
    pub recorded: u32,
    /// The end the fast paths may write to: `wend` while they may run
    /// (fast mode, not busy, not ended), else 0 — one comparison in the
    /// assembly checks both that they may run and that the chunk has room.
    pub fend: AtomicUsize,
    /// Inside the tracer (a signal handler's calls are then not traced).
    pub busy: bool,
    /// The tracer's settings allow the fast paths.
    pub fast_mode: bool,
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
    /// Calls not traced because the shadow stack was full.
    pub overflow: u64,
    /// The profile table (one cell per function id).
    pub profile: AtomicPtr<ProfileCell>,
    /// Its length.
    pub profile_len: AtomicU64,
    /// The next thread in the registry.
    pub next: *mut Thread,
    /// The mapping holding frames and chunk data.
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

/// Enters the tracer on this thread: its state (made on first use), marked
/// busy, or `None` if the thread is already inside the tracer, has ended,
/// or tracing has finished.
pub fn enter() -> Option<&'static mut Thread> {
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
    let generation = super::GENERATION.load(Ordering::Acquire);
    if t.generation != generation && !t.busy {
        // New settings (`fntrace ctl`): this thread's copy of them.
        // The counts the slow paths keep and the fast paths do not: taken
        // again from the shadow stack.
        let cfg = super::config();
        t.generation = generation;
        t.fast_mode = cfg.fast;
        let (mut recorded, mut hidden, mut inside, mut depth_frame) = (0, 0, 0, false);
        for i in 0..t.depth {
            let flags = t.frame(i).flags;
            if flags & F_NOTRACE != 0 {
                hidden += 1;
                continue;
            }
            recorded += 1;
            inside += u32::from(flags & F_GRAPH != 0);
            depth_frame |= flags & F_DEPTH != 0;
        }
        (t.recorded, t.hidden, t.inside) = (recorded, hidden, inside);
        if !depth_frame {
            t.max_depth = cfg.max_depth;
        }
    }
    if t.busy || t.dead.load(Ordering::Relaxed) {
        if t.busy {
            crate::ops::RECURSIONS.fetch_add(1, Ordering::Relaxed);
        }
        return None;
    }
    t.busy = true;
    t.fend.store(0, Ordering::Relaxed);
    Some(t)
}

/// The state for the return trampoline: it must be found even while busy.
pub fn for_return() -> Option<&'static mut Thread> {
    let p = current_raw();
    // SAFETY: as in `enter`; the return path runs only when a traced frame
    // returns, never inside the tracer's own code.
    (!p.is_null()).then(|| unsafe { &mut *p })
}

impl Thread {
    /// Leaves the tracer.
    #[inline]
    pub fn leave(&mut self) {
        self.busy = false;
        self.allow_fast();
    }

    /// Lets the fast paths run again if nothing forbids them.
    #[inline]
    pub fn allow_fast(&self) {
        let ok = self.fast_mode
            && !self.busy
            && !self.dead.load(Ordering::Relaxed)
            && !FINISHED.load(Ordering::Relaxed);
        self.fend.store(if ok { self.wend } else { 0 }, Ordering::Relaxed);
    }

    /// Words written in the current chunk.
    pub fn used(&self) -> usize {
        if self.chunk == usize::MAX {
            return 0;
        }
        (self.wptr.load(Ordering::Relaxed) - self.chunks[self.chunk].data as usize) / 8
    }

    /// The frame `i` (0 = outermost).
    #[inline]
    pub fn frame(&mut self, i: usize) -> &mut Frame {
        debug_assert!(i < SHADOW);
        // SAFETY: `frames` holds SHADOW frames; callers keep `i` below depth.
        unsafe { &mut *self.frames.add(i) }
    }

    /// The innermost frame.
    #[inline]
    pub fn top(&mut self) -> Option<Frame> {
        if self.depth == 0 {
            None
        } else {
            Some(*self.frame(self.depth - 1))
        }
    }

    /// Writes one event (and its payload word) at tick `now`.
    #[inline]
    pub fn emit(&mut self, kind: Kind, fid: u32, now: u64, payload: Option<u64>) {
        if FINISHED.load(Ordering::Relaxed) {
            return;
        }
        if (self.chunk == usize::MAX || self.wptr.load(Ordering::Relaxed) > self.wend) && !self.switch() {
            self.dropped += 1;
            self.lost_total.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut delta = now.wrapping_sub(self.last);
        let mut at = now;
        if delta > MAX_DELTA {
            if (delta as i64) < 0 {
                // Another core's counter is behind: never go back in time.
                delta = 0;
                at = self.last;
            } else {
                self.push(event::encode(Kind::Time, 0, 0));
                self.push(now);
                delta = 0;
            }
        }
        self.push(event::encode(kind, fid, delta));
        if let Some(p) = payload {
            self.push(p);
        }
        self.last = at;
    }

    #[inline]
    fn push(&mut self, word: u64) {
        let p = self.wptr.load(Ordering::Relaxed);
        // SAFETY: `emit` checked that `wptr <= wend`: four words fit.
        unsafe { (p as *mut u64).write(word) };
        self.wptr.store(p + 8, Ordering::Relaxed);
    }

    /// Closes the current chunk and takes the next one, if it is free
    /// (the flight recorder takes it even if full: it keeps the newest).
    pub fn switch(&mut self) -> bool {
        if self.chunk != usize::MAX {
            let used = self.used();
            let c = &self.chunks[self.chunk];
            c.len.store((used * 8) as u32, Ordering::Release);
            c.state.store(FULL, Ordering::Release);
            self.next_chunk = (self.chunk + 1) % NCHUNKS;
            self.chunk = usize::MAX;
            self.wptr.store(0, Ordering::Relaxed);
            self.wend = 0;
            self.fend.store(0, Ordering::Relaxed);
            super::writer::wake();
        }
        let next = self.next_chunk;
        let c = &self.chunks[next];
        let took = c
            .state
            .compare_exchange(FREE, FILLING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            || (self.flight
                && c.state
                    .compare_exchange(FULL, FILLING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok());
        if !took {
            return false;
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
        c.start.store(self.last, Ordering::Relaxed);
        c.len.store(0, Ordering::Release);
        self.seq += 1;
        self.dropped = 0;
        self.chunk = next;
        self.wend = c.data as usize + (self.cap - 4) * 8;
        self.wptr.store(c.data as usize, Ordering::Relaxed);
        true
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
            self.wptr.store(0, Ordering::Relaxed);
            self.wend = 0;
        }
        self.dead.store(true, Ordering::Release);
        super::writer::wake();
    }

    /// Throws away everything buffered (a forked child: the parent writes it).
    pub fn reset_buffers(&mut self) {
        for c in &self.chunks {
            c.state.store(FREE, Ordering::Relaxed);
            c.len.store(0, Ordering::Relaxed);
        }
        self.chunk = usize::MAX;
        self.next_chunk = 0;
        self.seq = 0;
        self.dropped = 0;
        self.wptr.store(0, Ordering::Relaxed);
        self.wend = 0;
        self.fend.store(0, Ordering::Relaxed);
        self.lost_total.store(0, Ordering::Relaxed);
    }
}

/// Makes this thread's state and registers it.
fn create() -> Option<*mut Thread> {
    let _errno = sys::ErrnoGuard::new();
    let page = sys::page_size();
    let chunk_bytes = CHUNK_BYTES.load(Ordering::Relaxed) as usize;
    let head = std::mem::size_of::<Thread>().next_multiple_of(page);
    // One frame more than SHADOW: the first is a sentinel whose slot is
    // above any stack, so the fast paths need no empty-stack test.
    let frames = ((SHADOW + 1) * std::mem::size_of::<Frame>()).next_multiple_of(page);
    let data_len = frames + NCHUNKS * chunk_bytes;
    let head_mem = sys::map_anon(head)? as *mut Thread;
    let Some(data) = sys::map_anon(data_len) else {
        // SAFETY: just mapped, unused.
        unsafe { sys::unmap(head_mem as *mut u8, head) };
        return None;
    };
    let chunks = std::array::from_fn(|i| Chunk {
        state: AtomicU32::new(FREE),
        len: AtomicU32::new(0),
        seq: AtomicU32::new(0),
        lost: AtomicU32::new(0),
        flags: AtomicU32::new(0),
        start: AtomicU64::new(0),
        // SAFETY: inside the data mapping.
        data: unsafe { data.add(frames + i * chunk_bytes) } as *mut u64,
    });
    // SAFETY: the mapping starts with SHADOW + 1 frames, zeroed.
    let frames_ptr = unsafe {
        (*(data as *mut Frame)).slot = usize::MAX;
        (data as *mut Frame).add(1)
    };
    let now = super::clock::now();
    // The generation before the settings: settings newer than the
    // generation read are taken again at the next slow entry, never the
    // other way round.
    let generation = super::GENERATION.load(Ordering::Acquire);
    let config = super::config();
    let t = Thread {
        wptr: AtomicUsize::new(0),
        wend: 0,
        last: now,
        depth: 0,
        frames: frames_ptr,
        recorded: 0,
        fend: AtomicUsize::new(0),
        busy: false,
        fast_mode: config.fast,
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
        overflow: 0,
        profile: AtomicPtr::new(std::ptr::null_mut()),
        profile_len: AtomicU64::new(0),
        next: std::ptr::null_mut(),
        data,
        data_len,
    };
    // SAFETY: `head_mem` is a fresh mapping large enough for a Thread.
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
