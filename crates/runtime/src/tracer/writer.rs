//! The writer: a thread of the runtime that moves full chunks from every
//! traced thread's buffer to `t<TID>.events`, so the program never waits
//! for the disk. If it falls behind, threads drop events and count them
//! (the next chunk's header says how many). At exit, `exec` or a flight-
//! recorder signal, `flush(true)` also writes the chunks being filled.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use fntrace_format::chunk::ChunkHeader;
use fntrace_format::event::{self, Kind};
use fntrace_format::layout;

use super::thread::{self, Shared, FILLING, FREE, FULL, NCHUNKS, WRITING};

/// The writer's files.
#[derive(Default)]
pub struct Files {
    /// The process directory.
    pub dir: Option<PathBuf>,
    files: HashMap<u32, File>,
    /// Per thread: the chunk being filled and how much of it was written.
    partial: HashMap<u32, (u32, u32)>,
    /// Per thread: the sequence number of the next chunk to write.
    next: HashMap<u32, u32>,
    /// Bytes written.
    pub bytes: u64,
    /// Events that could not be written (a full disk): lost, and counted.
    pub unwritten: u64,
    /// The first error writing them.
    pub error: Option<String>,
}

/// The writer's lock (taken around `fork`).
pub static FILES: LazyLock<Mutex<Files>> = LazyLock::new(Default::default);

static WAKE: Condvar = Condvar::new();
static WAKE_LOCK: Mutex<()> = Mutex::new(());
static STOP: AtomicBool = AtomicBool::new(false);
/// Set by the flight recorder's signal: write the buffers now.
pub static DUMP: AtomicBool = AtomicBool::new(false);
/// A terminating signal asked for the final flush (1), done (2).
static FINAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
static RUNNING: AtomicBool = AtomicBool::new(false);

/// In a forked child: the parent's writer thread is not here (until
/// `start`).
pub fn forget_in_child() {
    RUNNING.store(false, Ordering::Release);
}

/// Threads waiting for the writer to free a chunk (lossless mode).
pub static WAITERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// Set while a `fork` is being prepared: the forking thread holds the
/// writer's lock, so it must not wait for the writer.
pub static FORKING: AtomicBool = AtomicBool::new(false);

/// Whether a traced thread may wait for the writer to free a chunk: the
/// writer runs, and no `fork` holds its lock.
pub fn can_wait() -> bool {
    RUNNING.load(Ordering::Acquire) && !STOP.load(Ordering::Relaxed) && !FORKING.load(Ordering::Acquire)
}

/// From a signal handler: asks the writer for the final flush; false if
/// there is no writer to ask.
pub fn request_final() -> bool {
    if !RUNNING.load(Ordering::Acquire) {
        return false;
    }
    if FINAL
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        WAKE.notify_one();
    }
    true
}

/// Whether the final flush asked for is done.
pub fn final_done() -> bool {
    FINAL.load(Ordering::Acquire) == 2
}

/// Locks the files.
pub fn files() -> MutexGuard<'static, Files> {
    FILES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Tells the writer a chunk is full.
pub fn wake() {
    let _errno = crate::sys::ErrnoGuard::new();
    WAKE.notify_one();
}

/// Starts the writer thread, with every signal blocked: the program's
/// signals must go to the program's threads.
pub fn start() {
    STOP.store(false, Ordering::Relaxed);
    // Running from now on: a terminating signal that comes before the
    // thread is first scheduled asks it for the final flush all the same
    // (it looks at `FINAL` within its first 10 ms).
    RUNNING.store(true, Ordering::Release);
    let spawned = crate::sys::spawn_quiet("fntrace-writer", || {
        crate::no_unwind("the writer", run);
    });
    if let Err(e) = spawned {
        RUNNING.store(false, Ordering::Release);
        eprintln!("fntrace: cannot start the writer thread: {e}; events are written at exit");
    }
}

fn run() {
    run_loop();
    RUNNING.store(false, Ordering::Release);
}

fn run_loop() {
    let mut ticks = 0u32;
    loop {
        {
            let guard = WAKE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            let _ = WAKE.wait_timeout(guard, Duration::from_millis(10));
        }
        if FINAL.load(Ordering::Acquire) == 1 {
            super::stop_recording();
            super::write_out(true);
            FINAL.store(2, Ordering::Release);
            return;
        }
        if STOP.load(Ordering::Relaxed) || thread::FINISHED.load(Ordering::Relaxed) {
            return;
        }
        let flight = thread::FLIGHT.load(Ordering::Relaxed);
        if !flight {
            flush(false);
        } else if DUMP.swap(false, Ordering::Relaxed) {
            flush(true);
        }
        ticks += 1;
        if ticks.is_multiple_of(100) {
            super::session::refresh(false);
        }
    }
}

/// Writes every full chunk, and with `partial` the filled part of the
/// chunks being filled too.
pub fn flush(partial: bool) {
    let mut files = files();
    for t in thread::all() {
        if t.drained.load(Ordering::Acquire) {
            continue;
        }
        flush_thread(&mut files, t, partial);
    }
}

fn flush_thread(files: &mut Files, t: &Shared, partial: bool) {
    let tid = t.tid();
    let mut full: Vec<usize> = (0..NCHUNKS)
        .filter(|&i| t.chunks[i].state.load(Ordering::Acquire) == FULL)
        .collect();
    full.sort_by_key(|&i| t.chunks[i].seq.load(Ordering::Relaxed));
    let flight = t.flight;
    for i in full {
        let c = &t.chunks[i];
        let seq = c.seq.load(Ordering::Relaxed);
        // Chunks go out in order: one that filled while an earlier one was
        // still being filled waits for it (the flight recorder's ring skips
        // the chunks it overwrote).
        let expected = files.next.get(&tid).copied().unwrap_or(0);
        if !flight && seq != expected {
            break;
        }
        if c.state
            .compare_exchange(FULL, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        files.next.insert(tid, seq.wrapping_add(1));
        let skip = match files.partial.get(&tid) {
            Some(&(s, written)) if s == seq => written,
            _ => 0,
        };
        let len = c.len.load(Ordering::Acquire);
        write_chunk(files, t, i, skip, len);
        if skip > 0 {
            files.partial.remove(&tid);
        }
        clear(c, len);
        c.state.store(FREE, Ordering::Release);
        if WAITERS.load(Ordering::Acquire) > 0 {
            crate::sys::futex_wake(&c.state);
        }
    }
    if partial {
        for i in 0..NCHUNKS {
            let c = &t.chunks[i];
            if c.state.load(Ordering::Acquire) != FILLING {
                continue;
            }
            let expected = files.next.get(&tid).copied().unwrap_or(0);
            if !flight && c.seq.load(Ordering::Relaxed) != expected {
                continue;
            }
            let seq = c.seq.load(Ordering::Relaxed);
            let skip = match files.partial.get(&tid) {
                Some(&(s, written)) if s == seq => written,
                _ => 0,
            };
            // The fast paths do not publish `len`: the owner's write pointer
            // says how far it got.
            let base = c.data as usize;
            let w = t.wptr();
            let len = if w >= base && w <= base + t.cap * 8 {
                (w - base) as u32
            } else {
                0
            };
            let len = write_chunk(files, t, i, skip, len);
            files.partial.insert(tid, (seq, len));
        }
    }
    // A thread still dropping at the end (the final flush, or the thread
    // ended): an empty chunk carries the count, so that readers see every
    // loss. (The owner's fields, read when it records no more.)
    let ended = t.dead.load(Ordering::Acquire);
    if partial || ended {
        let (chunk, dropped, last) = (
            t.chunk.load(Ordering::Relaxed),
            t.dropped.load(Ordering::Relaxed),
            t.base.load(Ordering::Relaxed),
        );
        let unwritten = t.chunks.iter().any(|c| c.state.load(Ordering::Acquire) == FULL);
        if chunk == usize::MAX && dropped > 0 && !(ended && unwritten) {
            let seq = files.next.get(&tid).copied().unwrap_or(0);
            let header = ChunkHeader {
                version: version(),
                flags: 0,
                tid,
                seq,
                len: 0,
                lost: dropped.min(u32::MAX as u64) as u32,
                start: last,
            };
            // Its count is in the threads' own (`lost_total`) already.
            append(files, tid, &[&header.encode()]);
            files.next.insert(tid, seq.wrapping_add(1));
        }
    }
    if t.dead.load(Ordering::Acquire) && t.chunks.iter().all(|c| c.state.load(Ordering::Acquire) == FREE) {
        t.drained.store(true, Ordering::Release);
        files.next.remove(&tid);
        files.partial.remove(&tid);
        if let Some(f) = files.files.remove(&tid) {
            drop(f);
        }
    }
}

/// Writes chunk `i` of `t` from byte `skip` of its events; returns its length.
fn write_chunk(files: &mut Files, t: &Shared, i: usize, skip: u32, len: u32) -> u32 {
    let tid = t.tid();
    let c = &t.chunks[i];
    let len = len & !7;
    if len <= skip {
        return len;
    }
    // SAFETY: the first `len` bytes of the chunk are written events the
    // owner no longer changes (it only appends past `len`).
    let data = unsafe { std::slice::from_raw_parts(c.data as *const u8, len as usize) };
    let mut start = c.start.load(Ordering::Relaxed);
    if skip > 0 {
        start = continuation_start(start, &data[..skip as usize]);
    }
    let continued = if skip > 0 {
        fntrace_format::chunk::FLAG_CONTINUED
    } else {
        0
    };
    let header = ChunkHeader {
        version: version(),
        flags: c.flags.load(Ordering::Relaxed) as u16 | continued,
        tid,
        seq: c.seq.load(Ordering::Relaxed),
        len: len - skip,
        lost: if skip > 0 {
            0
        } else {
            c.lost.load(Ordering::Relaxed)
        },
        start,
    };
    // Straight from the chunk: no copy of the events.
    let events = &data[skip as usize..];
    if !append(files, tid, &[&header.encode(), events]) {
        files.unwritten += events_in(events);
    }
    len
}

/// Zeroes the first `len` bytes of a chunk written out: a word reserved
/// and never written reads as 0, wherever the chunk is used next. With
/// 16-byte stores, four at a time: glibc's memset of a chunk uses `rep
/// stosb`, one instruction per byte to callgrind (which the benchmarks
/// count) for what the hardware does in a few.
#[cfg(target_arch = "x86_64")]
pub fn clear(c: &thread::Chunk, len: u32) {
    use std::arch::x86_64::{__m128i, _mm_setzero_si128};
    let p = c.data as *mut __m128i;
    // Volatile: the compiler would make the loop a memset again.
    // SAFETY: the chunk is ours (WRITING, or taken back by its owner) and
    // holds at least `len` bytes of data, a multiple of 8 from an aligned
    // start: 16-byte stores, then one of 8 for an odd word; SSE2 is part
    // of x86-64.
    unsafe {
        let zero = _mm_setzero_si128();
        let pairs = len as usize / 16;
        let mut i = 0;
        while i + 4 <= pairs {
            std::ptr::write_volatile(p.add(i), zero);
            std::ptr::write_volatile(p.add(i + 1), zero);
            std::ptr::write_volatile(p.add(i + 2), zero);
            std::ptr::write_volatile(p.add(i + 3), zero);
            i += 4;
        }
        while i < pairs {
            std::ptr::write_volatile(p.add(i), zero);
            i += 1;
        }
        if len % 16 >= 8 {
            std::ptr::write_volatile((p.add(pairs)) as *mut u64, 0);
        }
    }
}

/// Zeroes the first `len` bytes of a chunk written out (see the x86-64
/// form): 8-byte stores.
#[cfg(not(target_arch = "x86_64"))]
pub fn clear(c: &thread::Chunk, len: u32) {
    let p = c.data as *mut u64;
    // SAFETY: the chunk is ours and holds at least `len` bytes of data, a
    // multiple of 8 from an aligned start.
    unsafe {
        for i in 0..len as usize / 8 {
            std::ptr::write_volatile(p.add(i), 0);
        }
    }
}

/// Appends `parts` to the events file of `tid`.
/// Whole or not at all: a write that fails (a full disk) is cut back, so
/// that the file stays a sequence of whole chunks (the next chunk's
/// sequence number shows the gap), and its error is kept for
/// `process.json`. False if it failed.
fn append(files: &mut Files, tid: u32, parts: &[&[u8]]) -> bool {
    let Some(dir) = files.dir.clone() else {
        return false;
    };
    let name = layout::thread_file(tid);
    let file = match files.files.entry(tid) {
        std::collections::hash_map::Entry::Occupied(o) => Ok(o.into_mut()),
        std::collections::hash_map::Entry::Vacant(v) => OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(&name))
            .map(|f| v.insert(f)),
    };
    let written = file.and_then(|file| {
        let before = file.metadata()?.len();
        let written = parts.iter().try_for_each(|part| file.write_all(part));
        if written.is_err() {
            let _ = file.set_len(before);
        }
        written
    });
    match written {
        Ok(()) => {
            files.bytes += parts.iter().map(|p| p.len() as u64).sum::<u64>();
            true
        }
        Err(e) => {
            files
                .error
                .get_or_insert_with(|| format!("cannot write {name}: {e}"));
            false
        }
    }
}

/// Where the rest of a chunk written in two parts counts from, after its
/// first part `data` (from the chunk's `start`).
fn continuation_start(start: u64, data: &[u8]) -> u64 {
    let mut ticks = fntrace_format::chunk::Ticks::new(&ChunkHeader {
        start,
        ..ChunkHeader::default()
    });
    let mut words = data
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
    while let Some(w) = words.next() {
        let (kind, fid, delta) = event::decode(w);
        if let (Kind::Time, Some((_, n))) = (kind, event::data_of(fid)) {
            // A DATA event: its payload is values, not a tick.
            for _ in 0..n {
                words.next();
            }
            continue;
        }
        let payload = if kind.has_payload() { words.next() } else { None };
        ticks.next(kind, delta, payload);
    }
    ticks.continuation_start()
}

/// Whether this process records values (`DATA` events): then its chunks
/// are of version 3, which readers of version 2 refuse rather than misread.
static VALUES: AtomicBool = AtomicBool::new(false);

/// From now on, chunks say they may hold `DATA` events.
pub fn records_values() {
    VALUES.store(true, Ordering::Relaxed);
}

fn version() -> u16 {
    if VALUES.load(Ordering::Relaxed) {
        fntrace_format::chunk::VERSION_DATA
    } else {
        fntrace_format::chunk::VERSION
    }
}

/// Stops the writer thread (it ends at its next wake-up).
pub fn stop() {
    STOP.store(true, Ordering::Relaxed);
    WAKE.notify_one();
}

/// Stops the writer thread and waits (up to a second) until it ended.
pub fn stop_and_wait() {
    stop();
    for _ in 0..1000 {
        if !RUNNING.load(Ordering::Acquire) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A forked child's files (the parent's files and partial marks are not
/// its own), or a new session's (`fntrace attach` again).
pub fn reset_in_child(files: &mut Files, dir: PathBuf) {
    files.files.clear();
    files.partial.clear();
    files.next.clear();
    files.bytes = 0;
    files.unwritten = 0;
    files.error = None;
    files.dir = Some(dir);
}

/// The events in `data`, a chunk's words (`TIME` and `LOST` words, and
/// payloads, are not events).
fn events_in(data: &[u8]) -> u64 {
    let mut words = data
        .chunks_exact(8)
        .map(|w| event::decode(u64::from_le_bytes(w.try_into().expect("8 bytes"))).0);
    let mut events = 0;
    while let Some(kind) = words.next() {
        if kind.has_payload() {
            words.next();
        }
        events += u64::from(!matches!(kind, event::Kind::Time | event::Kind::Lost));
    }
    events
}
