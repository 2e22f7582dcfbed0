#!/usr/bin/python3
"""Decodes a Perfetto protobuf trace (`fntrace dump --perfetto`) with
Perfetto's own protos, those of the PyPI package `perfetto`
(perfetto.protos.perfetto.trace.perfetto_trace_pb2), and prints what it
holds as JSON on stdout:

  {"packets": N,
   "processes": {uuid: {"pid", "name"}},      process TrackDescriptors
   "threads": {uuid: {"pid", "tid", "name"}}, thread TrackDescriptors
   "begins": {name: n}, "ends": {name: n},    TYPE_SLICE_BEGIN / _END
   "instants": {name: n},                     TYPE_INSTANT
   "slices_per_track": {uuid: n},             begins per track
   "errors": [...]}                           what does not add up

Event names are resolved as the trace processor resolves them: `name`, or
`name_iid` through the `InternedData.event_names` of the packet's
sequence (`trusted_packet_sequence_id`), which `SEQ_INCREMENTAL_STATE_CLEARED`
empties. The track of an event is its `track_uuid`, or the one of its
sequence's `TracePacketDefaults`. A slice end closes the innermost open
slice of its track and counts under that slice's name. Errors: an event on
an unknown track, an unknown name_iid, an end with no open slice, a
sequence using interned data before any SEQ_INCREMENTAL_STATE_CLEARED,
slices still open at the end. (Times are left to the trace processor: the
Perfetto UI test loads the same file.)

Usage: decode.py TRACE.pftrace
"""

import json
import sys
from collections import Counter, defaultdict


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
        TracePacket,
        Trace,
        TrackEvent,
    )

    with open(sys.argv[1], "rb") as f:
        trace = Trace()
        trace.ParseFromString(f.read())

    CLEARED = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    NEEDS = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE

    processes, threads = {}, {}
    begins, ends, instants = Counter(), Counter(), Counter()
    per_track = Counter()
    errors = []
    # Per sequence: interned event names, the default track, whether its
    # incremental state is valid.
    names = defaultdict(dict)
    default_track = {}
    valid = set()
    open_slices = defaultdict(list)  # track uuid -> [name]

    def error(msg):
        if len(errors) < 50:
            errors.append(msg)

    for i, packet in enumerate(trace.packet):
        seq = packet.trusted_packet_sequence_id
        if packet.sequence_flags & CLEARED:
            names[seq] = {}
            default_track.pop(seq, None)
            valid.add(seq)
        if packet.HasField("trace_packet_defaults"):
            d = packet.trace_packet_defaults
            if d.HasField("track_event_defaults") and d.track_event_defaults.HasField("track_uuid"):
                default_track[seq] = d.track_event_defaults.track_uuid
        if packet.HasField("interned_data"):
            for entry in packet.interned_data.event_names:
                names[seq][entry.iid] = entry.name
        if packet.HasField("track_descriptor"):
            td = packet.track_descriptor
            if td.HasField("thread"):
                threads[td.uuid] = {
                    "pid": td.thread.pid,
                    "tid": td.thread.tid,
                    "name": td.thread.thread_name,
                }
            elif td.HasField("process"):
                processes[td.uuid] = {
                    "pid": td.process.pid,
                    "name": td.process.process_name,
                }
        if not packet.HasField("track_event"):
            continue
        if packet.sequence_flags & NEEDS and seq not in valid:
            error(f"packet {i}: sequence {seq} needs incremental state it never cleared")
        ev = packet.track_event
        if ev.HasField("track_uuid"):
            track = ev.track_uuid
        else:
            track = default_track.get(seq)
        if track is None or (track not in threads and track not in processes):
            error(f"packet {i}: event on unknown track {track}")
            continue
        if ev.HasField("name_iid"):
            name = names[seq].get(ev.name_iid)
            if name is None:
                error(f"packet {i}: unknown name_iid {ev.name_iid} on sequence {seq}")
                name = f"<iid {ev.name_iid}>"
        else:
            name = ev.name
        if ev.type == TrackEvent.TYPE_SLICE_BEGIN:
            begins[name] += 1
            per_track[track] += 1
            open_slices[track].append(name)
        elif ev.type == TrackEvent.TYPE_SLICE_END:
            if not open_slices[track]:
                error(f"packet {i}: slice end with no open slice on track {track}")
                continue
            opened = open_slices[track].pop()
            if ev.HasField("name_iid") or ev.name:
                if name != opened:
                    error(f"packet {i}: end of {name!r} closes {opened!r}")
            ends[opened] += 1
        elif ev.type == TrackEvent.TYPE_INSTANT:
            instants[name] += 1
        else:
            error(f"packet {i}: event type {ev.type}")

    for track, stack in open_slices.items():
        if stack:
            error(f"track {track}: {len(stack)} slices never end: {stack[:5]}")

    json.dump(
        {
            "packets": len(trace.packet),
            "processes": {str(k): v for k, v in processes.items()},
            "threads": {str(k): v for k, v in threads.items()},
            "begins": dict(sorted(begins.items())),
            "ends": dict(sorted(ends.items())),
            "instants": dict(sorted(instants.items())),
            "slices_per_track": {str(k): v for k, v in sorted(per_track.items())},
            "errors": errors,
        },
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
