//! Synthetic traces converted and decoded (helpers in `decode.rs`).

use crate::trace::Demangle;
use fntrace_format::read;
use fntrace_format::write::ChunkBuilder;
use perfetto_protos::trace::Trace as PerfettoTrace;
use perfetto_protos::track_event::track_event::Type;
use protobuf::Message;

use super::decode::{decode, expected, slices, thread_uuid, Dir, FUNCTIONS, T0};
use super::packets::{Arg, Label, Out, Seq, DESCRIPTORS};
use super::reference::MessageSeq;
use super::write_perfetto;
use crate::trace::Names;

#[test]
fn tracks_slices_names_and_times() {
    let dir = Dir::new("slices");
    let mut c = ChunkBuilder::new(100, 0, T0);
    c.entry(0, T0 + 10)
        .entry(1, T0 + 20)
        .entry(1, T0 + 25)
        .exit(1, T0 + 30)
        .exit(1, T0 + 40)
        .entry(2, T0 + 50)
        .exit(2, T0 + 1_000_050)
        .exit(0, T0 + 2_000_000);
    // A delta too large for an event word: a TIME event comes first.
    let mut t = ChunkBuilder::new(101, 0, T0);
    t.entry(3, T0 + 7)
        .entry(1, T0 + (1 << 38))
        .exit(1, T0 + (1 << 38) + 3)
        .exit(3, T0 + (1 << 39));
    dir.process(100, "function_graph", &[(100, vec![c]), (101, vec![t])]);
    let mut other = ChunkBuilder::new(200, 0, T0);
    other.entry(0, T0 + 1).exit(0, T0 + 2);
    dir.process(200, "function_graph", &[(200, vec![other])]);

    let (bytes, stats) = dir.export();
    let d = decode(&bytes);
    assert!(
        d.primary_clock,
        "the first packet sets CLOCK_MONOTONIC as the trace clock"
    );
    assert_eq!(d.processes.len(), 2);
    assert_eq!(d.processes[&(1 << 32)], (100, "./prog 100".to_string()));
    assert_eq!(d.processes[&(2 << 32)], (200, "./prog 200".to_string()));
    assert_eq!(d.threads.len(), 3);
    assert_eq!(d.threads[&thread_uuid(0, 100)], (100, 100, "main".to_string()));
    assert_eq!(d.threads[&thread_uuid(0, 101)], (100, 101, "101".to_string()));
    assert_eq!(d.threads[&thread_uuid(1, 200)], (200, 200, "main".to_string()));

    for (index, pid, tid) in [(0, 100, 100), (0, 100, 101), (1, 200, 200)] {
        let (got, instants) = slices(&d.tracks[&thread_uuid(index, tid)]);
        assert_eq!(got, expected(&dir, pid, tid), "thread {tid}");
        assert!(instants.is_empty());
    }
    let (main, _) = slices(&d.tracks[&thread_uuid(0, 100)]);
    assert_eq!(main[0].name, "main");
    assert!(main
        .iter()
        .any(|s| s.name == "fib(int)" && s.start == T0 + 25 && s.end == T0 + 30));
    assert_eq!(stats.sequences, 3);
    assert_eq!((stats.slices, stats.events), (7, 14));
    assert!(stats.damage.is_empty());

    // The metadata of each process: an instant on its process track.
    let meta = &d.tracks[&(1 << 32)];
    assert_eq!(
        (meta.len(), meta[0].ns, meta[0].name.as_str()),
        (1, T0 + 7, "fntrace")
    );
    let args = &meta[0].args;
    assert_eq!(args["command"], "./prog 100");
    assert_eq!(args["clock_source"], "monotonic");
    assert_eq!(args["runtime_lost_events"], "3");
    assert_eq!(args["run_command"], "./prog 6");
    assert_eq!(args["exit_status"], "0");
    assert!(!d.tracks[&(2 << 32)][0].args.contains_key("run_command"));
}

#[test]
fn lost_unwound_unfinished_and_marks() {
    let dir = Dir::new("lost");
    let mut a = ChunkBuilder::new(7, 0, T0);
    a.entry(0, T0 + 10)
        .entry(1, T0 + 20)
        .entry(2, T0 + 30)
        .exit(1, T0 + 40) // closes count_primes as unwound, then fib
        .exit(3, T0 + 45) // never entered: nothing
        .entry(3, T0 + 50)
        .unwind(3, T0 + 60)
        .lost(5, T0 + 70)
        .mark(false, T0 + 80)
        .mark(true, T0 + 90)
        .entry(1, T0 + 100);
    // Header lost count, then a gap of sequence numbers.
    let mut b = ChunkBuilder::new(7, 1, T0 + 200);
    b.set_lost(9);
    b.entry(2, T0 + 210);
    let mut c = ChunkBuilder::new(7, 3, T0 + 300);
    c.exit(2, T0 + 310).entry(2, T0 + 320);
    dir.process(7, "function_graph", &[(7, vec![a, b, c])]);

    let (bytes, stats) = dir.export();
    let d = decode(&bytes);
    let (got, instants) = slices(&d.tracks[&thread_uuid(0, 7)]);
    assert_eq!(got, expected(&dir, 7, 7));
    let how = |name: &str, start: u64| {
        got.iter()
            .find(|s| s.name == name && s.start == start)
            .unwrap()
            .how
    };
    assert_eq!(how("count_primes", T0 + 30), "unwound");
    assert_eq!(how("fib(int)", T0 + 20), "returned");
    assert_eq!(how("apply", T0 + 50), "unwound");
    // Open when events were lost: their ends are unknown.
    assert_eq!(how("main", T0 + 10), "exit lost");
    assert_eq!(how("fib(int)", T0 + 100), "exit lost");
    assert_eq!(how("count_primes", T0 + 210), "exit lost");
    let last = got
        .iter()
        .find(|s| s.name == "count_primes" && s.start == T0 + 320)
        .unwrap();
    assert_eq!((last.end, last.how), (T0 + 320, "unfinished"));

    let instants: Vec<(u64, &str, String)> = instants
        .iter()
        .map(|(ns, name, args)| {
            let args: Vec<String> = args.iter().map(|(k, v)| format!("{k}={v}")).collect();
            (*ns, name.as_str(), args.join(","))
        })
        .collect();
    let expected = [
        (T0 + 70, "events lost", "count=5"),
        (T0 + 80, "trace_off", ""),
        (T0 + 90, "trace_on", ""),
        (T0 + 200, "events lost", "count=9"),
        (T0 + 300, "events lost", "chunks_missing=true,count=0"),
    ];
    assert_eq!(
        instants,
        expected.map(|(ns, name, args)| (ns, name, args.to_string()))
    );
    assert_eq!((stats.lost_events, stats.lost_chunks), (14, 1));
    assert_eq!((stats.unwound, stats.unfinished, stats.ignored_exits), (2, 1, 1));
    assert_eq!(stats.exit_lost, 3);
    assert_eq!(stats.instants, 5);
    let meta = &d.tracks[&(1 << 32)][0].args;
    assert_eq!(
        (meta["lost_events"].as_str(), meta["lost_chunks"].as_str()),
        ("14", "1")
    );
}

#[test]
fn function_tracer_entries_are_instants_with_callers() {
    let dir = Dir::new("function");
    let mut c = ChunkBuilder::new(3, 0, T0);
    c.entry_caller(1, T0 + 5, 0x1000 + 0x1f)
        .entry_caller(2, T0 + 9, 0x1100 + 0x20)
        .entry_caller(1, T0 + 12, 0x1000 + 0x1f)
        .entry_caller(3, T0 + 12, 0x9999_0000);
    dir.process(3, "function", &[(3, vec![c])]);
    let (bytes, stats) = dir.export();
    let d = decode(&bytes);
    let (got, instants) = slices(&d.tracks[&thread_uuid(0, 3)]);
    assert!(got.is_empty());
    let seen: Vec<(u64, &str, &str)> = instants
        .iter()
        .map(|(ns, name, args)| (*ns, name.as_str(), args["caller"].as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (T0 + 5, "fib(int)", "main+0x1f"),
            (T0 + 9, "count_primes", "fib(int)+0x20"),
            (T0 + 12, "fib(int)", "main+0x1f"),
            (T0 + 12, "apply", "0x99990000"),
        ]
    );
    assert_eq!((stats.instants, stats.slices), (4, 0));
}

#[test]
fn time_filter_calls_are_sorted_and_nested() {
    let dir = Dir::new("calls");
    let mut c = ChunkBuilder::new(4, 0, T0);
    // Post-order, as the runtime writes them: children first.
    c.call(1, T0 + 300, 100) // fib [200, 300]
        .call(2, T0 + 500, 150) // count_primes [350, 500]
        .call(3, T0 + 500, 150) // apply, same span, arrived later: the parent
        .call(0, T0 + 1000, 900) // main [100, 1000]
        .lost(2, T0 + 1100)
        .call(1, T0 + 1200, 0) // zero-length
        .call(1, T0 + 1300, 50); // fib [1250, 1300]
    dir.process(4, "function_graph", &[(4, vec![c])]);
    let (bytes, stats) = dir.export();
    let d = decode(&bytes);
    let events = &d.tracks[&thread_uuid(0, 4)];
    let (got, instants) = slices(events);
    assert_eq!(got, expected(&dir, 4, 4));
    let apply = got.iter().find(|s| s.name == "apply").unwrap();
    let primes = got.iter().find(|s| s.name == "count_primes").unwrap();
    assert_eq!((apply.depth, primes.depth), (1, 2));
    assert_eq!(instants.len(), 1);
    // The readers nest whole calls before the export sees them
    // (`narrow::nest`): they are slices of the thread's one sequence.
    let seqs: Vec<u32> = events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] == w[1]));
    assert_eq!((stats.sequences, stats.slices), (1, 6));
    // The process's metadata is at its earliest call's start.
    assert_eq!(d.tracks[&(1 << 32)][0].ns, T0 + 100);
}

#[test]
fn much_smaller_than_chrome_json() {
    let dir = Dir::new("size");
    let (mut chunks, mut json) = (Vec::new(), 0usize);
    let mut t = T0;
    let mut chunk = ChunkBuilder::new(9, 0, t);
    let mut push_json = |ph: &str, ns: u64, fid: u32| {
        let name = fntrace_filter::demangle::demangle(FUNCTIONS[fid as usize]);
        let ev =
            serde_json::json!({"ph": ph, "ts": (ns - T0) as f64 / 1000.0, "pid": 9, "tid": 9, "name": name});
        json += serde_json::to_string(&ev).unwrap().len() + 2;
    };
    for i in 0..20_000u64 {
        if i % 4096 == 4095 {
            chunks.push(std::mem::replace(
                &mut chunk,
                ChunkBuilder::new(9, chunks.len() as u32 + 1, t),
            ));
        }
        let (outer, inner) = ((i % 3) as u32 + 1, (i % 4) as u32);
        t += 40 + i % 300;
        chunk.entry(outer, t);
        push_json("B", t, outer);
        t += 25 + i % 700;
        chunk.entry(inner, t);
        push_json("B", t, inner);
        t += 1000 + i % 5000;
        chunk.exit(inner, t);
        push_json("E", t, inner);
        t += 30;
        chunk.exit(outer, t);
        push_json("E", t, outer);
    }
    chunks.push(chunk);
    dir.process(9, "function_graph", &[(9, chunks)]);
    let (bytes, stats) = dir.export();
    assert_eq!(stats.events, 80_000);
    let per_event = bytes.len() as f64 / stats.events as f64;
    eprintln!(
        "perfetto: {} bytes ({per_event:.1}/event), {} packets; chrome json (B/E, no cat): {json} bytes ({:.1}/event)",
        bytes.len(),
        stats.packets,
        json as f64 / stats.events as f64
    );
    assert!(
        bytes.len() * 3 < json,
        "{} bytes against {json} of JSON",
        bytes.len()
    );
    assert!(bytes.len() as u64 * 3 < 60 * stats.events);
    let d = decode(&bytes);
    let (got, _) = slices(&d.tracks[&thread_uuid(0, 9)]);
    assert_eq!(got, expected(&dir, 9, 9));

    // Streamed: written in bounded pieces as the events are read.
    let mut counting = Counting::default();
    let trace = read::open(&dir.0).unwrap();
    write_perfetto(&trace, &mut counting, Demangle::Full).unwrap();
    assert_eq!(counting.bytes, bytes.len());
    assert!(
        counting.writes > 10 && counting.largest < 128 * 1024,
        "{counting:?}"
    );
}

/// A writer that counts what it is given.
#[derive(Debug, Default)]
struct Counting {
    bytes: usize,
    writes: usize,
    largest: usize,
}

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes += buf.len();
        self.writes += 1;
        self.largest = self.largest.max(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn empty_trace_is_a_valid_trace() {
    let dir = Dir::new("empty");
    dir.process(5, "function_graph", &[(5, vec![])]);
    let (bytes, stats) = dir.export();
    assert_eq!((stats.events, stats.sequences, stats.slices), (0, 0, 0));
    let d = decode(&bytes);
    assert_eq!(d.threads.len(), 1);
    assert_eq!(d.tracks[&(1 << 32)][0].ns, T0);
    // Clock, process, thread, metadata: all on the descriptors' sequence.
    let packets = PerfettoTrace::parse_from_bytes(&bytes).unwrap().packet;
    assert_eq!(packets.len(), 4);
    assert!(packets
        .iter()
        .all(|p| p.trusted_packet_sequence_id() == DESCRIPTORS));
}

/// An event of a sequence: time, type, name, arguments.
type Script = Vec<(u64, Type, Option<Label>, Vec<Arg<'static>>)>;

/// Pseudo-random events exercising the encodings: multi-byte deltas,
/// times going back (raised), iids past 127, names past 127 bytes,
/// unknown and damaged fids, fixed names, every kind of argument.
fn script(n: usize) -> Script {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut ns = T0;
    let mut events = Vec::new();
    for _ in 0..n {
        let r = next();
        ns = match r % 8 {
            0 => ns.saturating_sub(r >> 50),
            1 => ns + (1 << 40),
            2 => ns,
            _ => ns + (r >> 40) % 100_000,
        };
        let ty = [Type::TYPE_SLICE_BEGIN, Type::TYPE_SLICE_END, Type::TYPE_INSTANT][(r >> 8) as usize % 3];
        let texts = ["events lost", "trace_on", "trace_off"];
        let label = match (r >> 12) % 8 {
            0 => None,
            1 => Some(Label::Text(texts[(r >> 16) as usize % 3])),
            2 => Some(Label::Fid(u32::MAX - (r >> 16) as u32 % 4)),
            _ => Some(Label::Fid((r >> 16) as u32 % 320)),
        };
        let caller = Arg::Caller(0x1000 + (r >> 32) % (310 * 0x100));
        let args = match (r >> 24) % 8 {
            0 => vec![Arg::Flag("unwound")],
            1 => vec![Arg::Flag("unfinished")],
            2 => vec![Arg::Count("count", r), Arg::Flag("chunks_missing")],
            3 => vec![caller],
            4 => vec![Arg::Caller(r >> 8)],
            5 => vec![caller, Arg::Count("count", u64::MAX), Arg::Flag("unwound")],
            6 => vec![
                Arg::Text("arg1", "\"abc\""),
                Arg::Text("arg2", "-7"),
                Arg::Text("retval", ""),
            ],
            _ => vec![],
        };
        events.push((ns, ty, label, args));
    }
    events
}

/// The hand-encoded event packets are the ones `perfetto_protos` builds:
/// the same packets once decoded (unknown fields included, so a wrong field
/// number fails), and the same bytes (rust-protobuf writes fields in the
/// order of the `.proto` declarations, which the encoder follows).
#[test]
fn hand_encoded_packets_match_message_built_ones() {
    let dir = Dir::new("encoding");
    let long = format!("very_long_{}", "x".repeat(200));
    let mut functions: Vec<String> = (0..300).map(|i| format!("function_{i}")).collect();
    functions[7] = long.clone();
    functions[1] = "_Z3fibi".to_string();
    let functions: Vec<&str> = functions.iter().map(String::as_str).collect();
    dir.process_with(11, "function_graph", &functions, &[]);
    let trace = read::open(&dir.0).unwrap();
    let functions = &trace.processes[0].functions;
    let script = script(20_000);
    let (id, track, start) = (300, (1 << 32) | 0xffff_ffff, T0 + 5);

    let encode = |hand: bool| -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut out = Out::new(&mut bytes);
        let mut names = Names::new(functions, Demangle::Full);
        if hand {
            let mut seq = Seq::start(&mut out, id, track, start).unwrap();
            for (ns, ty, label, args) in &script {
                seq.event(&mut out, &mut names, *ns, *ty, *label, args).unwrap();
            }
        } else {
            let mut seq = MessageSeq::start(&mut out, id, track, start).unwrap();
            for (ns, ty, label, args) in &script {
                seq.event(&mut out, &mut names, *ns, *ty, *label, args).unwrap();
            }
        }
        out.finish().unwrap();
        assert_eq!(out.packets, script.len() as u64 + 1);
        bytes
    };
    let (hand, messages) = (encode(true), encode(false));
    let decoded = |bytes: &[u8]| PerfettoTrace::parse_from_bytes(bytes).unwrap().packet;
    let (got, want) = (decoded(&hand), decoded(&messages));
    assert_eq!(got.len(), script.len() + 1);
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(got, want, "packet {i}");
    }
    assert!(hand == messages, "same packets, different bytes");

    // What the script was meant to exercise.
    let events = &want[1..];
    let interned: Vec<_> = events.iter().filter_map(|p| p.interned_data.as_ref()).collect();
    assert!(interned
        .iter()
        .flat_map(|d| &d.event_names)
        .any(|e| e.name() == long && e.iid() > 1));
    assert!(interned
        .iter()
        .flat_map(|d| &d.event_names)
        .any(|e| e.name() == "fib(int)"));
    assert!(interned
        .iter()
        .flat_map(|d| &d.event_names)
        .any(|e| e.iid() > 300));
    assert!(
        interned
            .iter()
            .flat_map(|d| &d.debug_annotation_string_values)
            .count()
            > 300
    );
    assert!(events.iter().any(|p| p.timestamp() == 0));
    assert!(events.iter().any(|p| p.timestamp() >= 1 << 40));
    assert!(events
        .iter()
        .any(|p| p.track_event().debug_annotations.len() == 3));
    assert!(events.iter().all(|p| p.trusted_packet_sequence_id() == id));
}
