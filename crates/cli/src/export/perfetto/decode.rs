//! For the tests: synthetic data directories, written with fntrace-format's
//! encoders and converted; the output decoded with Perfetto's own `Trace`
//! type and read back the way trace processor reads sequences (interned
//! names per sequence, timestamps through the incremental clock), checking
//! the sequence rules on the way.

use crate::trace::Demangle;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use fntrace_format::calls::{CallBuilder, End};
use fntrace_format::layout;
use fntrace_format::meta::{Clock, FunctionEntry, ProcessInfo, RunInfo, VERSION};
use fntrace_format::read;
use fntrace_format::write::ChunkBuilder;
use perfetto_protos::debug_annotation::{debug_annotation, DebugAnnotation};
use perfetto_protos::trace::Trace as PerfettoTrace;
use perfetto_protos::track_event::track_event::Type;
use protobuf::Message;

use super::packets::{INCREMENTAL, MONOTONIC};
use super::{write_perfetto, PerfettoStats};

pub(super) const T0: u64 = 5_000_000_000;
pub(super) const FUNCTIONS: [&str; 4] = ["main", "_Z3fibi", "count_primes", "apply"];

/// A data directory in the temporary directory, removed when dropped.
pub(super) struct Dir(pub(super) PathBuf);

impl Dir {
    pub(super) fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("fntrace-perfetto-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let info = RunInfo {
            command: vec!["./prog".into(), "6".into()],
            tracer: "function_graph".into(),
            start_unix_ns: 1_709_296_496_789_000_000,
            exit_status: Some(0),
            ..RunInfo::default()
        };
        std::fs::write(dir.join(layout::INFO), info.to_json()).unwrap();
        Dir(dir)
    }

    /// Process `pid` (image 0) with [`FUNCTIONS`] at 0x1000, 0x1100, ...
    pub(super) fn process(&self, pid: u32, tracer: &str, threads: &[(u32, Vec<ChunkBuilder>)]) {
        self.process_with(pid, tracer, &FUNCTIONS, threads);
    }

    /// Process `pid` (image 0) with `functions` at 0x1000, 0x1100, ...
    pub(super) fn process_with(
        &self,
        pid: u32,
        tracer: &str,
        functions: &[&str],
        threads: &[(u32, Vec<ChunkBuilder>)],
    ) {
        let dir = self.0.join(layout::process_dir(pid, 0));
        std::fs::create_dir_all(&dir).unwrap();
        let info = ProcessInfo {
            version: VERSION,
            pid,
            exe: "/work/prog".into(),
            argv: vec!["./prog".into(), pid.to_string()],
            tracer: tracer.into(),
            clock: Clock::monotonic(T0),
            lost: 3,
            untraced: 0,
            ..ProcessInfo::default()
        };
        std::fs::write(dir.join(layout::PROCESS), info.to_json()).unwrap();
        let table: String = (0..functions.len() as u32)
            .map(|fid| {
                FunctionEntry {
                    fid,
                    module: "/work/prog".into(),
                    address: 0x1000 + u64::from(fid) * 0x100,
                    size: 0x100,
                    name: functions[fid as usize].into(),
                }
                .to_line()
            })
            .collect();
        std::fs::write(dir.join(layout::FUNCTIONS), table).unwrap();
        for (tid, chunks) in threads {
            let bytes: Vec<u8> = chunks.iter().flat_map(ChunkBuilder::bytes).collect();
            std::fs::write(dir.join(layout::thread_file(*tid)), bytes).unwrap();
        }
    }

    pub(super) fn export(&self) -> (Vec<u8>, PerfettoStats) {
        let trace = read::open(&self.0).unwrap();
        let mut bytes = Vec::new();
        let stats = write_perfetto(&trace, &mut bytes, Demangle::Full).unwrap();
        assert_eq!(stats.bytes, bytes.len() as u64);
        (bytes, stats)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One event of a track, decoded.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ev {
    pub(super) ns: u64,
    pub(super) ty: Type,
    pub(super) name: String,
    pub(super) args: BTreeMap<String, String>,
    pub(super) seq: u32,
}

/// What the decoded output holds.
#[derive(Default)]
pub(super) struct Decoded {
    /// uuid -> (pid, name)
    pub(super) processes: BTreeMap<u64, (i32, String)>,
    /// uuid -> (pid, tid, name)
    pub(super) threads: BTreeMap<u64, (i32, i32, String)>,
    /// Events per track, in the order trace processor sorts them (time,
    /// then file order).
    pub(super) tracks: BTreeMap<u64, Vec<Ev>>,
    pub(super) primary_clock: bool,
}

/// The state of one sequence, as trace processor keeps it.
#[derive(Default)]
struct SeqState {
    cleared: bool,
    clock: Option<u32>,
    track: u64,
    last: u64,
    names: HashMap<u64, String>,
    arg_names: HashMap<u64, String>,
    strings: HashMap<u64, String>,
}

pub(super) fn decode(bytes: &[u8]) -> Decoded {
    let trace = PerfettoTrace::parse_from_bytes(bytes).unwrap();
    let mut d = Decoded::default();
    let mut seqs: HashMap<u32, SeqState> = HashMap::new();
    for (i, p) in trace.packet.iter().enumerate() {
        let id = p.trusted_packet_sequence_id();
        assert_ne!(id, 0, "packet {i} has no sequence");
        let s = seqs.entry(id).or_default();
        if p.sequence_flags() & CLEARED_FLAG != 0 {
            assert!(!s.cleared, "sequence {id} cleared twice");
            assert!(p.first_packet_on_sequence());
            *s = SeqState {
                cleared: true,
                ..SeqState::default()
            };
        }
        assert!(s.cleared, "packet {i} before its sequence {id} was cleared");
        if p.has_clock_snapshot() {
            let snap = p.clock_snapshot();
            if i == 0 {
                d.primary_clock = snap.primary_trace_clock() as u32 == MONOTONIC;
            }
            for c in &snap.clocks {
                if c.clock_id() == INCREMENTAL {
                    assert!(c.is_incremental());
                    let mono = snap.clocks.iter().find(|c| c.clock_id() == MONOTONIC).unwrap();
                    assert_eq!(c.timestamp(), mono.timestamp());
                    s.last = c.timestamp();
                }
            }
        }
        if let Some(defaults) = p.trace_packet_defaults.as_ref() {
            s.clock = Some(defaults.timestamp_clock_id());
            s.track = defaults.track_event_defaults.track_uuid();
        }
        if let Some(interned) = p.interned_data.as_ref() {
            for e in &interned.event_names {
                assert!(s.names.insert(e.iid(), e.name().to_string()).is_none());
            }
            for e in &interned.debug_annotation_names {
                assert!(s.arg_names.insert(e.iid(), e.name().to_string()).is_none());
            }
            for e in &interned.debug_annotation_string_values {
                let text = String::from_utf8(e.str().to_vec()).unwrap();
                assert!(s.strings.insert(e.iid(), text).is_none());
            }
        }
        if p.has_track_descriptor() {
            let t = p.track_descriptor();
            if let Some(pd) = t.process.as_ref() {
                d.processes
                    .insert(t.uuid(), (pd.pid(), pd.process_name().to_string()));
            }
            if let Some(td) = t.thread.as_ref() {
                d.threads
                    .insert(t.uuid(), (td.pid(), td.tid(), td.thread_name().to_string()));
            }
        }
        if !p.has_track_event() {
            continue;
        }
        let e = p.track_event();
        assert!(p.has_timestamp(), "packet {i}: an event without a timestamp");
        let clock = if p.has_timestamp_clock_id() {
            Some(p.timestamp_clock_id())
        } else {
            s.clock
        };
        let ns = match clock {
            Some(INCREMENTAL) => {
                assert_eq!(p.sequence_flags(), NEEDS_FLAG);
                s.last += p.timestamp();
                s.last
            }
            Some(MONOTONIC) => p.timestamp(),
            other => panic!("packet {i}: clock {other:?}"),
        };
        let name = if e.has_name_iid() {
            s.names[&e.name_iid()].clone()
        } else {
            e.name().to_string()
        };
        let args = e.debug_annotations.iter().map(|a| arg(a, s)).collect();
        let track = if e.has_track_uuid() {
            e.track_uuid()
        } else {
            s.track
        };
        let ev = Ev {
            ns,
            ty: e.type_(),
            name,
            args,
            seq: id,
        };
        d.tracks.entry(track).or_default().push(ev);
    }
    for events in d.tracks.values_mut() {
        events.sort_by_key(|e| e.ns); // stable: file order at equal times
    }
    d
}

const CLEARED_FLAG: u32 = 1;
const NEEDS_FLAG: u32 = 2;

fn arg(a: &DebugAnnotation, s: &SeqState) -> (String, String) {
    let name = if a.has_name_iid() {
        s.arg_names[&a.name_iid()].clone()
    } else {
        a.name().to_string()
    };
    let value = match &a.value {
        Some(debug_annotation::Value::BoolValue(b)) => b.to_string(),
        Some(debug_annotation::Value::UintValue(n)) => n.to_string(),
        Some(debug_annotation::Value::IntValue(n)) => n.to_string(),
        Some(debug_annotation::Value::StringValue(v)) => v.clone(),
        Some(debug_annotation::Value::StringValueIid(iid)) => s.strings[iid].clone(),
        other => panic!("annotation {name}: {other:?}"),
    };
    (name, value)
}

/// A slice rebuilt from a track's begin/end events.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Slice {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) name: String,
    pub(super) depth: u32,
    pub(super) how: &'static str,
}

/// The slices of a track, matched as trace processor does (an end closes
/// the innermost open slice); the instants as `(ns, name, args)`.
/// An instant event: time, name, arguments.
pub(super) type Instant = (u64, String, BTreeMap<String, String>);

pub(super) fn slices(events: &[Ev]) -> (Vec<Slice>, Vec<Instant>) {
    let mut open: Vec<&Ev> = Vec::new();
    let (mut slices, mut instants) = (Vec::new(), Vec::new());
    for e in events {
        match e.ty {
            Type::TYPE_SLICE_BEGIN => open.push(e),
            Type::TYPE_SLICE_END => {
                let begin = open.pop().expect("end without begin");
                assert_eq!(begin.seq, e.seq, "begin and end on different sequences");
                let how = match (
                    e.args.get("unwound"),
                    e.args.get("unfinished"),
                    e.args.get("exit_lost"),
                ) {
                    (Some(_), _, _) => "unwound",
                    (_, Some(_), _) => "unfinished",
                    (_, _, Some(_)) => "exit lost",
                    _ => "returned",
                };
                slices.push(Slice {
                    start: begin.ns,
                    end: e.ns,
                    name: begin.name.clone(),
                    depth: open.len() as u32,
                    how,
                });
            }
            Type::TYPE_INSTANT => instants.push((e.ns, e.name.clone(), e.args.clone())),
            other => panic!("event type {other:?}"),
        }
    }
    assert!(open.is_empty(), "slices left open");
    slices.sort();
    (slices, instants)
}

/// The calls of thread `tid` of process `pid`, by fntrace's own reader.
pub(super) fn expected(dir: &Dir, pid: u32, tid: u32) -> Vec<Slice> {
    let trace = read::open(&dir.0).unwrap();
    let process = trace.processes.iter().find(|p| p.info.pid == pid).unwrap();
    let mut builder = CallBuilder::new();
    let mut calls = Vec::new();
    let mut last = 0;
    for ev in process.events(tid) {
        builder.push(&ev, &mut calls);
        last = ev.ns;
    }
    builder.finish(last, &mut calls);
    let mut slices: Vec<Slice> = calls
        .iter()
        .map(|c| Slice {
            start: c.start_ns,
            end: c.end_ns,
            name: fntrace_filter::demangle::demangle(&process.functions.name(c.fid)),
            depth: c.depth,
            how: match c.end {
                End::Returned => "returned",
                End::Unwound => "unwound",
                End::Unfinished => "unfinished",
                End::ExitLost => "exit lost",
            },
        })
        .collect();
    slices.sort();
    slices
}

pub(super) fn thread_uuid(index: u64, tid: u32) -> u64 {
    ((index + 1) << 32) | u64::from(tid)
}
