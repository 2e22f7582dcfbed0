//! `fntrace attach PID [OPTIONS]`: records a process that is already
//! running, then leaves it as it was. One of its threads is stopped for a
//! moment (ptrace) to load the runtime and start its control thread; the
//! runtime takes the sites over while the program runs, records like
//! `fntrace record`, and on detach puts every site's bytes back.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use fntrace_format::control as protocol;
use fntrace_format::layout;
use fntrace_format::meta::{AttachInfo, RunInfo, VERSION};
use fntrace_format::units::parse_duration;
use fntrace_inject::InjectError;

use crate::cmd::record::{self, Options};
use crate::control::{self, Failure};
use crate::launch;
use crate::options::RecordFlags;
use crate::units::human;
use crate::unmatched;

const AFTER_HELP: &str = "\
Recording goes on until Ctrl-C, --duration, 'fntrace ctl PID detach', or
the process exits; then the process's code is as it was before (every
site's original bytes are put back) and fntrace replay, report, dump ...
read DIR as usual. While attached, 'fntrace ctl PID ...' changes the
filters. One thread of the process is stopped while the runtime library
loads (typically about a millisecond; 'fntrace info' shows how long).

ptrace must be allowed: the same user, and /proc/sys/kernel/yama/ptrace_scope
0 (or 1 for a child of fntrace), or CAP_SYS_PTRACE.

Examples:
  fntrace attach 1234
  fntrace attach -F 'handle_*' --duration 10s -o server.data $(pidof server)";

/// Record a running process (until Ctrl-C), then detach and leave it as it was.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The process to trace.
    #[arg(value_name = "PID")]
    pid: i32,
    /// The data directory to write.
    #[arg(short, long, value_name = "DIR", default_value = layout::DEFAULT_DIR)]
    output: PathBuf,
    /// Detach after this long (100ms, 2s; a bare number is ns).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<u64>,
    #[command(flatten)]
    flags: RecordFlags,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let stop = interrupts()?;
    let pid = args.pid;
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    if pid <= 0 || !proc_dir.exists() {
        anyhow::bail!("no process with PID {pid}");
    }
    let name = std::fs::read_to_string(proc_dir.join("comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| pid.to_string());
    let dir = control::dir()?;
    // Held until fntrace ends: one attach per process, refused before it
    // could see the other's ptrace or settings.
    let _lock = control::lock::for_attach(&dir, pid, &name)?;
    control::clean(&dir);
    fntrace_inject::check(pid).map_err(anyhow::Error::msg)?;
    let argv = target_argv(&proc_dir);
    let request = args
        .flags
        .into_request(argv.iter().map(Into::into).collect(), args.output.clone());
    if !request.options.force {
        check_sites(pid, &name, &request.options)?;
    }
    let socket = control::socket(&dir, pid);
    if control::request(&socket, &protocol::Request::Status, Duration::from_secs(2)).is_ok() {
        anyhow::bail!(
            "process {pid} ({name}) is already attached ('fntrace ctl {pid} detach' ends that session)"
        );
    }
    let runtime = launch::find_runtime()?;
    let link = control::runtime_link(&dir, &runtime)?;
    let out = std::path::absolute(&args.output)
        .with_context(|| format!("{}: bad output directory", args.output.display()))?;
    let mut info = RunInfo {
        version: VERSION,
        command: argv,
        cwd: std::fs::read_link(proc_dir.join("cwd"))
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        tracer: request.tracer.as_str().to_string(),
        options: serde_json::to_value(&request.options)?,
        start_unix_ns: record::unix_now_ns(),
        ..RunInfo::default()
    };
    record::prepare_dir(&out, &info)?;
    let mut settings = record::settings(&request, &out);
    settings.ctl = Some(socket.clone());
    let settings: Vec<(String, String)> = settings
        .to_env()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string_lossy().into_owned()))
        .collect();
    let settings_path = control::settings_file(&dir, pid);
    let start_error = protocol::start_error_file(&settings_path);
    let _ = std::fs::remove_file(&start_error);
    control::write_settings(&settings_path, &settings)?;

    if stop.load(Ordering::Relaxed) {
        let _ = std::fs::remove_file(&settings_path);
        let _ = std::fs::remove_dir_all(&out);
        anyhow::bail!("interrupted before attaching; process {pid} was not touched");
    }
    // Loaded now, the runtime's constructor starts the session (it finds the
    // settings beside the link it was loaded through); loaded before, it
    // is started by `fntrace_attach`.
    let injected = fntrace_inject::inject_with(
        pid,
        &link,
        "fntrace_attach",
        &settings_path.display().to_string(),
        false,
    );
    let started_session = injected.map_err(anyhow::Error::msg).and_then(|injection| {
        // `fntrace_attach` returns an `int`: the low half of rax.
        match injection.result as i32 {
            0 => {}
            -2 => anyhow::bail!(
                "process {pid} ({name}) is already traced (it was started by fntrace record or links the runtime)"
            ),
            -3 => anyhow::bail!("process {pid} ({name}) is already attached"),
            n => anyhow::bail!("the runtime could not start in process {pid} (code {n})"),
        }
        let ready =
            wait_ready(&socket, &start_error, pid).with_context(|| format!("cannot attach to process {pid} ({name})"))?;
        Ok((injection, ready))
    });
    let _ = std::fs::remove_file(&settings_path);
    let _ = std::fs::remove_file(&start_error);
    let (injection, ready) = match started_session {
        Ok(r) => r,
        Err(e) => {
            // Nothing was recorded: no data directory is left behind.
            let _ = std::fs::remove_dir_all(&out);
            return Err(e);
        }
    };
    let attach_ns = started.elapsed().as_nanos() as u64;
    let mut attach = AttachInfo {
        pid: pid as u32,
        tid: injection.tid as u32,
        longest_pause_ns: injection.pause.as_nanos() as u64,
        loaded: injection.loaded,
        attach_ns,
        setup_ns: control::field(&ready, "setup_us").unwrap_or(0) * 1000,
        sites: control::field(&ready, "sites").unwrap_or(0),
        patched: control::field(&ready, "patched").unwrap_or(0),
        ..AttachInfo::default()
    };
    eprintln!(
        "fntrace: attached to {pid} ({name}) in {}: {} sites, {} traced; thread {} was stopped for {}; recording to {} ({})",
        human(attach_ns).trim(),
        attach.sites,
        attach.patched,
        injection.tid,
        human(attach.longest_pause_ns).trim(),
        args.output.display(),
        match args.duration {
            Some(d) => format!("for {}", human(d).trim()),
            None => "Ctrl-C to detach".into(),
        }
    );
    // Recording is on: the duration counts from now, not from after
    // `info.json` is written (a rename can wait seconds for writeback).
    let until = args.duration.map(|d| Instant::now() + Duration::from_nanos(d));
    info.attach = Some(attach.clone());
    record::write_info(&out, &info)?;

    let ended_by = wait(pid, &socket, until, &stop)?;
    attach.ended_by = ended_by.to_string();
    let mut code = ExitCode::SUCCESS;
    if ended_by == "interrupt" || ended_by == "duration" {
        let t0 = Instant::now();
        match control::request(&socket, &protocol::Request::Detach, Duration::from_secs(60)) {
            Ok(answer) => {
                attach.detach_ns = Some(t0.elapsed().as_nanos() as u64);
                attach.restored = control::field(&answer, "restored");
                eprintln!(
                    "fntrace: detached from {pid} in {}: {} sites given back their bytes",
                    human(t0.elapsed().as_nanos() as u64).trim(),
                    attach.restored.unwrap_or(0)
                );
            }
            Err(Failure::NoSession) if !fntrace_inject::alive(pid) => attach.ended_by = "exit".into(),
            Err(e) => {
                eprintln!("fntrace: error: cannot detach from process {pid}: {e}");
                code = ExitCode::FAILURE;
            }
        }
    }
    if attach.ended_by == "detached" {
        eprintln!("fntrace: detached from {pid} by 'fntrace ctl {pid} detach'");
    }
    if attach.ended_by == "exit" {
        // The runtime died with the process: its socket is stale.
        let _ = std::fs::remove_file(&socket);
        eprintln!("fntrace: process {pid} ({name}) exited");
    }
    info.end_unix_ns = Some(record::unix_now_ns());
    info.attach = Some(attach);
    record::write_info(&out, &info)?;
    record::say_losses(&out);
    Ok(code)
}

/// The process's command line.
fn target_argv(proc_dir: &Path) -> Vec<String> {
    std::fs::read(proc_dir.join("cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Fails when no module mapped in the process has a patchable site, or
/// when a function pattern of `options` matches none of their patchable
/// functions (a typo would record nothing).
fn check_sites(pid: i32, name: &str, options: &Options) -> anyhow::Result<()> {
    let libcalls = options.libcall != fntrace_format::settings::Libcall::None;
    let modules = unmatched::modules_of_process(pid, unmatched::names_modules(options), libcalls).map_err(
        |e| match &e {
            InjectError::Io { error, .. } if error.kind() == std::io::ErrorKind::PermissionDenied => {
                anyhow::anyhow!("{}", fntrace_inject::permission(pid))
            }
            _ => anyhow::anyhow!("{e}"),
        },
    )?;
    if modules.is_empty() {
        anyhow::bail!(
            "process {pid} ({name}) has no patchable sites (no function symbols or unwind data; \
             or build it with gcc -pg -mfentry, -fpatchable-function-entry=5 or clang -fxray-instrument; \
             see 'fntrace list --help')"
        );
    }
    if let Some((option, pattern)) = unmatched::first(options, &modules) {
        anyhow::bail!(
            "{option} '{pattern}' matches no function of process {pid} ({name}); nothing was done to it \
             (--force to attach anyway, for functions of libraries it has yet to load)"
        );
    }
    Ok(())
}

/// Waits until the runtime in the process answers `ready`, or says in
/// `start_error` why it could not start.
fn wait_ready(socket: &Path, start_error: &Path, pid: i32) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match control::request(socket, &protocol::Request::Ready, Duration::from_secs(120)) {
            Ok(answer) => return Ok(answer),
            Err(Failure::NoSession) => {}
            Err(e) => anyhow::bail!("{e}"),
        }
        if let Ok(why) = std::fs::read_to_string(start_error) {
            anyhow::bail!("the runtime could not start: {}", why.trim());
        }
        if !fntrace_inject::alive(pid) {
            anyhow::bail!("process {pid} exited during attach");
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "the runtime did not start within 2 minutes (no answer on {}, and it said nothing)",
                socket.display()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Ctrl-C (and SIGTERM, SIGHUP, SIGQUIT) from the start: one during the
/// attach must end in a detach, not kill fntrace and leave the process
/// attached.
fn interrupts() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in crate::forward::PASSED {
        signal_hook::flag::register(signal as i32, Arc::clone(&stop))?;
    }
    Ok(stop)
}

/// Waits for `stop` (Ctrl-C), the end of the duration (`until`), the
/// process's end or a detach by `fntrace ctl`; says which.
fn wait(pid: i32, socket: &Path, until: Option<Instant>, stop: &AtomicBool) -> anyhow::Result<&'static str> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok("interrupt");
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            return Ok("duration");
        }
        if !fntrace_inject::alive(pid) {
            return Ok("exit");
        }
        if !socket.exists() {
            return Ok(if fntrace_inject::alive(pid) {
                "detached"
            } else {
                "exit"
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
