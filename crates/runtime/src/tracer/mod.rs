//! The tracers (`function`, `function_graph`, `profile`): clients of the
//! ops API that record into per-thread buffers, streamed by a writer thread
//! into the data directory (`docs/FORMAT.md`). Started by `FNTRACE_DATA`
//! (which `fntrace record` sets).

pub mod args;
#[cfg_attr(target_arch = "aarch64", path = "asm_aarch64.rs")]
mod asm;
mod clock;
mod ending;
pub mod fids;
mod graph;
mod process;
pub use process::no_follow;
mod profile;
mod retslot;
mod session;
mod thread;
mod unwind;
mod writer;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

use fntrace_arch::Shape;
use fntrace_filter::Filter;
use fntrace_format::settings::{self, Settings};

use crate::api::{self, Ops};
use crate::ops::{as_callback, Callback5, RawOps, SlotSite, FL_LIBCALLS, FL_RECURSION_SAFE, FL_SAVE_REGS};
use crate::state::State;

/// Which tracer: the settings' (`fntrace_format::settings`).
pub use fntrace_format::settings::Tracer;

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
    /// graph function, time filter, notrace or trigger; `function` without
    /// trigger; `profile` without depth limit, graph function, notrace or
    /// trigger, where the clock is the TSC).
    pub fast: bool,
    /// Which library calls are traced.
    pub libcall: settings::Libcall,
    graph: Filter,
    notrace: Filter,
    triggers: Vec<fids::Trigger>,
    /// What `-A`, `-R` and `-a` ask for (`function_graph` only).
    pub args: args::Specs,
}

/// The settings in force: each `Config` is leaked (threads may hold one
/// while a new one replaces it, after `fntrace ctl`).
static CONFIG: AtomicPtr<Config> = AtomicPtr::new(std::ptr::null_mut());
/// Bumped with each new `Config`: a thread whose copy of the per-thread
/// settings is older takes them again (`thread::enter`).
pub static GENERATION: AtomicU32 = AtomicU32::new(0);

/// The settings (tracing is on only after `start` set them).
pub fn config() -> &'static Config {
    configured().expect("tracer configured before any thread traces")
}

/// The settings, if the tracer was ever started.
pub fn configured() -> Option<&'static Config> {
    let p = CONFIG.load(Ordering::Acquire);
    // SAFETY: a non-null CONFIG came from `Box::leak` and is never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

fn set_config(config: Config) {
    CONFIG.store(Box::leak(Box::new(config)), Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

static FUNCTIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The number of function ids so far.
pub fn function_count() -> usize {
    FUNCTIONS.load(Ordering::Relaxed)
}

/// Starts the tracer if `FNTRACE_DATA` is set.
pub fn start_from_env() -> Result<(), String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if var(settings::DATA).is_none() {
        return Ok(());
    }
    start(&Settings::from_env(var).map_err(|e| e.to_string())?, false)
}

/// What a start or a change of settings needs besides the `Config`.
struct Parsed {
    config: Config,
    /// The ops' filter (with the functions graph, notrace and triggers need).
    filter: Vec<String>,
    /// The ops' own notrace (the function tracer's).
    ops_notrace: Vec<String>,
    buffer: u64,
    flight: Option<u64>,
}

/// Turns the settings (`FNTRACE_*`, read by `fntrace_format::settings`)
/// into a `Config` and the ops' filters.
fn parse(settings: &Settings) -> Result<Parsed, String> {
    let kind = settings.tracer;
    clock::setup();
    let p0 = clock::point();
    let time_filter_ns = settings.time_filter_ns.unwrap_or(0);
    let depth = settings.depth.unwrap_or(0);
    let graph = Filter::parse(&settings.graph_functions).map_err(|e| e.to_string())?;
    // function_graph and profile hide a notrace function with its callees
    // (uftrace's -N); the function tracer, which has no frames, only the
    // function itself (ftrace's set_ftrace_notrace).
    let hide_callees = kind != Tracer::Function;
    let notrace = if hide_callees {
        Filter::parse(&settings.notrace).map_err(|e| e.to_string())?
    } else {
        Filter::default()
    };
    let triggers = fids::parse_triggers(&settings.triggers)?;
    // Values are recorded with the calls of function_graph (under a time
    // filter, which writes whole calls at their end, only return values)
    // and with the function tracer's entries (arguments only); the
    // profiler keeps none. The command line says what is not recorded.
    if !cfg!(target_arch = "x86_64") && (!settings.args.is_empty() || settings.auto_args) {
        return Err(
            "recording arguments and return values is not built for this architecture yet (x86-64 only)"
                .into(),
        );
    }
    let args = if kind != Tracer::Profile {
        args::Specs {
            wanted: args::parse(&settings.args)?,
            auto: settings.auto_args,
            fast_returns: kind == Tracer::Graph && time_filter_ns == 0,
        }
    } else {
        args::Specs::default()
    };
    let starts_off = triggers.iter().any(|t| t.flags & fids::TRACE_ON != 0);
    // A buffer larger than a thread may map was refused by `from_env`; a
    // smaller one than the minimum is raised to it in `start`.
    let buffer = settings.buffer_size.unwrap_or(4 << 20);
    let flight = settings.flight;
    // Calibrate the time filter: a 2 ms look at the counter.
    let time_filter = if time_filter_ns == 0 {
        0
    } else {
        std::thread::sleep(std::time::Duration::from_millis(2));
        let rate = clock::ticks_per_ns(p0, clock::point());
        ((time_filter_ns as f64 * rate) as u64).max(1)
    };
    let mut filter = settings.filter.clone();
    if !filter.is_empty() {
        // Graph functions and trigger functions must be hooked too.
        filter.extend_from_slice(&settings.graph_functions);
        if hide_callees {
            filter.extend_from_slice(&settings.notrace);
        }
        for item in &settings.triggers {
            if let Some((f, _)) = item.split_once('@') {
                filter.extend(settings::patterns(f).map(str::to_string));
            }
        }
    }
    let config = Config {
        kind,
        max_depth: if depth == 0 { u32::MAX } else { depth },
        time_filter,
        has_graph: !graph.is_empty(),
        tracing: AtomicBool::new(!starts_off),
        fast: !settings.slow
            && triggers.is_empty()
            && match kind {
                Tracer::Graph => depth == 0 && graph.is_empty() && time_filter == 0 && notrace.is_empty(),
                Tracer::Function => true,
                // Its fast paths keep times with `rdtsc` (no chunk base to
                // count from): only where that is the clock.
                Tracer::Profile => depth == 0 && graph.is_empty() && notrace.is_empty() && clock::is_tsc(),
            },
        libcall: settings.libcall,
        graph,
        notrace,
        triggers,
        args,
    };
    Ok(Parsed {
        config,
        filter,
        ops_notrace: if hide_callees {
            Vec::new()
        } else {
            settings.notrace.clone()
        },
        buffer,
        flight,
    })
}

/// The tracer's ops while it is registered.
static OPS: Mutex<Option<Ops>> = Mutex::new(None);

fn ops_slot() -> std::sync::MutexGuard<'static, Option<Ops>> {
    OPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts tracing into the data directory `FNTRACE_DATA` with these
/// settings. `attached`: the runtime was loaded into a running process
/// (`fntrace attach`): the program's signal dispositions stay its own.
pub fn start(settings: &Settings, attached: bool) -> Result<(), String> {
    let root = settings.data.clone().ok_or("no data directory")?;
    let parsed = parse(settings)?;
    const _: () = assert!(thread::NCHUNKS as u64 == fntrace_format::limits::CHUNKS);
    let per_thread = parsed
        .flight
        .unwrap_or(parsed.buffer)
        .max(fntrace_format::limits::MIN_BUFFER);
    let chunk = (per_thread / thread::NCHUNKS as u64).next_multiple_of(4096);
    thread::CHUNK_BYTES.store(chunk, Ordering::Relaxed);
    thread::FLIGHT.store(parsed.flight.is_some(), Ordering::Relaxed);
    thread::LOSSY.store(settings.lossy, Ordering::Relaxed);
    let kind = parsed.config.kind;
    set_config(parsed.config);
    let parent = settings.parent_session.clone();
    // SAFETY: getppid cannot fail.
    let ppid = unsafe { libc::getppid() } as u32;
    let child = settings.recorder.is_some_and(|recorder| recorder != ppid);
    let session = session::open(&root, kind.name(), parent, child)
        .map_err(|e| format!("cannot write {}: {e}", root.display()))?;
    // A new session in a process traced before (attached again): what the
    // threads buffered since the last one ended is not this session's.
    if thread::FINISHED.load(Ordering::Acquire) {
        thread::reset_all();
        profile::reset_all();
        writer::reset_in_child(&mut writer::files(), session.dir.clone());
        thread::FINISHED.store(false, Ordering::SeqCst);
    } else {
        writer::files().dir = Some(session.dir.clone());
    }
    *session::lock() = Some(session);
    crate::notify::on_modules_added(on_modules);
    let libcall = settings.libcall;
    api::with_state(|state| {
        // Library calls marked (and named) before the names are written.
        crate::libcall::set_return_trampolines(asm::return_trampolines());
        crate::libcall::set_mode(state, libcall)?;
        on_modules(state);
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    process::install(parsed.flight.is_some(), attached);
    writer::start();
    static EXIT: Once = Once::new();
    // SAFETY: `finish` stays loaded (the runtime is never unloaded).
    EXIT.call_once(|| unsafe {
        libc::atexit(finish);
    });
    register(&parsed.filter, &parsed.ops_notrace)?;
    // Recording from here on: no file is renamed before the caller goes on
    // (`fntrace attach` counts its duration from the answer that follows).
    // A rename over `process.json`, written just before by `on_modules`,
    // can wait seconds for the writeback of the copy it replaces (ext4),
    // the directory locked meanwhile: the writer cannot create its files,
    // and the threads fill their buffers. The sites patched are counted
    // now and written with the writer's next refresh.
    api::with_state(|state| {
        if let Some(s) = session::lock().as_mut() {
            s.note_modules(state);
        }
        Ok(())
    })
    .map_err(|e| e.to_string())
}

/// Registers a new ops of the tracer in force, with this filter.
fn register(filter: &[String], ops_notrace: &[String]) -> Result<(), String> {
    let (entry, exit): (Callback5, Option<Callback5>) = match config().kind {
        Tracer::Function => (graph::function_entry, None),
        _ => (graph::graph_entry, Some(graph::graph_exit)),
    };
    let libcall = config().libcall;
    api::with_state(|state| crate::libcall::set_mode(state, libcall)).map_err(|e| e.to_string())?;
    let libcalls = if libcall == settings::Libcall::None {
        0
    } else {
        FL_LIBCALLS
    };
    // Values are read from the register frame: the generic routines
    // build it (the fast paths, which the functions with values skip, never
    // do).
    let regs = if config().args.is_empty() { 0 } else { FL_SAVE_REGS };
    if regs != 0 {
        writer::records_values();
    }
    let ops = Ops::with_site_slots(
        Some(as_callback(entry)),
        exit.map(as_callback),
        std::ptr::null_mut(),
        FL_RECURSION_SAFE | libcalls | regs,
        fast_slot,
    );
    ops.set_patterns(filter, ops_notrace).map_err(|e| e.to_string())?;
    if config().fast {
        // The routine the engine gives the ops's own slots (`state.rs`).
        let regs = ops.wants_regs();
        asm::set_fallback(ops.as_raw() as usize, |role| {
            crate::routines::routine(crate::routines::Variant { role, regs })
        });
        FAST_OPS.store(ops.as_raw() as usize, Ordering::Release);
    } else {
        FAST_OPS.store(0, Ordering::Release);
    }
    *ops_slot() = Some(ops);
    ops.register().map_err(|e| e.to_string())
}

/// Unregisters the tracer's ops (its sites go back to NOPs); false if
/// none was registered.
pub fn unregister() -> bool {
    let Some(ops) = ops_slot().take() else {
        return false;
    };
    let _ = ops.unregister();
    true
}

/// Takes new settings while recording (`fntrace ctl`), under a new
/// `Config`. While tracing stays on with the same tracer and the same
/// routines (fast or generic), the ops keeps its slots and only takes the
/// new filter: the sites whose wanting changes are patched, no others.
/// Otherwise the ops is replaced by a new one; with `on` false it stays
/// unregistered (tracing off).
pub fn reconfigure(settings: &Settings, on: bool) -> Result<(), String> {
    let parsed = parse(settings)?;
    let old = config();
    let kept = (*ops_slot()).filter(|_| {
        on && parsed.config.kind == old.kind
            && parsed.config.fast == old.fast
            && parsed.config.libcall == old.libcall
            && parsed.config.args.is_empty() == old.args.is_empty()
    });
    if kept.is_none() {
        unregister();
    }
    for t in thread::all() {
        t.fend.store(0, Ordering::Relaxed);
    }
    set_config(parsed.config);
    api::with_state(|state| {
        on_modules(state);
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    match kept {
        Some(ops) => ops
            .set_patterns(&parsed.filter, &parsed.ops_notrace)
            .map_err(|e| e.to_string()),
        None if on => register(&parsed.filter, &parsed.ops_notrace),
        None => Ok(()),
    }
}

/// Whether a session is open (started, perhaps only half-way).
pub fn has_session() -> bool {
    session::lock().is_some()
}

/// Ends the session (`fntrace attach` detaching): the ops is unregistered,
/// every buffer written, the writer stopped, `process.json` completed.
pub fn stop() {
    unregister();
    stop_recording();
    writer::stop_and_wait();
    write_out(true);
    *session::lock() = None;
    writer::files().dir = None;
    ending::uninstall();
}

/// Gives the engine the unwinder entry points the tracer wraps
/// (`unwind.rs`), to hook in a process it was attached to (`gothook.rs`):
/// attach control does, before it hooks anything.
pub fn give_unwind_hooks() {
    crate::gothook::set_client(crate::gothook::ClientHooks {
        names: unwind::names().to_vec(),
        wrappers: unwind::wrappers().to_vec(),
        set_real: unwind::set_real,
    });
}

/// How many threads have frames on their shadow stack: calls entered while
/// traced that have not returned (hijacked return addresses among them).
pub fn threads_inside() -> usize {
    thread::all()
        // The depth is in the cursor, an atomic word: at most a little
        // stale, which only delays the unhooking a detach does when it reads 0.
        .filter(|t| !t.dead.load(Ordering::Relaxed) && t.depth() > 0)
        .count()
}

/// The tracer's ops and its generic entry routine, when the fast paths are on.
static FAST_OPS: AtomicUsize = AtomicUsize::new(0);

/// The flags of a frame whose return is hijacked, for function `fid`:
/// with the tag of its return value where the fast return path records
/// it (`fids::ret_tag`).
pub(crate) fn hijacked_flags(fid: u32) -> u32 {
    thread::F_HIJACKED | u32::from(fids::ret_tag(fid)) << thread::F_RET_TAG_SHIFT
}

/// For a site of the tracer's ops that the fast entry path can serve: the
/// slot's data word (the `ENTRY` event word of its function) and routine
/// (the ops's [`crate::ops::SiteSlot`]).
fn fast_slot(ops: &RawOps, site: &SlotSite) -> Option<(usize, usize)> {
    if !asm::FAST_PATHS {
        return None;
    }
    let fast_ops = FAST_OPS.load(Ordering::Acquire);
    if fast_ops == 0 || ops as *const RawOps as usize != fast_ops || site.fid == fids::NO_FID {
        return None;
    }
    // Functions with values to record take the generic routine, which
    // builds the register frame; but at an entry site of function_graph,
    // integer arguments in their registers have fast entries of their own
    // (whose frames the fast exit of a function with exit sleds closes),
    // and an integer return value of a function whose return is hijacked
    // the fast return path (its tag in the frame's flags:
    // `thread::F_RET_TAG_SHIFT`). A function's entry and exit take the
    // fast paths together or not at all: a signal handler's traced calls
    // are then counted the same way as the calls they interrupt.
    let flags = fids::flags(site.fid);
    if flags & (fids::ARGS | fids::RETVAL) != 0 {
        let open = flags & fids::HAS_EXIT != 0;
        if flags & fids::PLAIN != 0 || config().kind != Tracer::Graph {
            return None;
        }
        let spec = fids::spec(site.fid)?;
        if flags & fids::RETVAL != 0 && (open || fids::ret_tag(site.fid) == 0) {
            return None;
        }
        let frame = if open {
            site.fid as u64
        } else {
            site.fid as u64 | (hijacked_flags(site.fid) as u64) << 32
        };
        return match site.role {
            fntrace_core::Role::Entry if flags & fids::ARGS == 0 => {
                Some((frame as usize, asm::fast_graph(site.role, site.shape, false)?))
            }
            fntrace_core::Role::Entry => Some((
                args::fast_words(site.fid, frame, args::fast_descriptor(spec)?)?,
                asm::fast_graph_args(open),
            )),
            fntrace_core::Role::Exit if open && args::fast_descriptor(spec).is_some() => {
                Some((frame as usize, asm::fast_graph(site.role, site.shape, true)?))
            }
            _ => None,
        };
    }
    use fntrace_format::event::{word_of, Kind};
    if let Shape::Bare { .. } = site.shape {
        // Bare sites keep every register: function_graph's own fast entry
        // for them; the other tracers take the bare generic routine.
        let open = fids::flags(site.fid) & fids::HAS_EXIT != 0;
        return match config().kind {
            Tracer::Graph => Some((
                (site.fid as u64 | (thread::F_HIJACKED as u64) << 32) as usize,
                asm::fast_graph_bare(open)?,
            )),
            _ => None,
        };
    }
    match config().kind {
        Tracer::Function => Some((
            word_of(Kind::EntryCaller, site.fid) as usize,
            asm::fast_caller(site.role)?,
        )),
        // The frame's `fid` and `flags` words as the fast path stores (or,
        // at an exit, expects) them; the ENTRY and EXIT words (kinds 0 and
        // 1) are `fid << 3 | kind`, which it derives.
        kind @ (Tracer::Graph | Tracer::Profile) => {
            let open = fids::flags(site.fid) & fids::HAS_EXIT != 0;
            let flags = if open { 0 } else { thread::F_HIJACKED as u64 };
            let routine = if kind == Tracer::Graph {
                asm::fast_graph(site.role, site.shape, open)?
            } else {
                asm::fast_profile(site.role, site.shape, open)?
            };
            Some(((site.fid as u64 | flags << 32) as usize, routine))
        }
    }
}

/// Called with the state locked when modules were added (subscribed to the
/// engine's notification: `notify.rs`): new function ids get their flags,
/// and their names go to `functions.tsv`.
fn on_modules(state: &State) {
    let Some(cfg) = configured() else { return };
    FUNCTIONS.store(state.functions.len(), Ordering::Relaxed);
    cfg.args.read_modules(state);
    fids::publish(state, &cfg.graph, &cfg.notrace, &cfg.triggers, &cfg.args);
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
        // not inside the tracer): no other `Owner` of it is live.
        let mut t = unsafe { thread::Owner::new(t) };
        if t.shared().chunk.load(Ordering::Relaxed) != usize::MAX && t.shared().used() > 0 {
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
        let _work = crate::sys::RuntimeWork::new();
        flush_all(true);
    });
}

fn write_profile() {
    let mut guard = session::lock();
    let Some(s) = guard.as_mut() else { return };
    // The calibration up to now: the writer refreshes it only every second,
    // and a shorter run would have none yet (ticks read as nanoseconds).
    s.take_clock_point();
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
    if let Err(e) = std::fs::File::create(path).and_then(|mut f| f.write_all(text.as_bytes())) {
        s.note(format!("cannot write {}: {e}", fntrace_format::layout::PROFILE));
    }
}
