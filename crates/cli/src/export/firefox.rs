//! The Firefox Profiler's *processed* profile format (profiler.firefox.com,
//! "Load a profile from file"), built with `fxprof-processed-profile`.
//!
//! - One process per traced process image (pid, the command line as name,
//!   start = its clock's first calibration point), one thread per thread
//!   file; the thread whose tid is the pid is the main thread.
//! - Every call is an interval marker (type `FunctionCall`, category
//!   `function`) named by its function, with `end` (`returned`, `unwound`,
//!   `unfinished`, `exit lost`: open when events
//!   were lost, its end unknown), `depth`, and its call stack
//!   as the marker's stack: the Marker Chart and Marker Table list every
//!   call with its exact times.
//! - Samples are synthesized from the calls so that the Call Tree, Flame
//!   Graph and Stack Chart show the call tree with exact inclusive and self
//!   times: one sample at every entry and exit, carrying the stack of the
//!   calls open from there to the next boundary, with that time in
//!   nanoseconds as its weight ("1 sample" = 1 ns; the crate only takes
//!   integer weights, so `tracing-ms` would round every call to whole
//!   milliseconds). A gap longer than `i32::MAX` ns is split into several
//!   samples, up to [`SPLIT_BUDGET`] of them in the whole profile (past
//!   that a gap weighs `i32::MAX` ns, with a damage note: memory does not
//!   grow with a time read from a file). Time with no traced call open
//!   ends with a sample without a stack. The CPU delta of a sample is the
//!   wall time of the stack before
//!   it (fntrace does not measure CPU time), so the activity graph shows
//!   when traced functions were running.
//! - Frames are addresses in a library per module (`functions.tsv`'s
//!   address minus the module's load bias), pre-symbolicated with a symbol
//!   table of the module's functions; a function whose address does not fit
//!   gets a label frame.
//! - `--time-filter` calls (`CALL` events) reach it nested, as entries
//!   and exits (`narrow::nest`); the `function` tracer's
//!   entries are instant markers `FunctionEntry` with their `caller`; lost
//!   events are instant markers "events lost" with `count` (0: chunks
//!   missing, number unknown), and the time from there to the next event
//!   is sampled without a stack (no function's: what ran then is unknown);
//!   trigger marks are "tracing on"/"tracing off". A process that lost
//!   anything ends with an instant marker "trace incomplete" (`count`: the
//!   events lost; `detail`: the line every reader states).
//! - The crate has no free-form profile metadata: each process's main
//!   thread starts with an instant marker "trace info" (command, exe,
//!   tracer, clock source, start time, lost events, sites). `meta.product`
//!   is "fntrace".
//! - Times are milliseconds from the earliest process start
//!   (`meta.startTime` is its Unix time).
//!
//! Unlike `--chrome` and `--perfetto`, which stream, the crate builds the
//! whole profile in memory before writing it: memory grows with the number
//! of calls (the events themselves are streamed, never held). A trace
//! without events writes nothing (the caller reports it).

mod parts;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::Write;

use anyhow::Context;
use fntrace_format::calls::{Call, CallBuilder, End};
use fntrace_format::read::{EventKind, Losses, Process, Trace};
use fxprof_processed_profile::{
    Frame, FrameFlags, FrameHandle, FrameInfo, MarkerTiming, Profile, ReferenceTimestamp, SamplingInterval,
    StackHandle, StringHandle, ThreadHandle, Timestamp,
};

use super::progress::Progress;
use crate::losses;
use crate::trace::Demangle;
use crate::trace::{caller, command_line, utc};
use parts::{Func, Kind, Sampler, Types, Value, SPLIT_BUDGET};

/// What was converted.
#[derive(Debug, Default)]
pub struct FirefoxStats {
    pub processes: usize,
    pub threads: usize,
    /// Trace events read.
    pub events: u64,
    /// Interval markers of calls.
    pub calls: u64,
    pub samples: u64,
    /// Events known to be lost, and gaps of missing chunks.
    pub lost: u64,
    pub lost_chunks: u64,
    /// What the trace lost.
    pub losses: Losses,
    /// Damage notes of the thread files.
    pub damage: Vec<String>,
}

/// Writes the Firefox Profiler JSON of the threads `threads` of `trace` to
/// `out` (nothing when they have no events), moving `progress`.
pub fn write_firefox(
    trace: &Trace,
    threads: &[(&Process, Vec<u32>)],
    out: &mut dyn Write,
    demangle: Demangle,
    progress: &Progress,
) -> anyhow::Result<FirefoxStats> {
    let first = threads
        .iter()
        .map(|(p, _)| *p)
        .min_by_key(|p| p.info.clock.mono0_ns);
    let origin = first.map_or(0, |p| p.info.clock.mono0_ns);
    let unix_ns = first
        .map(|p| p.info.start_unix_ns)
        .or(trace.info.as_ref().map(|i| i.start_unix_ns))
        .unwrap_or(0);
    let reference = ReferenceTimestamp::from_millis_since_unix_epoch(unix_ns as f64 / 1e6);
    // "1 sample" is 1 ns: see the module documentation.
    let mut profile = Profile::new("fntrace", reference, SamplingInterval::from_nanos(1));
    profile.set_symbolicated(true);
    let types = Types::new(&mut profile);
    let ends = [
        "returned",
        "unwound",
        "unfinished",
        "returned (time filter)",
        "exit lost",
    ];
    let ends = ends.map(|s| profile.intern_string(s));
    let mut b = Builder {
        profile,
        types,
        ends,
        origin,
        progress,
        stats: FirefoxStats::default(),
        split_budget: SPLIT_BUDGET,
        trace,
    };
    for (process, tids) in threads {
        b.process(process, tids, demangle);
    }
    progress.update();
    if b.stats.events > 0 {
        // As an io::Error, a closed pipe is seen as one (`output::is_broken_pipe`).
        serde_json::to_writer(&mut *out, &b.profile)
            .map_err(std::io::Error::from)
            .context("cannot write the Firefox profile")?;
        out.flush().context("cannot write the Firefox profile")?;
    }
    Ok(b.stats)
}

/// The profile being built.
struct Builder<'a> {
    profile: Profile,
    types: Types,
    /// `returned`, `unwound`, `unfinished`, `returned (time filter)`,
    /// `exit lost`.
    ends: [StringHandle; 5],
    /// The trace (how it was recorded, for the losses' line).
    trace: &'a Trace,
    /// The monotonic time (ns) of profile time 0.
    origin: u64,
    progress: &'a Progress,
    stats: FirefoxStats,
    /// Samples left for splitting long stretches.
    split_budget: u64,
}

/// One thread being converted.
struct ThreadState<'f> {
    handle: ThreadHandle,
    funcs: &'f HashMap<u32, Func>,
    frames: HashMap<u32, FrameHandle>,
    /// Callers of the `function` tracer's entries, by return address.
    callers: HashMap<u64, StringHandle>,
    sampler: Sampler,
}

impl Builder<'_> {
    fn ts(&self, ns: u64) -> Timestamp {
        Timestamp::from_nanos_since_reference(ns.saturating_sub(self.origin))
    }

    /// Converts the threads `tids` of `process`.
    fn process(&mut self, process: &Process, tids: &[u32], demangle: Demangle) {
        let (pid, start) = (process.info.pid, process.info.clock.mono0_ns);
        let at = self.ts(start);
        let handle = self.profile.add_process(&command_line(process), pid, at);
        let funcs = parts::functions(&mut self.profile, process, demangle);
        let main = match tids.contains(&pid) {
            true => Some(pid),
            false => tids.first().copied(),
        };
        let mut end = start;
        let before = std::mem::take(&mut self.stats.losses);
        let mut first_thread = None;
        for &tid in tids {
            let thread = self.profile.add_thread(handle, tid, at, tid == pid);
            if tid != pid {
                self.profile.set_thread_name(thread, &format!("thread {tid}"));
                self.profile.set_thread_show_markers_in_timeline(thread, true);
            }
            if Some(tid) == main {
                self.info_marker(thread, process, start);
                first_thread = Some(thread);
            }
            let mut t = ThreadState {
                handle: thread,
                funcs: &funcs,
                frames: HashMap::new(),
                callers: HashMap::new(),
                sampler: Sampler::new(thread, self.origin, self.split_budget),
            };
            if let Some((first, last)) = self.thread(process, &mut t, tid) {
                if tid != pid {
                    self.profile.set_thread_start_time(thread, self.ts(first));
                }
                self.profile.set_thread_end_time(thread, self.ts(last));
                end = end.max(last);
            }
            self.stats.samples += t.sampler.samples;
            self.split_budget = t.sampler.budget;
            self.stats.threads += 1;
        }
        self.stats.losses.process(process);
        let these = std::mem::replace(&mut self.stats.losses, before);
        if let (Some(line), Some(thread)) = (losses::summary(&these, self.trace, None), first_thread) {
            let values = [
                Value::N(these.lost as f64),
                Value::S(self.profile.intern_string(&line)),
            ];
            let name = self.profile.intern_string("trace incomplete");
            let at = MarkerTiming::Instant(self.ts(end));
            self.types
                .add(&mut self.profile, thread, at, Kind::Lost, name, &values);
        }
        self.stats.losses.merge(these);
        if process.info.ended {
            self.profile.set_process_end_time(handle, self.ts(end));
        }
        self.stats.processes += 1;
    }

    /// Converts the events of thread `tid`; returns the times of its first
    /// and last events.
    fn thread(&mut self, process: &Process, t: &mut ThreadState, tid: u32) -> Option<(u64, u64)> {
        let mut events = self.progress.events(process, tid);
        let mut builder = CallBuilder::new();
        // The stacks of the calls open in `builder`.
        let (mut done, mut open) = (Vec::new(), Vec::new());
        let mut span: Option<(u64, u64)> = None;
        let mut entries = false;
        for ev in events.by_ref() {
            self.stats.events += 1;
            self.progress.tick(self.stats.events);
            span = Some(span.map_or((ev.ns, ev.ns), |(a, b)| (a.min(ev.ns), b.max(ev.ns))));
            let at = MarkerTiming::Instant(self.ts(ev.ns));
            match ev.kind {
                EventKind::Entry => {
                    entries = true;
                    let depth = builder.depth();
                    builder.push(&ev, &mut done);
                    if builder.depth() == depth {
                        continue; // Left out: nested too deep.
                    }
                    let stack = self.stack(t, open.last().copied(), ev.fid);
                    open.push(stack);
                    t.sampler.at(&mut self.profile, ev.ns, Some(stack));
                }
                EventKind::Exit | EventKind::Unwind => {
                    builder.push(&ev, &mut done);
                    // It closes the innermost calls, as many as it hands out.
                    for call in done.drain(..) {
                        let stack = open.pop();
                        self.call_marker(t, &call, stack, false);
                    }
                    t.sampler.at(&mut self.profile, ev.ns, open.last().copied());
                }
                EventKind::Call { .. } => builder.push(&ev, &mut done),
                EventKind::EntryCaller(addr) => {
                    let values = [Value::S(self.caller(t, process, addr))];
                    let name = self.func(t, ev.fid).name;
                    self.types
                        .add(&mut self.profile, t.handle, at, Kind::Entry, name, &values);
                }
                EventKind::Lost(n) => {
                    // Calls open now may have lost their exits.
                    builder.push(&ev, &mut done);
                    t.sampler.at(&mut self.profile, ev.ns, None);
                    let detail = match n {
                        0 => "chunks missing, an unknown number of events".to_string(),
                        n => format!("{n} events dropped"),
                    };
                    let values = [Value::N(n as f64), Value::S(self.profile.intern_string(&detail))];
                    let name = self.profile.intern_string("events lost");
                    self.types
                        .add(&mut self.profile, t.handle, at, Kind::Lost, name, &values);
                }
                EventKind::Mark(on) => {
                    let name = self
                        .profile
                        .intern_string(if on { "tracing on" } else { "tracing off" });
                    self.types
                        .add(&mut self.profile, t.handle, at, Kind::Mark, name, &[]);
                }
            }
        }
        self.stats.losses.thread(events.source());
        self.stats.lost += events.lost();
        self.stats.lost_chunks += events.lost_chunks();
        self.stats.damage.extend(events.damage());
        self.stats.damage.extend(builder.note(events.label()));
        let (_, last) = span?;
        // Calls still open end here, then come the `--time-filter` calls.
        let unfinished = builder.depth();
        builder.finish(last, &mut done);
        let whole = done.split_off(unfinished.min(done.len()));
        for call in done {
            let stack = open.pop();
            self.call_marker(t, &call, stack, false);
        }
        t.sampler.at(&mut self.profile, last, None);
        self.whole_calls(t, whole, !entries);
        t.sampler.finish(&mut self.profile);
        self.stats.damage.extend(t.sampler.note(events.label()));
        span
    }

    /// The `--time-filter` calls, nested by the builder: markers with their
    /// stacks, and samples when `sample` (the thread has no entries).
    fn whole_calls(&mut self, t: &mut ThreadState, mut calls: Vec<Call>, sample: bool) {
        calls.sort_by_key(|c| (c.start_ns, c.depth));
        let mut stack: Vec<(u64, StackHandle)> = Vec::new();
        let pop_to =
            |b: &mut Builder<'_>, t: &mut ThreadState, stack: &mut Vec<(u64, StackHandle)>, depth| {
                while stack.len() > depth {
                    let Some((end, _)) = stack.pop() else { break };
                    if sample {
                        t.sampler.at(&mut b.profile, end, stack.last().map(|s| s.1));
                    }
                }
            };
        for call in &calls {
            pop_to(self, t, &mut stack, call.depth as usize);
            let handle = self.stack(t, stack.last().map(|s| s.1), call.fid);
            if sample {
                t.sampler.at(&mut self.profile, call.start_ns, Some(handle));
            }
            stack.push((call.end_ns, handle));
            self.call_marker(t, call, Some(handle), true);
        }
        pop_to(self, t, &mut stack, 0);
    }

    /// Return address `addr` as `function+0xoffset` (or the address),
    /// interned once per thread.
    fn caller(&mut self, t: &mut ThreadState, process: &Process, addr: u64) -> StringHandle {
        if let Some(&handle) = t.callers.get(&addr) {
            return handle;
        }
        let from = match caller(&process.functions, addr) {
            Some(fid) => {
                let off = addr - process.functions.get(fid).map_or(addr, |f| f.address);
                let name = self.func(t, fid).name;
                format!("{}+{off:#x}", self.profile.get_string(name))
            }
            None => format!("{addr:#x}"),
        };
        let handle = self.profile.intern_string(&from);
        t.callers.insert(addr, handle);
        handle
    }

    /// Function `fid` of the thread's process.
    fn func(&mut self, t: &ThreadState, fid: u32) -> Func {
        t.funcs.get(&fid).cloned().unwrap_or_else(|| {
            let name = self.profile.intern_string(&format!("fid#{fid}"));
            Func {
                name,
                frame: Frame::Label(name),
            }
        })
    }

    /// The stack `parent` with a call of `fid` on top.
    fn stack(&mut self, t: &mut ThreadState, parent: Option<StackHandle>, fid: u32) -> StackHandle {
        let frame = match t.frames.get(&fid) {
            Some(&frame) => frame,
            None => {
                let frame = self.func(t, fid).frame;
                let category_pair = self.types.function.into();
                let info = FrameInfo {
                    frame,
                    category_pair,
                    flags: FrameFlags::empty(),
                };
                let frame = self.profile.intern_frame(t.handle, info);
                t.frames.insert(fid, frame);
                frame
            }
        };
        self.profile.intern_stack(t.handle, parent, frame)
    }

    fn call_marker(&mut self, t: &ThreadState, call: &Call, stack: Option<StackHandle>, whole: bool) {
        let end = match call.end {
            End::Returned if whole => self.ends[3],
            End::Returned => self.ends[0],
            End::Unwound => self.ends[1],
            End::Unfinished => self.ends[2],
            End::ExitLost => self.ends[4],
        };
        let name = self.func(t, call.fid).name;
        let timing = MarkerTiming::Interval(self.ts(call.start_ns), self.ts(call.end_ns));
        let args = self.profile.intern_string(call.args.as_deref().unwrap_or(""));
        let ret = self.profile.intern_string(call.ret.as_deref().unwrap_or(""));
        let values = [
            Value::S(end),
            Value::N(f64::from(call.depth)),
            Value::S(args),
            Value::S(ret),
        ];
        let marker = self
            .types
            .add(&mut self.profile, t.handle, timing, Kind::Call, name, &values);
        self.profile.set_marker_stack(t.handle, marker, stack);
        self.stats.calls += 1;
    }

    /// The process's "trace info" marker, at its start.
    fn info_marker(&mut self, thread: ThreadHandle, process: &Process, start: u64) {
        let info = &process.info;
        let clock = match info.clock.note() {
            Some(note) => format!("{} ({note})", info.clock.source),
            None => info.clock.source.clone(),
        };
        let (exe, tracer, started) = (info.exe.clone(), info.tracer.clone(), utc(info.start_unix_ns));
        let strings = [command_line(process), exe, tracer, clock, started];
        let mut values: Vec<Value> = strings
            .iter()
            .map(|s| Value::S(self.profile.intern_string(s)))
            .collect();
        values.extend([info.lost, info.sites, info.patched].map(|n| Value::N(n as f64)));
        let name = self.profile.intern_string("trace info");
        let at = MarkerTiming::Instant(self.ts(start));
        self.types
            .add(&mut self.profile, thread, at, Kind::Info, name, &values);
    }
}
