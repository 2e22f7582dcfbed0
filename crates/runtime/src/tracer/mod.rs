//! The tracers (`function`, `function_graph`, `profile`): clients of the
//! ops API that record into per-thread buffers, streamed by a writer thread
//! into the data directory (`docs/FORMAT.md`). Started by `FNTRACE_DATA`
//! (which `fntrace record` sets).

mod asm;
mod clock;
pub mod fids;
mod graph;
mod process;
mod profile;
mod session;
mod thread;
mod unwind;
mod writer;

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use fntrace_sites::filter::Filter;

use crate::api::{self, Ops};
use crate::ops::{Callback, RawOps, FL_RECURSION_SAFE};
use crate::routines::Regs;
use crate::state::State;

/// Which tracer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracer {
    /// Entries with their callers.
    Function,
    /// Entries and exits.
    Graph,
    /// Counts and times, no events.
    Profile,
}

/// The tracer's settings, fixed at start.
#[derive(Debug)]
pub struct Config {
    /// Which tracer.
    pub kind: Tracer,
    /// `--depth` (`u32::MAX`: none).
    pub max_depth: u32,
    /// `--time-filter`, in ticks (0: none).
    pub time_filter: u64,
    /// `--graph-function` given.
    pub has_graph: bool,
    /// Tracing on (triggers switch it).
    pub tracing: AtomicBool,
    /// The fast paths may run (`function_graph` without depth limit,
    /// graph function, time filter or trigger).
    pub fast: bool,
    graph: Filter,
    notrace: Filter,
    triggers: Vec<fids::Trigger>,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The settings (tracing is on only after `start` set them).
pub fn config() -> &'static Config {
    CONFIG.get().expect("tracer configured before any thread traces")
}

static FUNCTIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The number of function ids so far.
pub fn function_count() -> usize {
    FUNCTIONS.load(Ordering::Relaxed)
}

type Callback5 = unsafe extern "C" fn(usize, usize, *mut RawOps, *mut Regs, *mut usize);

fn as_callback(f: Callback5) -> Callback {
    // SAFETY: the routines pass a fifth argument (the return slot) in r8;
    // the SysV ABI lets a function with four parameters ignore it, and one
    // with five read it.
    unsafe { std::mem::transmute::<Callback5, Callback>(f) }
}

fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, mult) = match t.as_bytes().last() {
        Some(b'K' | b'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&t[..t.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .map(|n| n * mult)
        .map_err(|_| format!("bad size '{text}'"))
}

/// Starts the tracer if `FNTRACE_DATA` is set.
pub fn start_from_env() -> Result<(), String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let Some(root) = var("FNTRACE_DATA") else {
        return Ok(());
    };
    let kind = match var("FNTRACE_TRACER").as_deref() {
        None | Some("function_graph") => Tracer::Graph,
        Some("function") => Tracer::Function,
        Some("profile") => Tracer::Profile,
        Some(other) => return Err(format!("unknown tracer '{other}'")),
    };
    clock::setup();
    let p0 = clock::point();
    let time_filter_ns: u64 =
        var("FNTRACE_TIME_FILTER").map_or(Ok(0), |v| v.parse().map_err(|_| "bad FNTRACE_TIME_FILTER"))?;
    let depth: u32 = var("FNTRACE_DEPTH").map_or(Ok(0), |v| v.parse().map_err(|_| "bad FNTRACE_DEPTH"))?;
    let graph_text = var("FNTRACE_GRAPH_FUNCTION").unwrap_or_default();
    let graph = api::parse_filter(&graph_text).map_err(|e| e.to_string())?;
    let notrace_text = var("FNTRACE_NOTRACE").unwrap_or_default();
    // function_graph and profile hide a notrace function with its callees
    // (uftrace's -N); the function tracer, which has no frames, only the
    // function itself (ftrace's set_ftrace_notrace).
    let hide_callees = kind != Tracer::Function;
    let notrace = if hide_callees {
        api::parse_filter(&notrace_text).map_err(|e| e.to_string())?
    } else {
        Filter::default()
    };
    let triggers = fids::parse_triggers(&var("FNTRACE_TRIGGERS").unwrap_or_default())?;
    let starts_off = triggers.iter().any(|t| t.flags & fids::TRACE_ON != 0);
    let buffer = var("FNTRACE_BUFFER_SIZE").map_or(Ok(4 << 20), |v| parse_size(&v))?;
    let flight = var("FNTRACE_FLIGHT").map(|v| parse_size(&v)).transpose()?;
    let per_thread = flight.unwrap_or(buffer).max(thread::NCHUNKS as u64 * 4096);
    let chunk = (per_thread / thread::NCHUNKS as u64).next_multiple_of(4096);
    thread::CHUNK_BYTES.store(chunk, Ordering::Relaxed);
    thread::FLIGHT.store(flight.is_some(), Ordering::Relaxed);
    // Calibrate the time filter: a 2 ms look at the counter.
    let time_filter = if time_filter_ns == 0 {
        0
    } else {
        std::thread::sleep(std::time::Duration::from_millis(2));
        let rate = clock::ticks_per_ns(p0, clock::point());
        ((time_filter_ns as f64 * rate) as u64).max(1)
    };
    let _ = CONFIG.set(Config {
        kind,
        max_depth: if depth == 0 { u32::MAX } else { depth },
        time_filter,
        has_graph: !graph.is_empty(),
        tracing: AtomicBool::new(!starts_off),
        fast: var("FNTRACE_SLOW").is_none()
            && triggers.is_empty()
            && match kind {
                Tracer::Graph => depth == 0 && graph.is_empty() && time_filter == 0 && notrace.is_empty(),
                Tracer::Function => true,
                Tracer::Profile => false,
            },
        graph,
        notrace,
        triggers,
    });
    let tracer_name = match kind {
        Tracer::Function => "function",
        Tracer::Graph => "function_graph",
        Tracer::Profile => "profile",
    };
    let root = PathBuf::from(root);
    let parent = var("FNTRACE_PARENT_SESSION");
    let session = session::open(&root, tracer_name, parent)
        .map_err(|e| format!("cannot write {}: {e}", root.display()))?;
    writer::files().dir = Some(session.dir.clone());
    *session::lock() = Some(session);
    api::with_state(|state| {
        on_modules(state);
        Ok(())
    })
    .map_err(|e| e.to_string())?;

    let (entry, exit): (Callback5, Option<Callback5>) = match kind {
        Tracer::Function => (graph::function_entry, None),
        _ => (graph::graph_entry, Some(graph::graph_exit)),
    };
    let ops = Ops::new(
        Some(as_callback(entry)),
        exit.map(as_callback),
        std::ptr::null_mut(),
        FL_RECURSION_SAFE,
    );
    let mut filter = var("FNTRACE_FILTER").unwrap_or_default();
    if !filter.trim().is_empty() {
        // Graph functions and trigger functions must be hooked too.
        filter.push(' ');
        filter.push_str(&graph_text);
        if hide_callees {
            filter.push(' ');
            filter.push_str(&notrace_text);
        }
        for item in var("FNTRACE_TRIGGERS").unwrap_or_default().split(';') {
            if let Some((f, _)) = item.split_once('@') {
                filter.push(' ');
                filter.push_str(f.trim());
            }
        }
    }
    let ops_notrace = if hide_callees { String::new() } else { notrace_text };
    ops.set_filter(&filter, &ops_notrace).map_err(|e| e.to_string())?;
    if config().fast {
        asm::set_fallback(ops.as_raw() as usize, |role| {
            crate::routines::routine(crate::routines::Variant { role, regs: false })
        });
        let _ = FAST_OPS.set(ops.as_raw() as usize);
    }
    process::install(flight.is_some());
    writer::start();
    // SAFETY: `finish` stays loaded (the runtime is never unloaded).
    unsafe { libc::atexit(finish) };
    ops.register().map_err(|e| e.to_string())?;
    api::with_state(|state| {
        if let Some(s) = session::lock().as_mut() {
            s.take_modules(state);
        }
        Ok(())
    })
    .map_err(|e| e.to_string())
}

/// The tracer's ops and its generic entry routine, when the fast paths are on.
static FAST_OPS: OnceLock<usize> = OnceLock::new();

/// For a site of the tracer's ops that the fast entry path can serve: the
/// slot's data word (the `ENTRY` event word of its function) and routine.
pub fn fast_slot(ops: &RawOps, site: &crate::state::Site) -> Option<(usize, usize)> {
    let fast_ops = *FAST_OPS.get()?;
    if ops as *const RawOps as usize != fast_ops || site.fid == fids::NO_FID {
        return None;
    }
    use fntrace_format::event::{word_of, Kind};
    match config().kind {
        Tracer::Function => Some((
            word_of(Kind::EntryCaller, site.fid) as usize,
            asm::fast_caller(site.role)?,
        )),
        // The frame's `fid` and `flags` words as the fast path stores (or,
        // at an exit, expects) them; the ENTRY and EXIT words (kinds 0 and
        // 1) are `fid << 3 | kind`, which it derives.
        Tracer::Graph => {
            let open = fids::flags(site.fid) & fids::HAS_EXIT != 0;
            let flags = if open { 0 } else { thread::F_HIJACKED as u64 };
            Some((
                (site.fid as u64 | flags << 32) as usize,
                asm::fast_graph(site.role, site.shape, open)?,
            ))
        }
        _ => None,
    }
}

/// Called with the state locked when modules were added: new function ids
/// get their flags, and their names go to `functions.tsv`.
pub fn on_modules(state: &State) {
    let Some(cfg) = CONFIG.get() else { return };
    FUNCTIONS.store(state.functions.len(), Ordering::Relaxed);
    fids::publish(state, &cfg.graph, &cfg.notrace, &cfg.triggers);
    if let Some(s) = session::lock().as_mut() {
        s.take_modules(state);
    }
}

/// A thread traced for the first time.
fn on_thread_start() {
    process::on_thread_start();
}

/// Writes everything out: at exit, or before `exec`.
pub fn flush_all(ended: bool) {
    thread::FINISHED.store(true, Ordering::Release);
    for t in thread::all() {
        t.fend.store(0, Ordering::Relaxed);
    }
    let t = thread::current_raw();
    if !t.is_null() {
        // SAFETY: this thread's own state; no event is being written (we are
        // not inside the tracer).
        let t = unsafe { &mut *t };
        if t.chunk != usize::MAX && t.used() > 0 {
            let _ = t.switch();
        }
    }
    writer::stop();
    write_out(ended);
}

/// Stops recording on every thread (the writer's final flush).
pub fn stop_recording() {
    thread::FINISHED.store(true, Ordering::Release);
    for t in thread::all() {
        t.fend.store(0, Ordering::Relaxed);
    }
}

/// Writes every buffer, the profile and the final `process.json`.
pub fn write_out(ended: bool) {
    writer::flush(true);
    if config().kind == Tracer::Profile {
        write_profile();
    }
    session::refresh(ended);
}

extern "C" fn finish() {
    crate::no_unwind("the tracer's exit", || {
        let _errno = crate::sys::ErrnoGuard::new();
        flush_all(true);
    });
}

fn write_profile() {
    let guard = session::lock();
    let Some(s) = guard.as_ref() else { return };
    let rate = s.ticks_per_ns();
    let ns = |t: u64| (t as f64 / rate) as u64;
    let mut text = String::from(fntrace_format::meta::ProfileRow::HEADER);
    text.push('\n');
    for (fid, [calls, total, self_, min, max]) in profile::totals() {
        let row = fntrace_format::meta::ProfileRow {
            fid,
            calls,
            total_ns: ns(total),
            self_ns: ns(self_),
            min_ns: ns(min),
            max_ns: ns(max),
        };
        text.push_str(&row.to_line());
    }
    let path = s.dir.join(fntrace_format::layout::PROFILE);
    if let Ok(mut f) = std::fs::File::create(path) {
        let _ = f.write_all(text.as_bytes());
    }
}
