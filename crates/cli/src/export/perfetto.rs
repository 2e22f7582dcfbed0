//! Perfetto's native trace format (protobuf), streamed: packets are encoded
//! one at a time and written through a 64 KiB buffer, one thread after the
//! other, so memory holds a thread's open calls and interning tables, never
//! its events. The message types are Perfetto's own (`perfetto_protos`,
//! generated from its `.proto` files); the event packets are encoded by
//! hand with the same fields (`proto.rs`); see `packets.rs`.
//!
//! Packets, in file order (`seq` = `trusted_packet_sequence_id`):
//! 1. seq 1: `ClockSnapshot { clocks: [MONOTONIC], primary_trace_clock:
//!    MONOTONIC }`, `SEQ_INCREMENTAL_STATE_CLEARED`: the trace's clock is
//!    `CLOCK_MONOTONIC`, which fntrace's reader gives times in.
//! 2. seq 1: one `TrackDescriptor` per process (`uuid` = (index + 1) << 32,
//!    `ProcessDescriptor { pid, process_name: command line, cmdline: argv }`)
//!    and per thread (`uuid` = process uuid | tid, `ThreadDescriptor { pid,
//!    tid, thread_name }`, "main" for the thread whose tid is the pid, else
//!    the tid), all before any event.
//! 3. per thread with events, a sequence of its own (2, 3, ...): first
//!    `SEQ_INCREMENTAL_STATE_CLEARED` with `TracePacketDefaults {
//!    timestamp_clock_id: 64, track_event_defaults { track_uuid: thread } }`
//!    and `ClockSnapshot { MONOTONIC = t0, 64 = t0 (is_incremental) }`, t0
//!    the thread's first event; then one packet per event,
//!    `SEQ_NEEDS_INCREMENTAL_STATE`, `timestamp` = nanoseconds since the
//!    sequence's previous packet, a `TrackEvent` with `name_iid` and the
//!    `InternedData` entries (event names, annotation names, caller
//!    strings) it is the first to use:
//!    - `ENTRY`: `TYPE_SLICE_BEGIN` named after the function;
//!    - `EXIT`/`UNWIND`: `TYPE_SLICE_END` of the innermost open call of the
//!      function, after the ends of the calls opened above it, which carry
//!      the annotation `unwound: true` (so does the call itself on `UNWIND`);
//!      a call open when events were lost ends, wherever it is closed,
//!      with `exit_lost: true` instead (its exit may be among them);
//!      an exit whose entry was not recorded writes nothing;
//!    - calls still open when the thread's events end: `TYPE_SLICE_END` at
//!      the last event's time with `unfinished: true`;
//!    - `ENTRY_CALLER` (tracer `function`): `TYPE_INSTANT` named after the
//!      function with `caller: "function+0xoff"`;
//!    - lost events: `TYPE_INSTANT` "events lost" with `count: N` (0 and
//!      `chunks_missing: true` for a gap of chunks);
//!    - trigger marks: `TYPE_INSTANT` "trace_on" / "trace_off".
//!
//!    Times never go back within a sequence (damaged times are raised to
//!    the previous one), so every begin has its end after it, nested.
//! 4. `--time-filter` calls (`CALL` events, which arrive after the calls
//!    they contain) reach it nested, as entries and exits: every reader
//!    reads them so (`narrow::nest`).
//! 5. seq 1, after each process's threads: an instant "fntrace" on the
//!    process track at its first event (absolute `CLOCK_MONOTONIC`
//!    timestamp), names inline, its annotations the metadata: command,
//!    executable, tracer, clock source, lost events and chunks, sites,
//!    damage, and `incomplete`, the line every reader states when the
//!    process lost anything; the first process's also the run's (command, start time, exit
//!    status, signal). The Perfetto UI shows them when the instant is
//!    selected.

#[cfg(test)]
mod decode;
mod packets;
mod proto;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

use crate::narrow::Narrowed;
use crate::trace::Demangle;
use std::io::Write;

use fntrace_format::read::{EventKind, Losses, Process, Trace};
use fntrace_format::stack::CallStack;
use perfetto_protos::debug_annotation::DebugAnnotation;
use perfetto_protos::track_event::{track_event::Type, TrackEvent};

use self::packets::{annotation, process_track, thread_track, Arg, Label, Out, Seq, DESCRIPTORS};
use super::progress::Progress;
use crate::losses;
use crate::trace::{command_line, utc, Names};

/// What was written.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PerfettoStats {
    /// Trace packets written.
    pub packets: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Packet sequences of track events (one per thread with events).
    pub sequences: u64,
    /// fntrace events read.
    pub events: u64,
    /// Slices (begin/end pairs) written.
    pub slices: u64,
    /// Instant events written (function tracer entries, lost events, marks).
    pub instants: u64,
    /// Slices ended as unwound (`UNWIND`, or closed by an outer exit).
    pub unwound: u64,
    /// Slices still open when their thread's events ended.
    pub unfinished: u64,
    /// Exits without a recorded entry (nothing written).
    pub ignored_exits: u64,
    /// Events the runtime reported lost (chunk headers and `LOST` events).
    pub lost_events: u64,
    /// Chunks missing from the thread files.
    pub lost_chunks: u64,
    /// Slices ended with their exit lost.
    pub exit_lost: u64,
    /// What the trace lost.
    pub losses: Losses,
    /// Damage notes of the thread files (the trace's own notes are in
    /// `Trace::damage`).
    pub damage: Vec<String>,
}

#[cfg(test)]
/// Writes the whole trace (every process and thread) to `out`.
pub fn write_perfetto(
    trace: &Trace,
    out: &mut dyn Write,
    demangle: Demangle,
) -> anyhow::Result<PerfettoStats> {
    let threads: Vec<(&Process, Vec<u32>)> = trace.processes.iter().map(|p| (p, p.tids.clone())).collect();
    let progress = Progress::new(&threads, Default::default(), 1, "perfetto");
    write(out, trace, &threads, demangle, &progress)
}

/// Writes the threads `threads` of `trace` to `out`, moving `progress`.
pub fn write(
    out: &mut dyn Write,
    trace: &Trace,
    threads: &[(&Process, Vec<u32>)],
    demangle: Demangle,
    progress: &Progress,
) -> anyhow::Result<PerfettoStats> {
    let mut out = Out::new(out);
    let origin = threads
        .iter()
        .map(|(p, _)| p.info.clock.mono0_ns)
        .min()
        .unwrap_or(0);
    out.trace_clock(origin)?;
    for (index, (process, tids)) in threads.iter().enumerate() {
        let pid = process.info.pid;
        let uuid = process_uuid(index);
        out.descriptor(process_track(
            uuid,
            pid,
            &command_line(process),
            &process.info.argv,
        ))?;
        for &tid in tids {
            let name = if tid == pid {
                "main".to_string()
            } else {
                tid.to_string()
            };
            out.descriptor(thread_track(uuid | u64::from(tid), pid, tid, &name))?;
        }
    }

    let mut export = Export {
        out,
        stats: PerfettoStats::default(),
        next_seq: DESCRIPTORS + 1,
        progress,
    };
    for (index, (process, tids)) in threads.iter().enumerate() {
        let mut names = Names::of(process, demangle);
        let mut first: Option<u64> = None;
        let (lost, chunks, damage, exit_lost) = (
            export.stats.lost_events,
            export.stats.lost_chunks,
            export.stats.damage.len(),
            export.stats.exit_lost,
        );
        let before = std::mem::take(&mut export.stats.losses);
        for &tid in tids {
            let events = progress.events(process, tid);
            let track = process_uuid(index) | u64::from(tid);
            if let Some(t0) = export.thread(&mut names, events, track)? {
                first = Some(first.map_or(t0, |f| f.min(t0)));
            }
        }
        let mut args = vec![
            annotation("command", command_line(process)),
            annotation("executable", process.info.exe.as_str()),
            annotation("directory", process.name.as_str()),
            annotation("tracer", process.info.tracer.as_str()),
            annotation("clock_source", process.info.clock.source.as_str()),
            annotation("lost_events", export.stats.lost_events - lost),
            annotation("lost_chunks", export.stats.lost_chunks - chunks),
            annotation("runtime_lost_events", process.info.lost),
            annotation("sites", process.info.sites),
            annotation("patched", process.info.patched),
        ];
        if let Some(note) = process.info.clock.note() {
            args.push(annotation("clock_note", note));
        }
        export.stats.losses.process(process);
        let these = std::mem::replace(&mut export.stats.losses, before);
        let exit_lost = Some(export.stats.exit_lost - exit_lost);
        if let Some(line) = losses::summary(&these, trace, exit_lost) {
            args.push(annotation("incomplete", line));
        }
        export.stats.losses.merge(these);
        if export.stats.damage.len() > damage {
            args.push(annotation("damage", export.stats.damage[damage..].join("; ")));
        }
        if index == 0 {
            run_args(trace, &mut args);
        }
        let ns = first.unwrap_or(process.info.clock.mono0_ns);
        export
            .out
            .absolute_event(ns, metadata_event(process_uuid(index), args))?;
    }
    export.out.finish()?;
    progress.update();
    let mut stats = export.stats;
    stats.packets = export.out.packets;
    stats.bytes = export.out.bytes;
    Ok(stats)
}

/// The uuid of the track of the `index`th process; its threads' are this
/// ORed with their tid.
fn process_uuid(index: usize) -> u64 {
    (index as u64 + 1) << 32
}

/// Recorded values as `replay` writes them.
fn value_texts(values: Option<&[fntrace_format::values::Value]>) -> Vec<String> {
    values
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Debug annotations of recorded values: `arg1`, `arg2`, ... at a slice's
/// begin, `retval` at its end (the viewers' details panel).
fn value_args(texts: &[String], ret: bool) -> Vec<Arg<'_>> {
    const ARGS: [&str; 16] = [
        "arg1", "arg2", "arg3", "arg4", "arg5", "arg6", "arg7", "arg8", "arg9", "arg10", "arg11", "arg12",
        "arg13", "arg14", "arg15", "arg16",
    ];
    texts
        .iter()
        .zip(if ret { &["retval"][..] } else { &ARGS[..] })
        .map(|(t, name)| Arg::Text(name, t))
        .collect()
}

/// The metadata instant of a process.
fn metadata_event(track: u64, args: Vec<DebugAnnotation>) -> TrackEvent {
    let mut event = TrackEvent::new();
    event.set_type(Type::TYPE_INSTANT);
    event.set_track_uuid(track);
    event.set_name("fntrace".to_string());
    event.debug_annotations = args;
    event
}

/// The run's annotations (`info.json`), with the first process's.
fn run_args(trace: &Trace, args: &mut Vec<DebugAnnotation>) {
    args.push(annotation("fntrace_version", env!("CARGO_PKG_VERSION")));
    let Some(info) = &trace.info else { return };
    args.push(annotation("run_command", info.command.join(" ")));
    args.push(annotation("run_tracer", info.tracer.as_str()));
    args.push(annotation("start_time", utc(info.start_unix_ns)));
    if let Some(status) = info.exit_status {
        args.push(annotation("exit_status", status));
    }
    if let Some(signal) = info.signal {
        args.push(annotation("signal", signal));
    }
}

/// The export under way.
struct Export<'w, 'p> {
    out: Out<'w>,
    stats: PerfettoStats,
    next_seq: u32,
    progress: &'p Progress,
}

impl Export<'_, '_> {
    fn sequence(&mut self, track: u64, start_ns: u64) -> anyhow::Result<Seq> {
        let id = self.next_seq;
        self.next_seq = self
            .next_seq
            .checked_add(1)
            .ok_or_else(|| anyhow::anyhow!("too many threads"))?;
        self.stats.sequences += 1;
        Seq::start(&mut self.out, id, track, start_ns)
    }

    /// Writes the events of one thread on `track`; returns the time of its
    /// first event or call, if it has any.
    fn thread(
        &mut self,
        names: &mut Names<'_>,
        mut events: Narrowed,
        track: u64,
    ) -> anyhow::Result<Option<u64>> {
        let Some(first) = events.next() else {
            self.stats.damage.extend(events.damage());
            return Ok(None);
        };
        let mut seq = self.sequence(track, first.ns)?;
        let out = &mut self.out;
        let stats = &mut self.stats;
        let mut stack: CallStack<()> = CallStack::new();
        let first_ns = first.ns;
        let mut now = first.ns;
        for ev in std::iter::once(first).chain(&mut events) {
            stats.events += 1;
            self.progress.tick(stats.events);
            now = now.max(ev.ns);
            let fid = Some(Label::Fid(ev.fid));
            match ev.kind {
                EventKind::Entry => {
                    if stack.push(ev.fid, ()) {
                        let texts = value_texts(ev.values.as_deref());
                        let args = value_args(&texts, false);
                        seq.event(out, names, now, Type::TYPE_SLICE_BEGIN, fid, &args)?;
                        stats.slices += 1;
                    }
                }
                EventKind::Exit | EventKind::Unwind => {
                    let Some(pos) = stack.position(ev.fid) else {
                        stats.ignored_exits += 1;
                        continue;
                    };
                    while stack.len() > pos {
                        let exit_lost = stack.top_spans_loss();
                        stack.pop();
                        let unwound = stack.len() > pos || ev.kind == EventKind::Unwind;
                        let texts = value_texts(ev.values.as_deref());
                        let ret = value_args(&texts, true);
                        let args: &[Arg] = match (exit_lost, unwound) {
                            (true, _) => &[Arg::Flag("exit_lost")],
                            (false, true) => &[Arg::Flag("unwound")],
                            (false, false) => &ret,
                        };
                        seq.event(out, names, now, Type::TYPE_SLICE_END, None, args)?;
                        stats.unwound += u64::from(unwound && !exit_lost);
                        stats.exit_lost += u64::from(exit_lost);
                    }
                }
                EventKind::EntryCaller(caller) => {
                    seq.event(out, names, now, Type::TYPE_INSTANT, fid, &[Arg::Caller(caller)])?;
                    stats.instants += 1;
                }
                EventKind::Lost(n) => {
                    stack.lose();
                    let count = Arg::Count("count", n);
                    let args: &[Arg] = if n == 0 {
                        &[count, Arg::Flag("chunks_missing")]
                    } else {
                        &[count]
                    };
                    let label = Some(Label::Text("events lost"));
                    seq.event(out, names, now, Type::TYPE_INSTANT, label, args)?;
                    stats.instants += 1;
                }
                EventKind::Mark(on) => {
                    let label = Some(Label::Text(if on { "trace_on" } else { "trace_off" }));
                    seq.event(out, names, now, Type::TYPE_INSTANT, label, &[])?;
                    stats.instants += 1;
                }
                // Never: whole calls reach readers nested (`narrow::nest`).
                EventKind::Call { .. } => stats
                    .damage
                    .push(format!("a whole call at {now} ns not nested, left out")),
            }
        }
        while !stack.is_empty() {
            let exit_lost = stack.top_spans_loss();
            stack.pop();
            let why = if exit_lost { "exit_lost" } else { "unfinished" };
            seq.event(out, names, now, Type::TYPE_SLICE_END, None, &[Arg::Flag(why)])?;
            stats.unfinished += u64::from(!exit_lost);
            stats.exit_lost += u64::from(exit_lost);
        }
        stats.losses.thread(events.source());
        stats.lost_events += events.lost();
        stats.lost_chunks += events.lost_chunks();
        stats.damage.extend(events.damage());
        stats.damage.extend(stack.note(events.label()));
        self.progress.update();
        Ok(Some(first_ns))
    }
}
