//! The runtime's side of `fntrace attach`: loaded into a running process
//! (the CLI makes one of its threads call `dlopen`, then
//! [`fntrace_attach`]), it starts a control thread and returns at once; the
//! thread takes the process's sites over, records like `fntrace record`,
//! obeys `fntrace ctl` over a Unix socket, and on `detach` puts everything
//! back.
//!
//! The library is loaded through a link named
//! `fntrace_format::control::ATTACH_NAME`, so that its constructor knows
//! not to set up inside the thread the CLI stopped: every slow step
//! (discovery, patching) runs here while the program runs.
//!
//! Protocol (`fntrace_format::control`, where both sides encode and parse
//! it; the settings file has the `FNTRACE_*` settings of
//! `fntrace_format::settings`): one line per connection, one
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
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fntrace_format::control::{self, Request};
use fntrace_format::settings::{self, Settings, SettingsError};

use crate::{api, loader, tracer};

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

/// Loaded by `fntrace attach` (the constructor, under `ATTACH_NAME` at
/// `library`): starts the session whose settings the CLI wrote beside the
/// link, `PID.conf` — the CLI then stops the thread only for `dlopen`.
pub fn from_constructor(library: &str) {
    let Some((dir, _)) = library.rsplit_once('/') else {
        return;
    };
    let settings = control::settings_file(Path::new(dir), std::process::id());
    if !settings.is_file() {
        return;
    }
    let settings = settings.to_string_lossy().into_owned();
    let why = match start(settings.clone()) {
        0 => return,
        -2 => "the process is already traced from its start",
        -3 => "a session is already open",
        _ => "cannot start the control thread",
    };
    say_why(&settings, why);
}

/// Says in the settings' start-error file why the session could not start
/// (`fntrace attach` reads it while it waits for the socket).
fn say_why(settings: &str, why: &str) {
    // Written whole under another name, then renamed: the CLI polls for the
    // file and must never read it half written.
    let file = control::start_error_file(Path::new(settings));
    let partial = file.with_extension("err.partial");
    if std::fs::write(&partial, format!("{why}\n")).is_ok() {
        let _ = std::fs::rename(&partial, &file);
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

/// The settings file's `KEY=VALUE` lines: the variables `fntrace record`
/// would set.
type Lines = HashMap<String, String>;

fn read_settings(path: &str) -> Result<Lines, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .collect())
}

fn lookup(lines: &Lines) -> impl Fn(&str) -> Option<String> + '_ {
    |key| lines.get(key).filter(|v| !v.trim().is_empty()).cloned()
}

fn listen(path: &str) -> std::io::Result<UnixListener> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// The control thread.
fn serve(config: &str) {
    let give_up = |why: String| {
        say_why(config, &why);
        ACTIVE.store(false, Ordering::Release);
    };
    let lines = match read_settings(config) {
        Ok(s) => s,
        Err(e) => return give_up(e),
    };
    let Some(socket) = lines.get(settings::CTL).cloned() else {
        return give_up(format!("no {} in {config}", settings::CTL));
    };
    let listener = match listen(&socket) {
        Ok(l) => l,
        Err(e) => return give_up(format!("cannot listen on {socket}: {e}")),
    };
    let parsed = Settings::from_env(lookup(&lines));
    let mut session = Session {
        settings: parsed.clone().unwrap_or_default(),
        tracing: true,
        started: false,
    };
    let start = Instant::now();
    let ready = session
        .begin(parsed)
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
                // The request read first: a socket closed with it unread
                // is reset, and the reason would be lost with the reply.
                let _ = BufReader::new(&stream).read_line(&mut String::new());
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
    let line = format!("{}\n", control::answer(result));
    let _ = stream.write_all(line.as_bytes());
}

/// Serves one request; true when the session is over.
fn answer(session: &mut Session, stream: UnixStream, summary: &str) -> bool {
    let mut line = String::new();
    if BufReader::new(&stream).read_line(&mut line).is_err() {
        return false;
    }
    let result = match Request::parse(&line) {
        Err(e) => Err(e.to_string()),
        Ok(Request::Filter { patterns, force }) => session.filter(patterns, force, |s, p| s.filter = p),
        Ok(Request::Notrace { patterns, force }) => session.filter(patterns, force, |s, p| s.notrace = p),
        Ok(Request::Ready) => Ok(summary.to_string()),
        Ok(Request::Status) => Ok(session.status()),
        Ok(Request::Depth(n)) => session.change(|s| s.depth = Some(n)),
        Ok(Request::Tracing(on)) => session.switch(on),
        Ok(Request::Detach) => {
            let r = session.end();
            reply(stream, &r);
            return true;
        }
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
    /// The settings in force.
    settings: Settings,
    /// `tracing on` (the tracer's ops registered).
    tracing: bool,
    /// The tracer started (a session directory is open).
    started: bool,
}

impl Session {
    /// Takes the process over: set up (first time) or take the sites over
    /// again, then start the tracer with `settings`.
    fn begin(&mut self, settings: Result<Settings, SettingsError>) -> Result<String, String> {
        if let Ok(settings) = &settings {
            loader::want_library_names(settings.names_modules());
        }
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
        // The tracer's unwinder wrappers are hooked before any site is
        // switched on: an exception thrown meanwhile must find them.
        tracer::give_unwind_hooks();
        let hooks = crate::gothook::install();
        let started = match &settings {
            Ok(settings) => tracer::start(settings, true),
            Err(e) => Err(e.to_string()),
        };
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

    /// A new filter (`set` puts it in the filter or the notrace list),
    /// applied at once; refused, the filter in force kept, when one of its
    /// patterns matches no function with a site, unless `force`.
    fn filter(
        &mut self,
        patterns: Vec<String>,
        force: bool,
        set: fn(&mut Settings, Vec<String>),
    ) -> Result<String, String> {
        refresh_modules();
        if !force {
            if let Some(pattern) = api::unmatched(&patterns).map_err(|e| e.to_string())? {
                return Err(control::unmatched(&pattern));
            }
        }
        self.apply(|settings| set(settings, patterns))
    }

    /// A new value for one setting, applied at once.
    fn change(&mut self, change: impl FnOnce(&mut Settings)) -> Result<String, String> {
        refresh_modules();
        self.apply(change)
    }

    /// A new value for one setting, applied at once; the settings in force
    /// are put back if the new ones fail.
    fn apply(&mut self, change: impl FnOnce(&mut Settings)) -> Result<String, String> {
        let mut new = self.settings.clone();
        change(&mut new);
        match tracer::reconfigure(&new, self.tracing) {
            Ok(()) => {
                self.settings = new;
                Ok(self.status())
            }
            Err(e) => {
                // Back to the settings in force.
                let _ = tracer::reconfigure(&self.settings, self.tracing);
                Err(e)
            }
        }
    }

    fn switch(&mut self, on: bool) -> Result<String, String> {
        refresh_modules();
        self.tracing = on;
        tracer::reconfigure(&self.settings, on)?;
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
        // Bare sites on now get their own bytes back as they are turned off.
        let bare = |on: bool| {
            api::with_state(|state| {
                Ok(state
                    .core
                    .modules()
                    .flat_map(|(m, module)| module.sites.iter().enumerate().map(move |(i, r)| (m, i, r)))
                    .filter(|(_, _, r)| matches!(r.data.shape, fntrace_arch::Shape::Bare { .. }))
                    .filter(|(_, _, r)| (r.in_effect != fntrace_core::Target::Nop) == on)
                    .map(|(m, i, _)| (m, i))
                    .collect::<std::collections::BTreeSet<_>>())
            })
            .unwrap_or_default()
        };
        let bare_on = bare(true);
        if std::mem::take(&mut self.started) {
            tracer::stop();
        } else {
            tracer::unregister();
        }
        let bare_off = bare(false).intersection(&bare_on).count();
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
            swapped.written + bare_off,
            swapped.refused
        ))
    }
}
