//! Synthetic data directories for the readers' tests (`replay`, `report`,
//! `graph`, `info`), written with fntrace-format's own encoders. Times are
//! exact by construction: every process uses the `monotonic` clock, so a
//! tick is a nanosecond, and processes start at monotonic time [`T0`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fntrace_format::layout;
use fntrace_format::meta::{Clock, FunctionEntry, ModuleInfo, ProcessInfo, ProfileRow, RunInfo, VERSION};
use fntrace_format::write::ChunkBuilder;

use super::Work;

/// The monotonic time (ns) at which every synthetic process starts.
pub const T0: u64 = 5_000_000_000;
/// The Unix time (ns) of the synthetic run: 2024-03-01T12:34:56.789Z.
pub const UNIX0: u64 = 1_709_296_496_789_000_000;
/// The address of function 0; each function is 0x100 bytes after the last.
pub const BASE: u64 = 0x40_1000;

/// A data directory being written.
pub struct DataDir {
    pub dir: PathBuf,
}

impl DataDir {
    /// An empty directory `name` in the test's work directory.
    pub fn new(work: &Work, name: &str) -> DataDir {
        let dir = work.path(name);
        std::fs::create_dir_all(&dir).unwrap();
        DataDir { dir }
    }

    pub fn path(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    /// Writes `info.json` for a run of `command` that exited with `exit`
    /// after `duration_ns`.
    pub fn info(&self, command: &[&str], tracer: &str, exit: i32, duration_ns: u64) {
        let info = RunInfo {
            version: VERSION,
            command: command.iter().map(|s| s.to_string()).collect(),
            cwd: "/work".into(),
            tracer: tracer.into(),
            options: serde_json::json!({ "filter": [], "depth": 4, "force": false }),
            start_unix_ns: UNIX0,
            end_unix_ns: Some(UNIX0 + duration_ns),
            exit_status: Some(exit),
            signal: None,
            attach: None,
        };
        std::fs::write(self.dir.join(layout::INFO), info.to_json()).unwrap();
    }

    /// Writes process directory `p<pid>` with `process.json` and a
    /// `functions.tsv` of `functions` (fid = index); returns its path.
    pub fn process(&self, pid: u32, argv: &[&str], tracer: &str, functions: &[&str]) -> PathBuf {
        let dir = self.dir.join(layout::process_dir(pid, 0));
        std::fs::create_dir_all(&dir).unwrap();
        let info = ProcessInfo {
            version: VERSION,
            pid,
            ppid: 1,
            parent: None,
            exe: "/work/prog".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            tracer: tracer.into(),
            start_unix_ns: UNIX0,
            clock: Clock::monotonic(T0),
            sites: functions.len() as u64 + 2,
            patched: functions.len() as u64,
            instrumentation: BTreeMap::from([("fentry".to_string(), functions.len() as u64)]),
            modules: vec![ModuleInfo {
                path: "/work/prog".into(),
                bias: 0,
                sites: functions.len() as u64 + 2,
            }],
            lost: 0,
            untraced: 0,
            unpatched: 0,
            trap_sites: 0,
            ended: true,
            write_error: None,
        };
        std::fs::write(dir.join(layout::PROCESS), info.to_json()).unwrap();
        let table: String = functions
            .iter()
            .enumerate()
            .map(|(fid, name)| {
                FunctionEntry {
                    fid: fid as u32,
                    module: "/work/prog".into(),
                    address: address(fid as u32),
                    size: 0x100,
                    name: name.to_string(),
                }
                .to_line()
            })
            .collect();
        std::fs::write(dir.join(layout::FUNCTIONS), table).unwrap();
        dir
    }

    /// Rewrites `process.json` of `p<pid>` through `edit`.
    pub fn edit_process(&self, pid: u32, edit: impl FnOnce(&mut ProcessInfo)) {
        let path = self.dir.join(layout::process_dir(pid, 0)).join(layout::PROCESS);
        let mut info = ProcessInfo::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut info);
        std::fs::write(path, info.to_json()).unwrap();
    }

    /// Writes thread file `t<tid>.events` of `p<pid>` from `chunks`;
    /// returns its path.
    pub fn thread(&self, pid: u32, tid: u32, chunks: &[&ChunkBuilder]) -> PathBuf {
        let path = self
            .dir
            .join(layout::process_dir(pid, 0))
            .join(layout::thread_file(tid));
        let bytes: Vec<u8> = chunks.iter().flat_map(|c| c.bytes()).collect();
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Writes `profile.tsv` of `p<pid>`.
    pub fn profile(&self, pid: u32, rows: &[ProfileRow]) {
        let mut text = format!("{}\n", ProfileRow::HEADER.trim_end());
        for row in rows {
            text.push_str(&row.to_line());
        }
        let path = self.dir.join(layout::process_dir(pid, 0)).join(layout::PROFILE);
        std::fs::write(path, text).unwrap();
    }
}

/// The address of function `fid`.
pub fn address(fid: u32) -> u64 {
    BASE + u64::from(fid) * 0x100
}

/// A chunk of thread `tid` starting at [`T0`].
pub fn chunk(tid: u32, seq: u32) -> ChunkBuilder {
    ChunkBuilder::new(tid, seq, T0)
}

/// Compares `actual` with the file `tests/expected/NAME`; with
/// `FNTRACE_BLESS=1` in the environment, writes it instead.
pub fn expect_file(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/expected")
        .join(name);
    if std::env::var_os("FNTRACE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (FNTRACE_BLESS=1 writes it)", path.display()));
    assert!(
        expected == actual,
        "output differs from {}:\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

/// The case: main loops over work, which calls leaf. While the
/// first leaf runs the buffer is full: leaf's and work's exits, the second
/// work and the third's entry with its leaf's are dropped (6 events). The
/// leaf and work exits read next are the third work's.
pub fn dropped_in_a_loop(work: &Work) -> DataDir {
    let d = DataDir::new(work, "lost.data");
    d.info(&["./prog"], "function_graph", 0, 20_000);
    d.process(1, &["./prog"], "function_graph", &["main", "work", "leaf"]);
    d.edit_process(1, |p| p.lost = 6);
    let mut first = ChunkBuilder::new(1, 0, T0);
    first.entry(0, T0).entry(1, T0 + 10).entry(2, T0 + 20);
    let mut second = ChunkBuilder::new(1, 1, T0 + 5000);
    second.set_lost(6);
    second
        .exit(2, T0 + 5010)
        .exit(1, T0 + 5020)
        .entry(1, T0 + 5100)
        .entry(2, T0 + 5110)
        .exit(2, T0 + 5120)
        .exit(1, T0 + 5150)
        .exit(0, T0 + 9000);
    d.thread(1, 1, &[&first, &second]);
    d
}

/// What every reader says [`dropped_in_a_loop`] lost.
pub const LOST_IN_A_LOOP: &str =
    "the trace is incomplete: 6 of 16 events lost (37.5%: the buffers were full; \
                    a larger --buffer-size avoids it)";
