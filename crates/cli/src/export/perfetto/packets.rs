//! The packets of the Perfetto export, built with Perfetto's own message
//! types (`perfetto_protos`, generated from Perfetto's `.proto` files) and
//! written one at a time, each as one `Trace.packet` field (field 1: `0a`,
//! varint length, bytes; the tag as the library encodes it): a
//! concatenation of such fields is one `Trace`.
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
use perfetto_protos::debug_annotation::{DebugAnnotation, DebugAnnotationName};
use perfetto_protos::interned_data::InternedData;
use perfetto_protos::process_descriptor::ProcessDescriptor;
use perfetto_protos::profile_common::InternedString;
use perfetto_protos::thread_descriptor::ThreadDescriptor;
use perfetto_protos::trace::Trace;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::trace_packet_defaults::TracePacketDefaults;
use perfetto_protos::track_descriptor::TrackDescriptor;
use perfetto_protos::track_event::{track_event::Type, EventName, TrackEvent, TrackEventDefaults};
use protobuf::{Message, MessageField};

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
    /// The tag of `Trace.packet`.
    tag: Vec<u8>,
    buf: Vec<u8>,
    pub packets: u64,
    pub bytes: u64,
}

impl<'w> Out<'w> {
    pub fn new(w: &'w mut dyn Write) -> anyhow::Result<Out<'w>> {
        // A `Trace` of one empty packet is the packet's tag, then length 0.
        let mut probe = Trace::new();
        probe.packet.push(TracePacket::new());
        let mut tag = probe.write_to_bytes()?;
        anyhow::ensure!(tag.pop() == Some(0), "unexpected encoding of Trace.packet");
        Ok(Out {
            w,
            tag,
            buf: Vec::with_capacity(BUFFER + 1024),
            packets: 0,
            bytes: 0,
        })
    }

    /// Writes `packet` as one more `Trace.packet`.
    pub fn packet(&mut self, packet: &TracePacket) -> anyhow::Result<()> {
        let before = self.buf.len();
        self.buf.extend_from_slice(&self.tag);
        packet.write_length_delimited_to_vec(&mut self.buf)?;
        self.packets += 1;
        self.bytes += (self.buf.len() - before) as u64;
        if self.buf.len() >= BUFFER {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
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
pub enum Arg {
    /// `name: true`.
    Flag(&'static str),
    /// `name: n`.
    Count(&'static str, u64),
    /// `caller: "function+0xoff"`, from a return address.
    Caller(u64),
}

/// One packet sequence of track events on one track.
pub struct Seq {
    /// The event packet, reused: sequence id, flags and track event set
    /// once, the rest per event.
    packet: TracePacket,
    /// The time of the last packet (ns): the base of the next delta.
    now: u64,
    names: HashMap<Label, u64>,
    arg_names: HashMap<&'static str, u64>,
    callers: HashMap<u64, u64>,
    /// Interned entries not yet sent.
    pending: InternedData,
    dirty: bool,
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

        let mut packet = TracePacket::new();
        packet.set_trusted_packet_sequence_id(id);
        packet.set_sequence_flags(NEEDS);
        packet.set_track_event(TrackEvent::new());
        Ok(Seq {
            packet,
            now: start_ns,
            names: HashMap::new(),
            arg_names: HashMap::new(),
            callers: HashMap::new(),
            pending: InternedData::new(),
            dirty: false,
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
        args: &[Arg],
    ) -> anyhow::Result<()> {
        let ns = ns.max(self.now);
        let delta = ns - self.now;
        self.now = ns;
        let iid = label.map(|label| self.name_iid(label, names));
        let annotations: Vec<DebugAnnotation> = args.iter().map(|&arg| self.arg(arg, names)).collect();
        self.packet.set_timestamp(delta);
        self.packet.interned_data = match std::mem::take(&mut self.dirty) {
            true => MessageField::some(std::mem::take(&mut self.pending)),
            false => MessageField::none(),
        };
        let event = self.packet.mut_track_event();
        event.set_type(ty);
        match iid {
            Some(iid) => event.set_name_iid(iid),
            None => event.name_field = None,
        }
        event.debug_annotations = annotations;
        out.packet(&self.packet)
    }

    fn name_iid(&mut self, label: Label, names: &mut Names<'_>) -> u64 {
        if let Some(&iid) = self.names.get(&label) {
            return iid;
        }
        let iid = self.names.len() as u64 + 1;
        let mut entry = EventName::new();
        entry.set_iid(iid);
        entry.set_name(match label {
            Label::Fid(fid) => names.shown(fid).to_string(),
            Label::Text(text) => text.to_string(),
        });
        self.pending.event_names.push(entry);
        self.dirty = true;
        self.names.insert(label, iid);
        iid
    }

    fn arg(&mut self, arg: Arg, names: &mut Names<'_>) -> DebugAnnotation {
        let mut a = DebugAnnotation::new();
        match arg {
            Arg::Flag(name) => {
                a.set_name_iid(self.arg_name_iid(name));
                a.set_bool_value(true);
            }
            Arg::Count(name, n) => {
                a.set_name_iid(self.arg_name_iid(name));
                a.set_uint_value(n);
            }
            Arg::Caller(addr) => {
                a.set_name_iid(self.arg_name_iid("caller"));
                a.set_string_value_iid(self.caller_iid(addr, names));
            }
        }
        a
    }

    fn arg_name_iid(&mut self, name: &'static str) -> u64 {
        if let Some(&iid) = self.arg_names.get(name) {
            return iid;
        }
        let iid = self.arg_names.len() as u64 + 1;
        let mut entry = DebugAnnotationName::new();
        entry.set_iid(iid);
        entry.set_name(name.to_string());
        self.pending.debug_annotation_names.push(entry);
        self.dirty = true;
        self.arg_names.insert(name, iid);
        iid
    }

    fn caller_iid(&mut self, addr: u64, names: &mut Names<'_>) -> u64 {
        if let Some(&iid) = self.callers.get(&addr) {
            return iid;
        }
        let iid = self.callers.len() as u64 + 1;
        let mut entry = InternedString::new();
        entry.set_iid(iid);
        entry.set_str(names.address(addr).into_bytes());
        self.pending.debug_annotation_string_values.push(entry);
        self.dirty = true;
        self.callers.insert(addr, iid);
        iid
    }
}
