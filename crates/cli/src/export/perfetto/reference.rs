//! For the tests: the event packets of a sequence built as Perfetto
//! messages (`perfetto_protos`), as the export did before they were encoded
//! by hand (`packets.rs`); the tests compare the two, packet by packet.

use std::collections::HashMap;

use perfetto_protos::clock_snapshot::{clock_snapshot::Clock, ClockSnapshot};
use perfetto_protos::debug_annotation::{DebugAnnotation, DebugAnnotationName};
use perfetto_protos::interned_data::InternedData;
use perfetto_protos::profile_common::InternedString;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::trace_packet_defaults::TracePacketDefaults;
use perfetto_protos::track_event::{track_event::Type, EventName, TrackEvent, TrackEventDefaults};
use protobuf::MessageField;

use super::packets::{Arg, Label, Out, INCREMENTAL, MONOTONIC};
use crate::trace::Names;

const CLEARED: u32 = SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32;
const NEEDS: u32 = SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32;

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

/// One packet sequence of track events on one track.
pub struct MessageSeq {
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

impl MessageSeq {
    /// Starts sequence `id` for events on track `track`, its clock at
    /// `start_ns`: the packet that clears the incremental state, sets the
    /// defaults (timestamps on the incremental clock, events on `track`)
    /// and ties the incremental clock to `CLOCK_MONOTONIC`.
    pub fn start(out: &mut Out<'_>, id: u32, track: u64, start_ns: u64) -> anyhow::Result<MessageSeq> {
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
        Ok(MessageSeq {
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
        args: &[Arg<'_>],
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

    fn arg(&mut self, arg: Arg<'_>, names: &mut Names<'_>) -> DebugAnnotation {
        let mut a = DebugAnnotation::new();
        match arg {
            Arg::Text(name, text) => {
                a.set_name_iid(self.arg_name_iid(name));
                a.set_string_value(text.to_string());
            }
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
