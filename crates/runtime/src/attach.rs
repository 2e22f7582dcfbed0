//! The runtime's side of `fntrace attach`: loaded into a running process
//! (the CLI makes one of its threads call `dlopen`, then
//! [`fntrace_attach`]), it starts a control thread and returns at once; the
//! thread takes the process's sites over, records like `fntrace record`,
//! obeys `fntrace ctl` over a Unix socket, and on `detach` puts everything
//! back.
//!
//! The library is loaded through a link named [`ATTACH_NAME`], so that its
//! constructor knows not to set up inside the thread the CLI stopped: every
//! slow step (discovery, patching) runs here while the program runs.
//!
//! Protocol (`fntrace_format::control`): one line per connection, one
//! line back (`ok ...` or `error ...`): `ready`, `[force] filter PATTERNS`,
//! `[force] notrace PATTERNS` (without `force`, refused with `error
//! unmatched PATTERN` when a pattern matches no function with a site),
//! `depth N`, `tracing on|off`, `status`, `detach`. The socket is `0600`, in a
//! directory the CLI made `0700` (docs/ATTACH.md).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fntrace_format::control;

use crate::{api, loader, tracer};

/// The file name the CLI gives the library when it injects it.
pub const ATTACH_NAME: &str = "libfntrace_attach.so";

pub use crate::presence::attached;
use crate::presence::{ACTIVE, ATTACHED};

/// `fntrace_attach(config)`: starts an attach session whose settings are in
/// the file `config` (`KEY=VALUE` lines). Returns 0 when the control thread
/// started, -1 for a bad argument or no thread, -2 if the process is
/// already traced from its start, -3 if a session is already open.
///
/// # Safety
/// `config` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn fntrace_attach(config: *const c_char) -> c_int {
    let _errno = crate::sys::ErrnoGuard::new();
    if config.is_null() {
        return -1;
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let path = unsafe { CStr::from_ptr(config) }.to_string_lossy().into_owned();
    crate::no_unwind("attach", || start(path))
}

/// Loaded by `fntrace attach` (the constructor, under [`ATTACH_NAME`] at
/// `library`): starts the session whose settings the CLI wrote beside the
/// link, `PID.conf` — the CLI then stops the thread only for `dlopen`.
pub fn from_constructor(library: &str) {
    let Some((dir, _)) = library.rsplit_once('/') else {
        return;
    };
    let settings = format!("{dir}/{}.conf", std::process::id());
    if std::path::Path::new(&settings).is_file() {
        start(settings);
    }
}

/// Starts the control thread: 0, or -1, -2, -3 as `fntrace_attach` says.
fn start(settings: String) -> c_int {
    if !attached() && api::lock().is_some() {
        return -2;
    }
    if ACTIVE.swap(true, Ordering::AcqRel) {
        return -3;
    }
    ATTACHED.store(true, Ordering::Relaxed);
    match crate::sys::spawn_quiet("fntrace-ctl", move || {
        crate::no_unwind("attach", || serve(&settings))
    }) {
        Ok(()) => 0,
        Err(_) => {
            ACTIVE.store(false, Ordering::Release);
            -1
        }
    }
}

/// The session's settings, as `fntrace record` passes them in the
/// environment.
type Settings = HashMap<String, String>;

fn read_settings(path: &str) -> Result<Settings, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .collect())
}

fn lookup(settings: &Settings) -> impl Fn(&str) -> Option<String> + '_ {
    |key| settings.get(key).filter(|v| !v.trim().is_empty()).cloned()
}

fn listen(path: &str) -> std::io::Result<UnixListener> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// The control thread.
fn serve(config: &str) {
    let settings = match read_settings(config) {
        Ok(s) => s,
        Err(_) => {
            ACTIVE.store(false, Ordering::Release);
            return;
        }
    };
    let Some(socket) = settings.get("FNTRACE_CTL").cloned() else {
        ACTIVE.store(false, Ordering::Release);
        return;
    };
    let Ok(listener) = listen(&socket) else {
        ACTIVE.store(false, Ordering::Release);
        return;
    };
    let mut session = Session {
        settings,
        tracing: true,
        started: false,
    };
    let start = Instant::now();
    let ready = session
        .begin()
        .map(|summary| format!("{summary} setup_us={}", start.elapsed().as_micros()));
    if ready.is_err() {
        // Nothing was left recording; sites are back as they were.
        let _ = session.end();
    }
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let done = match &ready {
            Ok(summary) => answer(&mut session, stream, summary),
            Err(e) => {
                reply(stream, &Err(e.clone()));
                true
            }
        };
        if done {
            break;
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(&socket);
    ACTIVE.store(false, Ordering::Release);
}

fn reply(mut stream: UnixStream, result: &Result<String, String>) {
    let line = match result {
        Ok(text) if text.is_empty() => format!("{}\n", control::OK),
        Ok(text) => format!("{} {text}\n", control::OK),
        Err(e) => format!("{} {}\n", control::ERROR, e.replace('\n', " ")),
    };
    let _ = stream.write_all(line.as_bytes());
}

/// Serves one request; true when the session is over.
fn answer(session: &mut Session, stream: UnixStream, summary: &str) -> bool {
    let mut line = String::new();
    if BufReader::new(&stream).read_line(&mut line).is_err() {
        return false;
    }
    let line = line.trim();
    let (force, line) = match line.strip_prefix(control::FORCE) {
        Some(rest) if rest.starts_with(' ') => (true, rest.trim_start()),
        _ => (false, line),
    };
    let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
    let rest = rest.trim();
    let result = match verb {
        control::FILTER => session.filter("FNTRACE_FILTER", rest, force),
        control::NOTRACE => session.filter("FNTRACE_NOTRACE", rest, force),
        _ if force => Err(format!(
            "'{}' goes before '{}' or '{}'",
            control::FORCE,
            control::FILTER,
            control::NOTRACE
        )),
        control::READY => Ok(summary.to_string()),
        control::STATUS => Ok(session.status()),
        control::DEPTH => match rest.parse::<u32>() {
            Ok(n) => session.change("FNTRACE_DEPTH", &n.to_string()),
            Err(_) => Err(format!("bad depth '{rest}' (a number; 0: no limit)")),
        },
        control::TRACING => match rest {
            "on" => session.switch(true),
            "off" => session.switch(false),
            _ => Err(format!("tracing takes on or off, not '{rest}'")),
        },
        control::DETACH => {
            let r = session.end();
            reply(stream, &r);
            return true;
        }
        _ => Err(format!("unknown command '{verb}'")),
    };
    reply(stream, &result);
    false
}

/// Nothing interposes `dlopen` and `dlclose` in a process we attached to:
/// before each change, the modules unloaded since are forgotten (their
/// code must not be touched) and those loaded since are taken in.
fn refresh_modules() {
    let _ = api::with_state(|state| {
        loader::unload_gone(state);
        loader::load_new(state, true);
        Ok(())
    });
}

/// An open attach session.
struct Session {
    settings: Settings,
    /// `tracing on` (the tracer's ops registered).
    tracing: bool,
    /// The tracer started (a session directory is open).
    started: bool,
}

impl Session {
    /// Takes the process over: set up (first time) or take the sites over
    /// again, then start the tracer.
    fn begin(&mut self) -> Result<String, String> {
        if api::lock().is_none() {
            crate::setup()?;
        } else {
            api::with_state(|state| {
                loader::unload_gone(state);
                loader::load_new(state, true);
                state.set_original(false);
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        }
        let sites = api::stats().map_err(|e| e.to_string())?.sites;
        if sites == 0 {
            return Err("the process has no patchable sites".into());
        }
        let hooks = crate::gothook::install();
        let started = tracer::start(&lookup(&self.settings), true);
        // A start that failed half-way (a site refused, say) may have its
        // session and writer running: the detach must stop them too.
        self.started = tracer::has_session();
        started?;
        Ok(format!("{} unwind_hooks={hooks}", self.status()))
    }

    /// `sites=N patched=M`.
    fn status(&self) -> String {
        let sites = api::sites().unwrap_or_default();
        let patched = sites.iter().filter(|s| s.state != "nop").count();
        format!(
            "sites={} patched={patched} tracing={}",
            sites.len(),
            if self.tracing { "on" } else { "off" }
        )
    }

    /// A new filter (`key` is `FNTRACE_FILTER` or `FNTRACE_NOTRACE`),
    /// applied at once; refused, the filter in force kept, when one of its
    /// patterns matches no function with a site, unless `force`.
    fn filter(&mut self, key: &str, patterns: &str, force: bool) -> Result<String, String> {
        refresh_modules();
        if !force {
            if let Some(pattern) = api::unmatched(patterns).map_err(|e| e.to_string())? {
                return Err(control::unmatched(&pattern));
            }
        }
        self.apply(key, patterns)
    }

    /// A new value for one setting, applied at once.
    fn change(&mut self, key: &str, value: &str) -> Result<String, String> {
        refresh_modules();
        self.apply(key, value)
    }

    /// A new value for one setting, applied at once; the old one is put
    /// back if the new one fails.
    fn apply(&mut self, key: &str, value: &str) -> Result<String, String> {
        let old = self.settings.insert(key.to_string(), value.to_string());
        let result = tracer::reconfigure(&lookup(&self.settings), self.tracing);
        match result {
            Ok(()) => Ok(self.status()),
            Err(e) => {
                // Back to the settings in force.
                match old {
                    Some(v) => self.settings.insert(key.to_string(), v),
                    None => self.settings.remove(key),
                };
                let _ = tracer::reconfigure(&lookup(&self.settings), self.tracing);
                Err(e)
            }
        }
    }

    fn switch(&mut self, on: bool) -> Result<String, String> {
        refresh_modules();
        self.tracing = on;
        tracer::reconfigure(&lookup(&self.settings), on)?;
        Ok(self.status())
    }

    /// Detaches: the tracer stops (every buffer written), then every site
    /// gets its original bytes back. The runtime stays loaded, quiet: a
    /// thread still inside a traced call returns through its return
    /// trampoline, which must outlive every such call.
    fn end(&mut self) -> Result<String, String> {
        // Libraries unloaded meanwhile are forgotten; new ones are not
        // taken in (they would be patched only to be given back).
        api::with_state(|state| {
            loader::unload_gone(state);
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        if std::mem::take(&mut self.started) {
            tracer::stop();
        } else {
            tracer::unregister();
        }
        let swapped = api::with_state(|state| Ok(state.set_original(true))).map_err(|e| e.to_string())?;
        // The unwinder's hooks stay while a thread may still return through
        // a hijacked address (an exception then must find it put back).
        let mut inside = tracer::threads_inside();
        for _ in 0..20 {
            if inside == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            inside = tracer::threads_inside();
        }
        let unhooked = if inside == 0 { crate::gothook::remove() } else { 0 };
        Ok(format!(
            "restored={} refused={} threads_inside={inside} unhooked={unhooked}",
            swapped.written, swapped.refused
        ))
    }
}
