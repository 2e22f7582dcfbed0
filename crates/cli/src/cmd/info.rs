//! `fntrace info [DIR]`: what a data directory holds: the run, each
//! process, and every damage note (uftrace info, trace-cmd stat).

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use fntrace_format::layout;
use fntrace_format::meta::{AttachInfo, Clock, RunInfo, MIN_CALIBRATION_NS, SOURCE_MONOTONIC};
use fntrace_format::read::{EventKind, Losses, Process};

use crate::launch::killed_by;
use crate::losses;
use crate::nothing;
use crate::trace::{self, command_line, utc};
use crate::units::human;

/// Show what a recorded trace holds.
#[derive(clap::Args)]
pub struct Args {
    /// The data directory.
    #[arg(default_value = layout::DEFAULT_DIR)]
    dir: PathBuf,
    /// Describe every process in full (by default, a trace of more than 8 processes lists one line per process).
    #[arg(short, long)]
    all: bool,
}

/// The most processes described in full without `--all`.
const IN_FULL: usize = 8;

/// Lines of `key: value`, values aligned; a value of several lines is
/// continued under the first.
struct Sheet {
    text: String,
}

impl Sheet {
    const KEY: usize = 20;

    fn item(&mut self, key: &str, value: impl AsRef<str>) {
        let mut lines = value.as_ref().lines();
        let first = lines.next().unwrap_or("");
        let _ = writeln!(self.text, "{key:<w$}: {first}", w = Self::KEY);
        for line in lines {
            let _ = writeln!(self.text, "{:w$}  {line}", "", w = Self::KEY);
        }
    }

    fn blank(&mut self) {
        self.text.push('\n');
    }
}

/// `fntrace info`, writing to `out`.
pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let trace = trace::open(&args.dir)?;
    let mut sheet = Sheet { text: String::new() };
    let mut damage = trace.damage.clone();

    sheet.item("data directory", trace.dir.display().to_string());
    match &trace.info {
        Some(info) => run_info(&mut sheet, info),
        None => sheet.item("run", "no readable info.json"),
    }
    if trace.processes.is_empty() {
        sheet.item("processes", "none recorded (did the runtime load?)");
    }
    let quiet = quiet(&trace.dir);
    if trace.processes.len() > 1 || !quiet.is_empty() {
        sheet.item("processes", trace.processes.len().to_string());
    }
    if !quiet.is_empty() {
        sheet.item(
            "not kept",
            format!(
                "{} child process images that recorded nothing ({}; {} lists them)",
                quiet.len(),
                by_program(&quiet),
                layout::QUIET
            ),
        );
    }
    let mut events = 0;
    let mut lost = Losses::new();
    let in_full = args.all || trace.processes.len() <= IN_FULL;
    if !in_full {
        sheet.blank();
        sheet
            .text
            .push_str("One line per process (--all describes each in full):\n");
    }
    for process in &trace.processes {
        if in_full {
            sheet.blank();
            events += process_info(&mut sheet, process, &mut damage, &mut lost);
            continue;
        }
        let mut scratch = Sheet { text: String::new() };
        let n = process_info(&mut scratch, process, &mut damage, &mut lost);
        events += n;
        let threads = process.tids.len();
        sheet.item(
            &format!("process {}", process.name),
            format!(
                "{} ({threads} thread{}, {n} events)",
                command_line(process),
                if threads == 1 { "" } else { "s" }
            ),
        );
    }
    if let Some(line) = losses::summary(&lost, &trace, None) {
        sheet.blank();
        sheet.item("incomplete", line.trim_start_matches("the trace is incomplete: "));
    }
    if !damage.is_empty() {
        sheet.blank();
        sheet.item("damage", damage.join("\n"));
    }
    let mut out = BufWriter::new(out);
    out.write_all(sheet.text.as_bytes())?;
    out.flush()?;
    let profiles = trace.processes.iter().any(|p| p.profile.is_some());
    if trace.processes.is_empty() || (events == 0 && !profiles) {
        return nothing::fail(nothing::no_events(&trace, &args.dir));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_info(sheet: &mut Sheet, info: &RunInfo) {
    sheet.item("command", info.command.join(" "));
    sheet.item("working directory", &info.cwd);
    sheet.item("started", utc(info.start_unix_ns));
    match info.end_unix_ns {
        Some(end) => sheet.item("duration", human(end.saturating_sub(info.start_unix_ns)).trim()),
        None => sheet.item(
            "duration",
            "unknown: the run did not end (record was interrupted?)",
        ),
    }
    match (info.exit_status, info.signal, &info.attach) {
        (Some(code), _, _) => sheet.item("exit status", code.to_string()),
        (None, Some(signal), _) => sheet.item("exit status", killed_by(signal)),
        (None, None, Some(a)) if a.ended_by == "exit" => sheet.item("exit status", "exited while attached"),
        (None, None, Some(_)) => sheet.item("exit status", "none: still running after the detach"),
        (None, None, None) => sheet.item("exit status", "unknown"),
    }
    if let Some(a) = &info.attach {
        attach_info(sheet, a);
    }
    sheet.item("tracer", &info.tracer);
    sheet.item("options", options(&info.options));
}

/// How `fntrace attach` went.
fn attach_info(sheet: &mut Sheet, a: &AttachInfo) {
    let loaded = if a.loaded {
        "runtime loaded"
    } else {
        "runtime already loaded by an earlier attach"
    };
    sheet.item(
        "attached",
        format!(
            "to pid {} in {} ({loaded}; set-up {} while the process ran)",
            a.pid,
            human(a.attach_ns).trim(),
            human(a.setup_ns).trim()
        ),
    );
    sheet.item(
        "longest pause",
        format!(
            "{} (thread {}, stopped to load the runtime)",
            human(a.longest_pause_ns).trim(),
            a.tid
        ),
    );
    sheet.item(
        "sites at attach",
        format!("{} found, {} traced", a.sites, a.patched),
    );
    let detach = match (a.detach_ns, a.restored) {
        (Some(ns), restored) => format!(
            "in {} by {}; {} sites given back their original bytes",
            human(ns).trim(),
            a.ended_by,
            restored.unwrap_or(0)
        ),
        (None, _) if a.ended_by == "exit" => "no: the process exited".into(),
        (None, _) if a.ended_by == "detached" => "by fntrace ctl detach".into(),
        (None, _) => "unknown: fntrace attach did not end (interrupted?)".into(),
    };
    sheet.item("detached", detach);
}

/// The options that were given, `name value` separated by commas.
fn options(value: &serde_json::Value) -> String {
    let Some(map) = value.as_object() else {
        return "none".into();
    };
    let given: Vec<String> = map
        .iter()
        .filter(|(_, v)| match v {
            serde_json::Value::Null | serde_json::Value::Bool(false) => false,
            serde_json::Value::Array(a) => !a.is_empty(),
            _ => true,
        })
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    joined_or_none(&given, ", ")
}

/// `items` joined by `separator`, or `none`.
fn joined_or_none(items: &[String], separator: &str) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(separator)
    }
}

/// Describes `process`; returns how many events and lost-events notes its
/// threads have.
fn process_info(sheet: &mut Sheet, process: &Process, damage: &mut Vec<String>, losses: &mut Losses) -> u64 {
    let info = &process.info;
    let mut who = format!("pid {}, ppid {}", info.pid, info.ppid);
    if let Some(parent) = &info.parent {
        let _ = write!(who, ", parent {parent}");
    }
    if process.image > 0 {
        let _ = write!(who, ", image {} (after exec)", process.image);
    }
    sheet.item(&format!("process {}", process.name), who);
    sheet.item("  executable", &info.exe);
    sheet.item("  command", command_line(process));
    sheet.item("  started", utc(info.start_unix_ns));
    sheet.item(
        "  ended",
        if info.ended {
            "yes"
        } else {
            "no (still running, or ended without the runtime's exit handler)"
        },
    );
    sheet.item("  tracer", &info.tracer);

    let (mut events, mut lost, mut chunks, mut flight) = (0u64, 0u64, 0u64, false);
    // Lost-events notes are not events, but they are something to show.
    let mut notes = 0u64;
    for &tid in &process.tids {
        let mut stream = process.events(tid);
        for ev in &mut stream {
            match ev.kind {
                EventKind::Lost(_) => notes += 1,
                _ => events += 1,
            }
        }
        lost += stream.lost();
        chunks += stream.lost_chunks();
        flight |= stream.flight();
        damage.extend(stream.damage().map(str::to_string));
        losses.thread(&stream);
    }
    losses.process(process);
    let tids: Vec<String> = process.tids.iter().map(u32::to_string).collect();
    sheet.item("  threads", format!("{} ({})", tids.len(), tids.join(", ")));
    sheet.item("  events", events.to_string());
    let mut lost_text = lost.to_string();
    if chunks > 0 {
        let plural = if chunks == 1 { "" } else { "s" };
        if flight {
            let _ = write!(
                lost_text,
                ", {chunks} older chunk{plural} not kept (flight recorder)"
            );
        } else {
            let _ = write!(lost_text, ", {chunks} chunk{plural} missing");
        }
    }
    if info.lost != lost {
        let _ = write!(lost_text, " (the runtime counted {})", info.lost);
    }
    sheet.item("  lost events", lost_text);
    if info.untraced > 0 {
        sheet.item(
            "  calls not traced",
            format!(
                "{} (nested deeper than {} calls, or made by signal handlers that interrupted the tracer or by a library traced whole for the tracer itself)",
                info.untraced,
                fntrace_format::limits::MAX_NESTING
            ),
        );
    }
    if let Some(rows) = &process.profile {
        sheet.item("  profile", format!("{} functions", rows.len()));
    }
    if let Some(error) = &info.write_error {
        sheet.item("  write error", format!("{error} (the trace is incomplete)"));
    }
    sheet.item(
        "  sites",
        format!("{} found, {} patched", info.sites, info.patched),
    );
    let kinds: Vec<String> = info
        .instrumentation
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    sheet.item("  instrumentation", joined_or_none(&kinds, ", "));
    let modules: Vec<String> = info
        .modules
        .iter()
        .map(|m| format!("{} ({} sites, bias {:#x})", m.path, m.sites, m.bias))
        .collect();
    sheet.item("  modules", joined_or_none(&modules, "\n"));
    sheet.item("  functions", process.functions.len().to_string());
    sheet.item("  clock", clock(&info.clock));
    events + notes
}

/// The command lines of the processes that recorded nothing
/// (`quiet.tsv`), in order.
fn quiet(dir: &std::path::Path) -> Vec<String> {
    let text = fntrace_format::read::file::read_text(&dir.join(layout::QUIET), 64 << 20).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once('\t').map(|(_, command)| command.to_string()))
        .collect()
}

/// `sh 300, true 2`: how many of `commands` ran each program (its file
/// name), the most first.
fn by_program(commands: &[String]) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for c in commands {
        let program = c.split(' ').next().unwrap_or("");
        *counts
            .entry(program.rsplit('/').next().unwrap_or(program))
            .or_default() += 1;
    }
    let mut counts: Vec<(&str, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = counts.iter().take(5).map(|(p, n)| format!("{p} {n}")).collect();
    match counts.len() > 5 {
        true => format!("{}, ...", shown.join(", ")),
        false => shown.join(", "),
    }
}

/// The clock source and its calibration.
fn clock(c: &Clock) -> String {
    if c.source == SOURCE_MONOTONIC {
        return "monotonic (ticks are CLOCK_MONOTONIC nanoseconds)".into();
    }
    if let Some(note) = c.note() {
        return format!("{}: {note}", c.source);
    }
    let span_ns = c.mono1_ns.saturating_sub(c.mono0_ns);
    let ticks = c.tick1.saturating_sub(c.tick0);
    if span_ns >= MIN_CALIBRATION_NS && ticks > 0 {
        format!(
            "{}, {:.6} GHz (calibrated over {}: ticks {}..{}, monotonic {}..{} ns)",
            c.source,
            ticks as f64 / span_ns as f64,
            human(span_ns).trim(),
            c.tick0,
            c.tick1,
            c.mono0_ns,
            c.mono1_ns
        )
    } else {
        let hz = c.tsc_hz.unwrap_or(0.0);
        format!(
            "{}, {:.6} GHz (from tsc_hz; calibration points too close)",
            c.source,
            hz / 1e9
        )
    }
}
