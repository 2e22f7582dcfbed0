//! A synthetic data directory, written with the crate's encoders and read
//! back with `open`.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::{tsc3, TempDir};
use fntrace_format::chunk::FLAG_LAST;
use fntrace_format::layout::{self, FUNCTIONS, INFO, PROCESS, PROFILE};
use fntrace_format::{
    open, ChunkBuilder, Event, EventKind, FormatError, FunctionEntry, ModuleInfo, ProcessInfo, ProfileRow,
    RunInfo,
};

fn run_info() -> RunInfo {
    RunInfo {
        version: 1,
        command: vec!["./prog".into(), "arg".into()],
        cwd: "/abs".into(),
        tracer: "function_graph".into(),
        options: serde_json::json!({ "depth": 3 }),
        start_unix_ns: 5,
        end_unix_ns: Some(50),
        exit_status: Some(0),
        signal: None,
        attach: None,
    }
}

fn process_info(pid: u32, start_unix_ns: u64) -> ProcessInfo {
    ProcessInfo {
        version: 1,
        pid,
        ppid: 1,
        parent: None,
        exe: "/abs/prog".into(),
        argv: vec!["prog".into()],
        tracer: "function_graph".into(),
        start_unix_ns,
        clock: tsc3(),
        sites: 10,
        patched: 3,
        instrumentation: BTreeMap::from([("fentry".to_string(), 10)]),
        modules: vec![ModuleInfo {
            path: "/abs/prog".into(),
            bias: 0x5555_0000,
            sites: 10,
        }],
        lost: 0,
        untraced: 0,
        unpatched: 0,
        trap_sites: 0,
        ended: true,
        write_error: None,
    }
}

fn functions() -> Vec<FunctionEntry> {
    ["main", "work", "_ZN4prog6helperEv"]
        .iter()
        .enumerate()
        .map(|(i, name)| FunctionEntry {
            fid: i as u32,
            module: "/abs/prog".into(),
            address: 0x5555_1000 + 0x100 * i as u64,
            size: 0x80,
            name: name.to_string(),
        })
        .collect()
}

fn write_process(root: &Path, name: &str, info: &ProcessInfo) -> std::path::PathBuf {
    let dir = root.join(name);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(PROCESS), info.to_json()).unwrap();
    let table: String = functions().iter().map(FunctionEntry::to_line).collect();
    fs::write(dir.join(FUNCTIONS), table).unwrap();
    dir
}

/// Thread 100: main calls work twice; the first chunk ends inside the
/// second call. Thread 101: helper.
fn write_threads(dir: &Path) -> (Vec<Event>, Vec<Event>) {
    let mut c0 = ChunkBuilder::new(100, 0, 3000);
    c0.entry(0, 3003).entry(1, 3030).exit(1, 3300).entry(1, 3303);
    let mut c1 = ChunkBuilder::new(100, 1, 3600);
    c1.exit(1, 3603).exit(0, 3606).set_flags(FLAG_LAST);
    let mut file = c0.bytes();
    file.extend(c1.bytes());
    fs::write(dir.join(layout::thread_file(100)), file).unwrap();

    let mut c = ChunkBuilder::new(101, 0, 6000);
    c.entry_caller(2, 6300, 0x5555_1010).unwind(2, 9000);
    fs::write(dir.join(layout::thread_file(101)), c.bytes()).unwrap();

    let e = |ns, kind, fid| Event::new(ns, kind, fid);
    let t100 = vec![
        e(1001, EventKind::Entry, 0),
        e(1010, EventKind::Entry, 1),
        e(1100, EventKind::Exit, 1),
        e(1101, EventKind::Entry, 1),
        e(1201, EventKind::Exit, 1),
        e(1202, EventKind::Exit, 0),
    ];
    let t101 = vec![
        e(2100, EventKind::EntryCaller(0x5555_1010), 2),
        e(3000, EventKind::Unwind, 2),
    ];
    (t100, t101)
}

#[test]
fn write_then_read_a_data_directory() {
    let tmp = TempDir::new("dir");
    let root = tmp.path();
    fs::write(root.join(INFO), run_info().to_json()).unwrap();

    let main = write_process(root, "p100", &process_info(100, 20));
    let (t100, t101) = write_threads(&main);
    fs::write(main.join("t5.events.tmp"), b"junk").unwrap();
    let rows = [
        ProfileRow {
            fid: 0,
            calls: 1,
            total_ns: 201,
            self_ns: 1,
            min_ns: 201,
            max_ns: 201,
        },
        ProfileRow {
            fid: 1,
            calls: 2,
            total_ns: 190,
            self_ns: 190,
            min_ns: 90,
            max_ns: 100,
        },
    ];
    let profile: String = std::iter::once(format!("{}\n", ProfileRow::HEADER))
        .chain(rows.iter().map(ProfileRow::to_line))
        .chain(["1\t2\tx\n".to_string()])
        .collect();
    fs::write(main.join(PROFILE), profile).unwrap();

    write_process(root, "p100.1", &process_info(100, 30));
    write_process(root, "p99", &process_info(99, 20));
    write_process(root, "p7", &process_info(7, 10));
    let partial = write_process(root, "p8", &process_info(8, 40));
    fs::write(partial.join(FUNCTIONS), "0\tm\t0x10\t0x10\tmain\n1\tm\t0x2").unwrap();

    // Unreadable processes.
    let p = write_process(root, "p200", &process_info(200, 1));
    fs::remove_file(p.join(FUNCTIONS)).unwrap();
    let p = write_process(root, "p201", &process_info(201, 1));
    fs::write(p.join(PROCESS), "{ \"version\": 1, ").unwrap();
    let p = write_process(root, "p202", &process_info(202, 1));
    fs::write(
        p.join(PROCESS),
        ProcessInfo {
            version: 2,
            ..process_info(202, 1)
        }
        .to_json(),
    )
    .unwrap();
    let p = write_process(root, "p203", &process_info(203, 1));
    fs::write(p.join(FUNCTIONS), "0\tm\t0x10\t0x10\tmain\nnot a line\n").unwrap();
    // Not process directories.
    fs::create_dir_all(root.join("other")).unwrap();
    fs::create_dir_all(root.join("p01")).unwrap();
    fs::write(root.join("p300"), "a file").unwrap();

    let trace = open(root).unwrap();
    assert_eq!(trace.dir, root);
    assert_eq!(trace.info, Some(run_info()));
    let names: Vec<&str> = trace.processes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["p7", "p99", "p100", "p100.1", "p8"]);
    let mut damage = trace.damage.clone();
    damage.sort();
    assert_eq!(damage.len(), 6, "{damage:#?}");
    assert!(
        damage[0].starts_with("p100/profile.tsv: line 4: "),
        "{}",
        damage[0]
    );
    assert!(
        damage[1].starts_with("p200/functions.tsv: cannot read: "),
        "{}",
        damage[1]
    );
    assert!(
        damage[2].starts_with("p201/process.json: cannot parse: "),
        "{}",
        damage[2]
    );
    assert_eq!(
        damage[3],
        "p202/process.json: format version 2 is not supported (this reader reads 1); process skipped"
    );
    assert!(
        damage[4].starts_with("p203/functions.tsv: line 2: expected 5"),
        "{}",
        damage[4]
    );
    assert!(
        damage[5].starts_with("p8/functions.tsv: line 2: incomplete last line"),
        "{}",
        damage[5]
    );
    assert!(damage[..5]
        .iter()
        .skip(1)
        .all(|d| d.ends_with("; process skipped")));

    let p = trace.process("p100").unwrap();
    assert_eq!((p.info.pid, p.image, p.dir.clone()), (100, 0, main.clone()));
    assert_eq!(p.info, process_info(100, 20));
    assert_eq!(p.tids, [100, 101]);
    assert_eq!(p.profile.as_deref(), Some(&rows[..]));
    assert_eq!(p.functions.len(), 3);
    assert_eq!(p.functions.iter().cloned().collect::<Vec<_>>(), functions());
    assert_eq!(p.functions.name(2), "_ZN4prog6helperEv");
    assert_eq!(
        p.functions.by_address(0x5555_1105).map(|(f, off)| (f.fid, off)),
        Some((1, 5))
    );

    let mut events = p.events(100);
    assert_eq!(events.by_ref().collect::<Vec<_>>(), t100);
    assert_eq!(
        (events.damage(), events.saw_last(), events.lost()),
        (None, true, 0)
    );
    let mut events = p.events(101);
    assert_eq!(events.by_ref().collect::<Vec<_>>(), t101);
    assert_eq!((events.damage(), events.saw_last()), (None, false));
    let mut events = p.events(102);
    assert_eq!(events.next(), None);
    assert!(events
        .damage()
        .unwrap()
        .starts_with("p100/t102.events: cannot read: "));

    assert_eq!(trace.process("p100.1").unwrap().image, 1);
    assert_eq!(trace.process("p8").unwrap().functions.len(), 1);
    assert!(trace.process("p7").unwrap().profile.is_none());
}

#[test]
fn a_thread_file_of_another_thread_is_damage() {
    let tmp = TempDir::new("tid");
    let dir = write_process(tmp.path(), "p1", &process_info(1, 0));
    fs::write(
        dir.join("t2.events"),
        ChunkBuilder::new(3, 0, 3000).entry(0, 3003).bytes(),
    )
    .unwrap();
    let trace = open(tmp.path()).unwrap();
    assert_eq!(trace.info, None);
    let mut events = trace.processes[0].events(2);
    assert_eq!(events.next(), None);
    assert_eq!(
        events.damage(),
        Some("p1/t2.events: offset 0: chunk of thread 3 in the file of thread 2")
    );
}

#[test]
fn directory_errors() {
    let tmp = TempDir::new("errors");
    let root = tmp.path();
    let err = open(root).unwrap_err();
    assert!(matches!(err, FormatError::NotDataDir(_)));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: not a fntrace data directory (no info.json and no p*/ directory)",
            root.display()
        )
    );

    let missing = root.join("missing");
    let err = open(&missing).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("{}: cannot read: ", missing.display())),
        "{err}"
    );

    fs::write(
        root.join(INFO),
        RunInfo {
            version: 2,
            ..run_info()
        }
        .to_json(),
    )
    .unwrap();
    let err = open(root).unwrap_err();
    assert!(matches!(err, FormatError::Version { version: 2, .. }), "{err}");

    // An unparsable info.json alone is still a (damaged) data directory.
    fs::write(root.join(INFO), "{").unwrap();
    let trace = open(root).unwrap();
    assert!(trace.info.is_none() && trace.processes.is_empty());
    assert!(
        trace.damage[0].starts_with("info.json: cannot parse: "),
        "{:?}",
        trace.damage
    );

    // Only info.json: the command ran and nothing was traced.
    fs::write(root.join(INFO), run_info().to_json()).unwrap();
    let trace = open(root).unwrap();
    assert!(trace.processes.is_empty() && trace.damage.is_empty());
}
