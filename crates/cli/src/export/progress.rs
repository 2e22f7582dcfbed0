//! The threads' event streams of an export, with a progress bar on stderr
//! when it is a terminal. The bar's total is the size of the thread files
//! (times the number of passes over them); it advances by the bytes the
//! readers actually read, counted under the format crate's reader by a
//! wrapper around the file.

use std::fs::File;
use std::io::{self, IsTerminal, Read};
// A mutex, not an AtomicU64: 32-bit MIPS has no 64-bit atomics. It is
// taken once per read of a file's buffer.
use std::sync::{Arc, Mutex};

use crate::narrow::{Narrowed, Narrowing};
use fntrace_format::layout;
use fntrace_format::read::{Process, RawEvents, ThreadEvents};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Events between two updates of the bar (a power of two).
const EVERY: u64 = 1 << 16;

/// Opens thread streams, narrowed as the reading asks, and shows how far
/// they have been read.
pub struct Progress {
    bar: Option<ProgressBar>,
    read: Arc<Mutex<u64>>,
    narrowing: Narrowing,
}

impl Progress {
    /// A bar over `passes` readings of the files of `threads` (each
    /// narrowed by `narrowing`), labelled `what`; shown only when stderr is
    /// a terminal.
    pub fn new(threads: &[(&Process, Vec<u32>)], narrowing: Narrowing, passes: u64, what: &str) -> Progress {
        let passes = passes * narrowing.passes();
        let bar = io::stderr().is_terminal().then(|| {
            let total: u64 = threads
                .iter()
                .flat_map(|(p, tids)| tids.iter().map(move |&t| file_size(p, t)))
                .sum();
            let bar = ProgressBar::with_draw_target(
                Some(total.saturating_mul(passes)),
                ProgressDrawTarget::stderr(),
            );
            if let Ok(style) = ProgressStyle::with_template("{msg} [{wide_bar}] {bytes}/{total_bytes} {eta}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(what.to_string());
            bar
        });
        Progress {
            bar,
            read: Arc::new(Mutex::new(0)),
            narrowing,
        }
    }

    /// The events of thread `tid` of `process`, as [`Process::events`]
    /// gives them, narrowed, with the bytes read counted.
    pub fn events(&self, process: &Process, tid: u32) -> Narrowed {
        self.narrowing.events(process, || {
            let file = layout::thread_file(tid);
            let label = format!("{}/{file}", process.name);
            let raw = RawEvents::open_with(&process.dir.join(&file), label, Some(tid), |inner| Counted {
                inner,
                read: Arc::clone(&self.read),
            });
            ThreadEvents::new(raw, process.info.clock.clone())
        })
    }

    /// Moves the bar when `events` (a running count) is a multiple of a
    /// step; cheap to call for every event.
    pub fn tick(&self, events: u64) {
        if events & (EVERY - 1) == 0 {
            self.update();
        }
    }

    /// Moves the bar to the bytes read so far.
    pub fn update(&self) {
        if let Some(bar) = &self.bar {
            bar.set_position(*self.read.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }

    /// Removes the bar (before warnings and errors are printed).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The size of a thread's file (0 if it cannot be read).
fn file_size(process: &Process, tid: u32) -> u64 {
    std::fs::metadata(process.dir.join(layout::thread_file(tid))).map_or(0, |m| m.len())
}

/// A reader that adds the bytes it reads to a shared counter.
struct Counted {
    inner: File,
    read: Arc<Mutex<u64>>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        *self.read.lock().unwrap_or_else(|e| e.into_inner()) += n as u64;
        Ok(n)
    }
}
