//! The packets of the Perfetto export, written one at a time, each as one
//! `Trace.packet` field (field 1: `0a`, varint length, bytes): a
//! concatenation of such fields is one `Trace`. The few packets that are
//! not track events of a thread (clocks, track descriptors, the metadata
//! instants, the first packet of each sequence) are built with Perfetto's
//! own message types (`perfetto_protos`, generated from Perfetto's `.proto`
//! files); the event packets, one per event, are encoded by hand
//! (`proto.rs`) with the fields and values those types would give them, in
//! the same order (the tests compare the two, `reference.rs`).
//!
//! [`Seq`] is one packet sequence (`trusted_packet_sequence_id`) of track
//! events on one thread track: its first packet clears the incremental
//! state and declares the sequence's defaults and clock; its event packets
//! are delta-encoded on that clock and name their events and annotations by
//! interned ids, each entry sent once, in the packet that first uses it.

use std::collections::HashMap;
use std::io::Write;

use perfetto_protos::builtin_clock::BuiltinClock;
use perfetto_protos::clock_snapshot::{clock_snapshot::Clock, ClockSnapshot};
use perfetto_protos::debug_annotation::DebugAnnotation;
use perfetto_protos::process_descriptor::ProcessDescriptor;
use perfetto_protos::thread_descriptor::ThreadDescriptor;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::trace_packet_defaults::TracePacketDefaults;
use perfetto_protos::track_descriptor::TrackDescriptor;
use perfetto_protos::track_event::{track_event::Type, TrackEvent, TrackEventDefaults};
use protobuf::{Enum, Message, MessageField};

use super::proto::{self, annotation, event, interned, packet, Small};
use crate::trace::Names;

/// `CLOCK_MONOTONIC`: the trace's clock (fntrace's times are in it).
pub const MONOTONIC: u32 = BuiltinClock::BUILTIN_CLOCK_MONOTONIC as u32;
/// The clock of a thread sequence's event packets: sequence-scoped (ids
/// 64..=127 are), incremental, in nanoseconds.
pub const INCREMENTAL: u32 = 64;
/// The sequence of the descriptors and the per-process metadata events.
pub const DESCRIPTORS: u32 = 1;

const CLEARED: u32 = SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32;
const NEEDS: u32 = SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32;

/// Bytes of packets gathered before they are written.
const BUFFER: usize = 64 * 1024;

/// The output: packets encoded one by one into a bounded buffer, counted.
pub struct Out<'w> {
    w: &'w mut dyn Write,
    buf: Vec<u8>,
    pub packets: u64,
    pub bytes: u64,
}

impl<'w> Out<'w> {
    pub fn new(w: &'w mut dyn Write) -> Out<'w> {
        Out {
            w,
            buf: Vec::with_capacity(BUFFER + 1024),
            packets: 0,
            bytes: 0,
        }
    }

    /// Writes `packet` as one more `Trace.packet`.
    pub fn packet(&mut self, packet: &TracePacket) -> anyhow::Result<()> {
        let before = self.buf.len();
        proto::message(&mut self.buf, proto::TRACE_PACKET, |b| packet.write_to_vec(b))?;
        self.written(before)
    }

    /// Writes one more `Trace.packet`, its fields appended by `f`.
    #[inline]
    pub fn encoded(&mut self, f: impl FnOnce(&mut Vec<u8>)) -> anyhow::Result<()> {
        let before = self.buf.len();
        proto::message(&mut self.buf, proto::TRACE_PACKET, f);
        self.written(before)
    }

    /// Writes `packet`, a whole `Trace.packet` field.
    #[inline(always)]
    pub fn small(&mut self, packet: &Small) -> anyhow::Result<()> {
        // All of it (a copy of a known size, inlined), then cut.
        let before = self.buf.len();
        self.buf.extend_from_slice(packet.buffer());
        self.buf.truncate(before + packet.len());
        self.written(before)
    }

    /// Counts the packet written to the buffer from `before`, and writes
    /// the buffer out once full.
    #[inline(always)]
    fn written(&mut self, before: usize) -> anyhow::Result<()> {
        self.packets += 1;
        self.bytes += (self.buf.len() - before) as u64;
        if self.buf.len() >= BUFFER {
            return self.write_buffer();
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn write_buffer(&mut self) -> anyhow::Result<()> {
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is left in the buffer, and flushes.
    pub fn finish(&mut self) -> anyhow::Result<()> {
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        self.w.flush()?;
        Ok(())
    }

    /// The first packet: `CLOCK_MONOTONIC` is the trace's clock (Perfetto
    /// assumes `CLOCK_BOOTTIME` otherwise, which fntrace does not read).
    pub fn trace_clock(&mut self, now_ns: u64) -> anyhow::Result<()> {
        let mut snapshot = ClockSnapshot::new();
        snapshot.clocks.push(clock(MONOTONIC, now_ns, false));
        snapshot.set_primary_trace_clock(BuiltinClock::BUILTIN_CLOCK_MONOTONIC);
        let mut p = TracePacket::new();
        p.set_trusted_packet_sequence_id(DESCRIPTORS);
        p.set_first_packet_on_sequence(true);
        p.set_sequence_flags(CLEARED);
        p.set_clock_snapshot(snapshot);
        self.packet(&p)
    }

    /// A track descriptor, on the descriptors' sequence.
    pub fn descriptor(&mut self, track: TrackDescriptor) -> anyhow::Result<()> {
        let mut p = TracePacket::new();
        p.set_trusted_packet_sequence_id(DESCRIPTORS);
        p.set_track_descriptor(track);
        self.packet(&p)
    }

    /// A track event at absolute time `ns`, on the descriptors' sequence
    /// (names inline: the per-process metadata).
    pub fn absolute_event(&mut self, ns: u64, event: TrackEvent) -> anyhow::Result<()> {
        let mut p = TracePacket::new();
        p.set_trusted_packet_sequence_id(DESCRIPTORS);
        p.set_timestamp(ns);
        p.set_timestamp_clock_id(MONOTONIC);
        p.set_track_event(event);
        self.packet(&p)
    }
}

/// One clock of a snapshot.
fn clock(id: u32, ns: u64, incremental: bool) -> Clock {
    let mut c = Clock::new();
    c.set_clock_id(id);
    c.set_timestamp(ns);
    if incremental {
        c.set_is_incremental(true);
    }
    c
}

/// A process track: its process's pid and name.
pub fn process_track(uuid: u64, pid: u32, name: &str, argv: &[String]) -> TrackDescriptor {
    let mut process = ProcessDescriptor::new();
    process.set_pid(i32::try_from(pid).unwrap_or(i32::MAX));
    process.set_process_name(name.to_string());
    process.cmdline = argv.to_vec();
    let mut track = TrackDescriptor::new();
    track.set_uuid(uuid);
    track.process = MessageField::some(process);
    track
}

/// A thread track.
pub fn thread_track(uuid: u64, pid: u32, tid: u32, name: &str) -> TrackDescriptor {
    let mut thread = ThreadDescriptor::new();
    thread.set_pid(i32::try_from(pid).unwrap_or(i32::MAX));
    thread.set_tid(i32::try_from(tid).unwrap_or(i32::MAX));
    thread.set_thread_name(name.to_string());
    let mut track = TrackDescriptor::new();
    track.set_uuid(uuid);
    track.thread = MessageField::some(thread);
    track
}

/// A debug annotation with its name inline.
pub fn annotation(name: &str, value: impl Into<Value>) -> DebugAnnotation {
    let mut a = DebugAnnotation::new();
    a.set_name(name.to_string());
    match value.into() {
        Value::Bool(b) => a.set_bool_value(b),
        Value::Uint(n) => a.set_uint_value(n),
        Value::Int(n) => a.set_int_value(n),
        Value::Str(s) => a.set_string_value(s),
    }
    a
}

/// The value of a debug annotation.
pub enum Value {
    Bool(bool),
    Uint(u64),
    Int(i64),
    Str(String),
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Uint(n)
    }
}

impl From<i32> for Value {
    fn from(n: i32) -> Value {
        Value::Int(n.into())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}

/// The name of an event: a function, or a fixed text.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Label {
    Fid(u32),
    Text(&'static str),
}

/// An argument of an event (a debug annotation, name and string interned).
#[derive(Clone, Copy)]
pub enum Arg<'a> {
    /// `name: true`.
    Flag(&'static str),
    /// `name: n`.
    Count(&'static str, u64),
    /// `caller: "function+0xoff"`, from a return address.
    Caller(u64),
    /// `name: "text"` (a recorded value, as `replay` writes it; not
    /// interned: values rarely repeat).
    Text(&'static str, &'a str),
}

/// Function names are interned through a table indexed by fid below this
/// fid (ids are dense from 0), through a map above it (damaged ids).
const FID_TABLE: u32 = 1 << 20;

/// One packet sequence of track events on one track. Its event packets are
/// encoded by hand (`proto.rs`), with the fields and values
/// `perfetto_protos` would give them:
///
/// ```text
/// TracePacket {
///   timestamp: delta (ns since the sequence's previous packet)
///   interned_data: { event_names, debug_annotation_names,
///                    debug_annotation_string_values }   (new entries only)
///   sequence_flags: SEQ_NEEDS_INCREMENTAL_STATE
///   track_event: { type, debug_annotations: [{ name_iid, value }], name_iid }
///   trusted_packet_sequence_id: id
/// }
/// ```
pub struct Seq {
    id: u32,
    /// The time of the last packet (ns): the base of the next delta.
    now: u64,
    /// The iid of the name of function `fid` (0: not interned yet), for
    /// fids below [`FID_TABLE`].
    fids: Vec<u64>,
    /// The iids of the other event names.
    labels: HashMap<Label, u64>,
    /// Event names interned so far (their iids are 1, 2, ...).
    named: u64,
    arg_names: HashMap<&'static str, u64>,
    callers: HashMap<u64, u64>,
    /// Interned entries not yet sent, encoded as the `InternedData` fields
    /// they are: event names, annotation names, annotation strings.
    pending_names: Vec<u8>,
    pending_arg_names: Vec<u8>,
    pending_strings: Vec<u8>,
    /// The debug annotations of the event being written, encoded.
    annotations: Vec<u8>,
}

impl Seq {
    /// Starts sequence `id` for events on track `track`, its clock at
    /// `start_ns`: the packet that clears the incremental state, sets the
    /// defaults (timestamps on the incremental clock, events on `track`)
    /// and ties the incremental clock to `CLOCK_MONOTONIC`.
    pub fn start(out: &mut Out<'_>, id: u32, track: u64, start_ns: u64) -> anyhow::Result<Seq> {
        let mut event_defaults = TrackEventDefaults::new();
        event_defaults.set_track_uuid(track);
        let mut defaults = TracePacketDefaults::new();
        defaults.set_timestamp_clock_id(INCREMENTAL);
        defaults.track_event_defaults = MessageField::some(event_defaults);
        let mut snapshot = ClockSnapshot::new();
        snapshot.clocks.push(clock(MONOTONIC, start_ns, false));
        snapshot.clocks.push(clock(INCREMENTAL, start_ns, true));

        let mut p = TracePacket::new();
        p.set_trusted_packet_sequence_id(id);
        p.set_first_packet_on_sequence(true);
        p.set_sequence_flags(CLEARED);
        p.trace_packet_defaults = MessageField::some(defaults);
        p.set_clock_snapshot(snapshot);
        out.packet(&p)?;

        Ok(Seq {
            id,
            now: start_ns,
            fids: Vec::new(),
            labels: HashMap::new(),
            named: 0,
            arg_names: HashMap::new(),
            callers: HashMap::new(),
            pending_names: Vec::new(),
            pending_arg_names: Vec::new(),
            pending_strings: Vec::new(),
            annotations: Vec::new(),
        })
    }

    /// Writes an event of type `ty` at `ns` (raised to the previous
    /// event's time if earlier: deltas are unsigned).
    pub fn event(
        &mut self,
        out: &mut Out<'_>,
        names: &mut Names<'_>,
        ns: u64,
        ty: Type,
        label: Option<Label>,
        args: &[Arg<'_>],
    ) -> anyhow::Result<()> {
        let ns = ns.max(self.now);
        let delta = ns - self.now;
        self.now = ns;
        let iid = label.map(|label| self.name_iid(label, names));
        self.annotations.clear();
        for &arg in args {
            self.arg(arg, names);
        }
        // An enum is an int32: a negative one would be sign-extended.
        let ty = ty.value() as i64 as u64;
        let pending = !(self.pending_names.is_empty()
            && self.pending_arg_names.is_empty()
            && self.pending_strings.is_empty());
        if !pending && self.annotations.is_empty() {
            // Most packets: at most 2 + 11 + 2 + 2 + 11 + 11 + 6 bytes.
            let mut p = Small::new();
            let whole = p.begin(proto::TRACE_PACKET);
            p.uint(packet::TIMESTAMP, delta);
            p.uint(packet::SEQUENCE_FLAGS, NEEDS.into());
            let track_event = p.begin(packet::TRACK_EVENT);
            p.uint(event::TYPE, ty);
            if let Some(iid) = iid {
                p.uint(event::NAME_IID, iid);
            }
            p.end(track_event);
            p.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, self.id.into());
            p.end(whole);
            return out.small(&p);
        }
        out.encoded(|buf| {
            proto::uint(buf, packet::TIMESTAMP, delta);
            if pending {
                proto::message(buf, packet::INTERNED_DATA, |b| {
                    b.extend_from_slice(&self.pending_names);
                    b.extend_from_slice(&self.pending_arg_names);
                    b.extend_from_slice(&self.pending_strings);
                });
                self.pending_names.clear();
                self.pending_arg_names.clear();
                self.pending_strings.clear();
            }
            proto::uint(buf, packet::SEQUENCE_FLAGS, NEEDS.into());
            proto::message(buf, packet::TRACK_EVENT, |b| {
                proto::uint(b, event::TYPE, ty);
                b.extend_from_slice(&self.annotations);
                if let Some(iid) = iid {
                    proto::uint(b, event::NAME_IID, iid);
                }
            });
            proto::uint(buf, packet::TRUSTED_PACKET_SEQUENCE_ID, self.id.into());
        })
    }

    #[inline]
    fn name_iid(&mut self, label: Label, names: &mut Names<'_>) -> u64 {
        let slot = match label {
            Label::Fid(fid) if fid < FID_TABLE => {
                let i = fid as usize;
                match self.fids.get(i) {
                    Some(&iid) if iid != 0 => return iid,
                    Some(_) => {}
                    None => self.fids.resize(i + 1, 0),
                }
                Some(i)
            }
            _ => {
                if let Some(&iid) = self.labels.get(&label) {
                    return iid;
                }
                None
            }
        };
        self.named += 1;
        let iid = self.named;
        match slot {
            Some(i) => self.fids[i] = iid,
            None => {
                self.labels.insert(label, iid);
            }
        }
        let name = match label {
            Label::Fid(fid) => names.shown(fid),
            Label::Text(text) => text,
        };
        interned_entry(
            &mut self.pending_names,
            interned::EVENT_NAMES,
            iid,
            name.as_bytes(),
        );
        iid
    }

    /// Appends the debug annotation of `arg` to the event's.
    fn arg(&mut self, arg: Arg<'_>, names: &mut Names<'_>) {
        let (name_iid, field, value) = match arg {
            Arg::Text(name, text) => {
                let name_iid = self.arg_name_iid(name);
                proto::message(&mut self.annotations, event::DEBUG_ANNOTATIONS, |b| {
                    proto::uint(b, annotation::NAME_IID, name_iid);
                    proto::bytes(b, annotation::STRING_VALUE, text.as_bytes());
                });
                return;
            }
            Arg::Flag(name) => (self.arg_name_iid(name), annotation::BOOL_VALUE, 1),
            Arg::Count(name, n) => (self.arg_name_iid(name), annotation::UINT_VALUE, n),
            Arg::Caller(addr) => {
                let name_iid = self.arg_name_iid("caller");
                let value = self.caller_iid(addr, names);
                (name_iid, annotation::STRING_VALUE_IID, value)
            }
        };
        proto::message(&mut self.annotations, event::DEBUG_ANNOTATIONS, |b| {
            proto::uint(b, annotation::NAME_IID, name_iid);
            proto::uint(b, field, value);
        });
    }

    fn arg_name_iid(&mut self, name: &'static str) -> u64 {
        if let Some(&iid) = self.arg_names.get(name) {
            return iid;
        }
        let iid = self.arg_names.len() as u64 + 1;
        interned_entry(
            &mut self.pending_arg_names,
            interned::DEBUG_ANNOTATION_NAMES,
            iid,
            name.as_bytes(),
        );
        self.arg_names.insert(name, iid);
        iid
    }

    fn caller_iid(&mut self, addr: u64, names: &mut Names<'_>) -> u64 {
        if let Some(&iid) = self.callers.get(&addr) {
            return iid;
        }
        let iid = self.callers.len() as u64 + 1;
        interned_entry(
            &mut self.pending_strings,
            interned::DEBUG_ANNOTATION_STRING_VALUES,
            iid,
            names.address(addr).as_bytes(),
        );
        self.callers.insert(addr, iid);
        iid
    }
}

/// Appends an interned entry (`EventName`, `DebugAnnotationName`,
/// `InternedString`: `{ iid = 1, name/str = 2 }`) as field `field` of
/// `InternedData`.
fn interned_entry(buf: &mut Vec<u8>, field: u32, iid: u64, name: &[u8]) {
    proto::message(buf, field, |b| {
        proto::uint(b, interned::IID, iid);
        proto::bytes(b, interned::NAME, name);
    });
}
