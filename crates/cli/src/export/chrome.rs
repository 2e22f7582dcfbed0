//! Chrome Trace Event JSON (`chrome://tracing`, Perfetto, Speedscope),
//! streamed: each event is written as it is read, one thread after the
//! other, so memory holds one thread's open calls, never its events.
//!
//! ```text
//! {"traceEvents":[
//! {"ph":"M","pid":100,"name":"process_name","args":{"name":"./prog arg"}},
//! {"ph":"M","pid":100,"tid":100,"name":"thread_name","args":{"name":"main"}},
//! {"ph":"B","ts":0.000,"pid":100,"tid":100,"name":"main"},
//! {"ph":"E","ts":150.000,"pid":100,"tid":100}
//! ],
//! "displayTimeUnit":"ns",
//! "metadata":{"command":"./prog arg","clock_source":"tsc","lost_events":0,...}}
//! ```
//! Recorded values (`-A`, `-R`) are the `args` of the `B` (`arg1`, ...)
//! and `E` (`retval`) events, as `replay` writes them.
//!
//! - `pid` is the traced process, `tid` the thread: one track per thread;
//!   `process_name` is its command line, `thread_name` "main" for the
//!   thread whose tid is the pid, else the tid.
//! - A call is a `B`/`E` pair (`X` would need its duration at its start),
//!   written compactly: no `cat` (optional), and the `E` without a name
//!   (the format closes the thread's last open `B`): a call takes 30% fewer
//!   bytes than with both.
//!   A call left by `longjmp` or closed by the exit of a caller ends with
//!   an `E` with `"args":{"unwound":true}`, one still open when the thread's
//!   events end with `"args":{"unfinished":true}`, one open when events
//!   were lost (its exit may be among them, its end unknown) with
//!   `"args":{"exit_lost":true}` wherever it is closed; an exit whose entry was
//!   not recorded writes nothing. Times never go back within a thread
//!   (damaged times are raised to the previous one), so every `B` has its
//!   `E` after it, properly nested.
//! - `--time-filter` calls (`CALL` events) are `X` events (`dur` known).
//! - Entries of the `function` tracer are instant events (`i`, scope
//!   thread) with `"args":{"caller":"main+0x1f"}`; lost events are instant
//!   events named "events lost" with `"args":{"count":N}` (`count` 0 and
//!   `"chunks_missing":true` for a gap of chunks); trigger marks are
//!   instant events `trace_off`/`trace_on`.
//! - `ts` and `dur` are microseconds with 3 decimals (exact nanoseconds),
//!   `ts` from the earliest process start (`metadata.ts_origin_monotonic_ns`).
//! - `metadata` comes last, once the totals are known: with `incomplete`,
//!   the line every reader states when the trace lost anything (`null`
//!   otherwise), and `untraced_calls`, `exit_lost_calls`, `write_errors`.
//!
//! Nothing is written until the first event: a trace without events
//! leaves the output empty (the caller reports the error).

use crate::narrow::Narrowed;
use crate::trace::Demangle;
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write};

use fntrace_format::read::{EventKind, Process, Trace};
use fntrace_format::stack::CallStack;
use fntrace_format::values::Value;
use serde_json::json;

use super::progress::Progress;
use crate::losses;
use crate::trace::{command_line, utc, Names};
use crate::units;
use fntrace_format::read::Losses;

/// What was written.
#[derive(Debug, Default)]
pub struct Summary {
    /// Trace events read.
    pub events: u64,
    /// Damage notes of the thread files.
    pub damage: Vec<String>,
    /// What the trace lost.
    pub losses: Losses,
    /// Calls closed with their exit lost.
    pub exit_lost: u64,
}

/// Writes the Chrome JSON of `threads` (of `trace`) to `out`.
pub fn write(
    out: &mut impl Write,
    trace: &Trace,
    threads: &[(&Process, Vec<u32>)],
    demangle: Demangle,
    progress: &Progress,
) -> io::Result<Summary> {
    let origin = threads
        .iter()
        .map(|(p, _)| p.info.clock.mono0_ns)
        .min()
        .unwrap_or(0);
    let mut json = Json {
        out,
        started: false,
        origin,
        events: 0,
        progress,
        line: Line::default(),
        exit_lost: 0,
    };
    let mut summary = Summary::default();
    let mut processes = Vec::new();
    for (process, tids) in threads {
        let mut names = JsonNames::new(process, demangle);
        let mut named = false;
        let (mut lost, mut chunks) = (0, 0);
        for &tid in tids {
            let mut events = progress.events(process, tid);
            let note = json.thread(process, tid, &mut named, &mut names, &mut events)?;
            lost += events.lost();
            chunks += events.lost_chunks();
            summary.damage.extend(events.damage());
            summary.damage.extend(note);
            summary.losses.thread(events.source());
        }
        summary.losses.process(process);
        processes.push(json!({
            "pid": process.info.pid,
            "dir": process.name,
            "command": command_line(process),
            "clock_source": process.info.clock.source,
            "lost_events": lost,
            "lost_chunks": chunks,
            "runtime_lost_events": process.info.lost,
        }));
    }
    summary.events = json.events;
    summary.exit_lost = json.exit_lost;
    if json.started {
        let mut meta = metadata(trace, threads, origin, processes, &summary.damage);
        meta["incomplete"] = json!(losses::summary(&summary.losses, trace, Some(summary.exit_lost)));
        meta["untraced_calls"] = json!(summary.losses.untraced);
        meta["exit_lost_calls"] = json!(summary.exit_lost);
        meta["write_errors"] = json!(summary.losses.write_errors);
        json.out
            .write_all(b"\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":")?;
        serde_json::to_writer(&mut *json.out, &meta).map_err(io::Error::other)?;
        json.out.write_all(b"}\n")?;
    }
    Ok(summary)
}

/// The top-level `metadata` object.
fn metadata(
    trace: &Trace,
    threads: &[(&Process, Vec<u32>)],
    origin: u64,
    processes: Vec<serde_json::Value>,
    damage: &[String],
) -> serde_json::Value {
    let info = trace.info.as_ref();
    let command = match info {
        Some(i) if !i.command.is_empty() => i.command.join(" "),
        _ => threads.first().map(|(p, _)| command_line(p)).unwrap_or_default(),
    };
    let mut clocks: Vec<&str> = threads
        .iter()
        .map(|(p, _)| p.info.clock.source.as_str())
        .collect();
    clocks.dedup();
    let sum = |key: &str| processes.iter().filter_map(|p| p[key].as_u64()).sum::<u64>();
    json!({
        "fntrace_version": env!("CARGO_PKG_VERSION"),
        "command": command,
        "argv": info.map(|i| i.command.clone()).unwrap_or_default(),
        "tracer": info.map(|i| i.tracer.clone()).unwrap_or_default(),
        "start_time": info.map(|i| utc(i.start_unix_ns)),
        "exit_status": info.and_then(|i| i.exit_status),
        "clock_source": clocks.join(","),
        "lost_events": sum("lost_events"),
        "lost_chunks": sum("lost_chunks"),
        "ts_origin_monotonic_ns": origin,
        "processes": processes,
        "damage": damage,
    })
}

/// The output, started on the first event.
struct Json<'a, W: Write> {
    out: &'a mut W,
    started: bool,
    /// The time (ns) of `ts` 0.
    origin: u64,
    events: u64,
    progress: &'a Progress,
    /// The text of a call event, made without `fmt` (the hot path).
    line: Line,
    /// Calls closed with their exit lost.
    exit_lost: u64,
}

impl<W: Write> Json<'_, W> {
    /// Starts one more item of `traceEvents`.
    fn item(&mut self) -> io::Result<&mut W> {
        if self.started {
            self.out.write_all(b",\n")?;
        } else {
            self.out.write_all(b"{\"traceEvents\":[\n")?;
            self.started = true;
        }
        Ok(self.out)
    }

    fn ts(&self, ns: u64) -> Micros {
        Micros(i128::from(ns) - i128::from(self.origin))
    }

    /// Writes the line made in `self.line` as one more item.
    fn flush_line(&mut self) -> io::Result<()> {
        let line = std::mem::take(&mut self.line);
        let result = self.item().and_then(|out| out.write_all(&line.0));
        self.line = line;
        result
    }

    /// Every event of one thread; the process and thread names first if it
    /// has any. Returns the damage note of calls nested too deep.
    fn thread(
        &mut self,
        process: &Process,
        tid: u32,
        named: &mut bool,
        names: &mut JsonNames<'_>,
        events: &mut Narrowed,
    ) -> io::Result<Option<String>> {
        let Some(first) = events.next() else {
            return Ok(None);
        };
        let pid = process.info.pid;
        if !std::mem::replace(named, true) {
            let name = quote(&command_line(process));
            write!(
                self.item()?,
                "{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"process_name\",\"args\":{{\"name\":{name}}}}}"
            )?;
        }
        let thread = if tid == pid {
            "main".to_string()
        } else {
            tid.to_string()
        };
        write!(
            self.item()?,
            "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":\"{thread}\"}}}}"
        )?;

        let ids = format!("\"pid\":{pid},\"tid\":{tid}");
        // What a function's event has between its time and its name.
        let call = format!(",{ids},\"name\":");
        // What an `E` has after its time.
        let end = format!(",{ids}");
        // The open `B` events: their function and time.
        let mut stack: CallStack<u64> = CallStack::new();
        let mut now = first.ns;
        for ev in std::iter::once(first).chain(&mut *events) {
            self.events += 1;
            self.progress.tick(self.events);
            now = now.max(ev.ns);
            let ts = self.ts(now);
            match ev.kind {
                EventKind::Entry => {
                    if !stack.push(ev.fid, now) {
                        continue;
                    }
                    self.line
                        .start("{\"ph\":\"B\",\"ts\":")
                        .micros(ts)
                        .text(&call)
                        .text(names.get(ev.fid));
                    match ev.values.as_deref() {
                        Some(values) => self.line.text(&values_args("arg", values)).text("}"),
                        None => self.line.text("}"),
                    };
                    self.flush_line()?;
                }
                EventKind::Exit | EventKind::Unwind => {
                    let Some(pos) = stack.position(ev.fid) else {
                        continue;
                    };
                    loop {
                        let exit_lost = stack.top_spans_loss();
                        let Some(open) = stack.pop() else { break };
                        let this = stack.len() == pos;
                        let unwound = !this || ev.kind == EventKind::Unwind;
                        let why = match (exit_lost, unwound) {
                            (true, _) => Some("exit_lost"),
                            (false, true) => Some("unwound"),
                            (false, false) => None,
                        };
                        self.exit_lost += u64::from(exit_lost);
                        let ret = if this { ev.values.as_deref() } else { None };
                        self.end_with(&end, open, now, why, ret)?;
                        if this {
                            break;
                        }
                    }
                }
                EventKind::Call { dur_ns } => {
                    let start = self.ts(now.saturating_sub(dur_ns));
                    self.line
                        .start("{\"ph\":\"X\",\"ts\":")
                        .micros(start)
                        .text(",\"dur\":")
                        .micros(Micros(i128::from(dur_ns)))
                        .text(&call)
                        .text(names.get(ev.fid))
                        .text("}");
                    self.flush_line()?;
                }
                EventKind::EntryCaller(addr) => {
                    self.line
                        .start("{\"ph\":\"i\",\"s\":\"t\",\"ts\":")
                        .micros(ts)
                        .text(&call)
                        .text(names.get(ev.fid))
                        .text(",\"args\":{\"caller\":")
                        .text(names.caller(addr))
                        .text("}}");
                    self.flush_line()?;
                }
                EventKind::Lost(n) => {
                    stack.lose();
                    let unknown = if n == 0 { ",\"chunks_missing\":true" } else { "" };
                    write!(
                        self.item()?,
                        "{{\"ph\":\"i\",\"s\":\"t\",\"ts\":{ts},{ids},\"cat\":\"lost\",\"name\":\"events lost\",\"args\":{{\"count\":{n}{unknown}}}}}"
                    )?;
                }
                EventKind::Mark(on) => {
                    let name = if on { "trace_on" } else { "trace_off" };
                    write!(
                        self.item()?,
                        "{{\"ph\":\"i\",\"s\":\"t\",\"ts\":{ts},{ids},\"cat\":\"trigger\",\"name\":\"{name}\"}}"
                    )?;
                }
            }
        }
        loop {
            let exit_lost = stack.top_spans_loss();
            let Some(open) = stack.pop() else { break };
            self.exit_lost += u64::from(exit_lost);
            let why = if exit_lost { "exit_lost" } else { "unfinished" };
            self.end_with(&end, open, now, Some(why), None)?;
        }
        self.progress.update();
        Ok(stack.note(events.label()))
    }

    /// The `E` at `now` of the call `(fid, start ns)`, with `{"why":true}`
    /// or the call's return value (`args.retval`) as its args; `end` is
    /// what comes after the time.
    fn end_with(
        &mut self,
        end: &str,
        (_, start): (u32, u64),
        now: u64,
        why: Option<&str>,
        ret: Option<&[Value]>,
    ) -> io::Result<()> {
        let ts = self.ts(now.max(start));
        self.line.start("{\"ph\":\"E\",\"ts\":").micros(ts).text(end);
        match (why, ret) {
            (Some(why), _) => self.line.text(",\"args\":{\"").text(why).text("\":true}}"),
            (None, Some(ret)) => self.line.text(&values_args("retval", ret)).text("}"),
            (None, None) => self.line.text("}"),
        };
        self.flush_line()
    }
}

/// `,"args":{"arg1":"3","arg2":"\"abc\""}`: recorded values as the
/// viewers' details panel shows them, each as `replay` writes it (`key`
/// numbered from 1; a single return value is `retval`).
fn values_args(key: &str, values: &[Value]) -> String {
    let mut s = String::from(",\"args\":{");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let name = if key == "retval" {
            key.to_string()
        } else {
            format!("{key}{}", i + 1)
        };
        s.push_str(&quote(&name));
        s.push(':');
        s.push_str(&quote(&v.to_string()));
    }
    s.push('}');
    s
}

/// A JSON string literal.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".to_string())
}

/// Function names as JSON string literals, made once per function, and
/// callers (`function+0xoff`) once per return address.
struct JsonNames<'p> {
    names: Names<'p>,
    quoted: Vec<Option<String>>,
    callers: HashMap<u64, String>,
    /// For ids outside the function table (damaged data).
    scratch: String,
}

impl<'p> JsonNames<'p> {
    fn new(process: &'p Process, demangle: Demangle) -> Self {
        JsonNames {
            names: Names::of(process, demangle),
            quoted: vec![None; process.functions.len()],
            callers: HashMap::new(),
            scratch: String::new(),
        }
    }

    fn get(&mut self, fid: u32) -> &str {
        let Some(slot) = self.quoted.get_mut(fid as usize) else {
            self.scratch = quote(self.names.shown(fid));
            return &self.scratch;
        };
        slot.get_or_insert_with(|| quote(self.names.shown(fid)))
    }

    /// Return address `addr` as a JSON string literal.
    fn caller(&mut self, addr: u64) -> &str {
        let names = &mut self.names;
        self.callers
            .entry(addr)
            .or_insert_with(|| quote(&names.address(addr)))
    }
}

/// A time in nanoseconds, shown in microseconds with 3 decimals.
#[derive(Clone, Copy)]
struct Micros(i128);

/// The bytes of one event, appended to without `fmt`.
#[derive(Default)]
struct Line(Vec<u8>);

impl Line {
    fn start(&mut self, s: &str) -> &mut Self {
        self.0.clear();
        self.text(s)
    }

    fn text(&mut self, s: &str) -> &mut Self {
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    /// `t` as [`Micros`] shows it.
    fn micros(&mut self, t: Micros) -> &mut Self {
        let Ok(ns) = u64::try_from(t.0) else {
            let text = t.to_string();
            return self.text(&text);
        };
        self.0
            .extend_from_slice(units::decimal(ns / 1000, &mut [0; 20]).as_bytes());
        self.0.push(b'.');
        self.0.extend_from_slice(&units::thousandths(ns));
        self
    }
}

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let ns = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:03}", ns / 1000, ns % 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros() {
        assert_eq!(Micros(0).to_string(), "0.000");
        assert_eq!(Micros(1).to_string(), "0.001");
        assert_eq!(Micros(1_234_567).to_string(), "1234.567");
        assert_eq!(Micros(-1500).to_string(), "-1.500");
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        for ns in [
            0,
            1,
            999,
            1000,
            1_234_567,
            -1500,
            i128::from(u64::MAX),
            -i128::from(u64::MAX),
        ] {
            let mut line = Line::default();
            line.start("").micros(Micros(ns));
            assert_eq!(String::from_utf8(line.0).unwrap(), Micros(ns).to_string());
        }
    }
}
