//! What the injection tests run: programs built here with gcc (a
//! multi-threaded target that answers on a pipe, a library that records its
//! calls, a static program) and the helpers that drive them.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// The target: three workers count loops of work and 1 ms `usleep`s (a
/// failed one exits 4). In `read`
/// mode the main thread blocks in `read` on stdin and answers each line with
/// the line and the counters; in `sleep` mode it sleeps in 50 ms
/// `clock_nanosleep`s (any failure exits 3) and a fourth thread answers,
/// with the number of naps too. EOF on stdin ends it with status 0, a
/// failed `read` with 1.
pub(super) const TARGET_C: &str = r#"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong counters[3], naps;

static void *worker(void *arg) {
    volatile double x = 1.0;
    for (;;) {
        for (int k = 0; k < 1000; k++) x = x * 1.000001 + 1e-9;
        atomic_fetch_add(&counters[(long)arg], 1);
        if (usleep(1000) != 0) {
            perror("usleep");
            exit(4);
        }
    }
    return NULL;
}

static void *answer(void *arg) {
    char line[256];
    for (;;) {
        ssize_t n = read(0, line, sizeof line - 1);
        if (n <= 0) exit(n < 0);
        line[n] = 0;
        line[strcspn(line, "\n")] = 0;
        printf("%s %lu %lu %lu %lu\n", line, counters[0], counters[1], counters[2], naps);
        fflush(stdout);
    }
    return arg;
}

int main(int argc, char **argv) {
    pthread_t thread;
    for (long i = 0; i < 3; i++) pthread_create(&thread, NULL, worker, (void *)i);
    printf("ready\n");
    fflush(stdout);
    if (argc < 2 || strcmp(argv[1], "sleep") != 0) return answer(NULL) != NULL;
    pthread_create(&thread, NULL, answer, NULL);
    for (;;) {
        struct timespec nap = {0, 50 * 1000 * 1000};
        int error = clock_nanosleep(CLOCK_MONOTONIC, 0, &nap, NULL);
        if (error) {
            fprintf(stderr, "clock_nanosleep: %d\n", error);
            exit(3);
        }
        atomic_fetch_add(&naps, 1);
    }
}
"#;

/// The library: `probe` writes what it knows into the file its argument
/// names and returns 1000 + the argument's length; `crash` faults; `bye` exits.
pub(super) const LIBRARY_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int constructed, calls;

__attribute__((constructor)) static void init(void) { constructed++; }

int probe(const char *path) {
    calls++;
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "constructed=%d calls=%d tid=%ld\n", constructed, calls, (long)syscall(SYS_gettid));
    fclose(f);
    return 1000 + (int)strlen(path);
}

int crash(const char *arg) { *(volatile const char **)16 = arg; return 0; }

int bye(const char *arg) { (void)arg; _exit(7); }
"#;

/// Echoes lines on stdin, statically linked.
pub(super) const STATIC_C: &str = r#"
#include <stdio.h>
#include <unistd.h>
int main(void) {
    char line[256];
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        ssize_t n = read(0, line, sizeof line - 1);
        if (n <= 0) return n < 0;
        line[n] = 0;
        printf("static %s", line);
        fflush(stdout);
    }
}
"#;

/// A directory of its own for one test, removed at the end.
pub(super) struct Scratch(pub(super) PathBuf);

impl Scratch {
    pub(super) fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("fntrace-inject-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// Compiles `source` into `output` (in this directory) with these gcc flags.
    pub(super) fn gcc(&self, source: &str, output: &str, flags: &[&str]) -> PathBuf {
        let c = self.0.join(format!("{output}.c"));
        std::fs::write(&c, source).unwrap();
        let out = self.0.join(output);
        // The flags after the source, for -l.
        let status = Command::new("gcc")
            .arg("-o")
            .arg(&out)
            .arg(&c)
            .args(flags)
            .status()
            .expect("gcc");
        assert!(status.success(), "gcc {flags:?} {output} failed");
        out
    }

    pub(super) fn target(&self) -> PathBuf {
        self.gcc(TARGET_C, "target", &["-O1", "-pthread"])
    }

    pub(super) fn library(&self) -> PathBuf {
        self.gcc(LIBRARY_C, "libinj.so", &["-shared", "-fPIC", "-O1"])
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running program whose stdin and stdout are ours; killed if still there at the end.
pub(super) struct Target {
    child: Child,
    pub(super) stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Target {
    pub(super) fn start(program: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut target = Self {
            stdin: child.stdin.take(),
            child,
            lines,
        };
        assert_eq!(target.line(), "ready");
        target
    }

    pub(super) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub(super) fn line(&mut self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(20))
            .expect("the target answers")
    }

    /// Sends a line and returns the answer, split in words.
    pub(super) fn ask(&mut self, request: &str) -> Vec<String> {
        self.send(request);
        self.line().split(' ').map(str::to_string).collect()
    }

    /// Writes a line in one `write` (one `read` in the target).
    pub(super) fn send(&mut self, line: &str) {
        self.stdin
            .as_mut()
            .unwrap()
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
    }

    /// The worker counters and naps of an answer to `ask`.
    pub(super) fn counters(&mut self, request: &str) -> [u64; 4] {
        let answer = self.ask(request);
        assert_eq!(answer[0], request);
        [1, 2, 3, 4].map(|i| answer[i].parse().unwrap())
    }

    /// Closes stdin and returns the exit status.
    pub(super) fn finish(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "the target does not exit on EOF");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `condition` holds (at most 20 s).
pub(super) fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The state letter of process `pid` (`R`, `S`, `T`, `Z`...).
pub(super) fn state_of(pid: i32) -> Option<char> {
    super::procfs::state(&format!("/proc/{pid}/stat"))
}

/// Checks that every worker and, in `sleep` mode, the main thread make progress.
pub(super) fn assert_progress(target: &mut Target, naps: bool) {
    let before = target.counters("before");
    std::thread::sleep(Duration::from_millis(300));
    let after = target.counters("after");
    let moving = if naps { 4 } else { 3 };
    for i in 0..moving {
        assert!(
            after[i] > before[i],
            "no progress in counter {i}: {before:?} then {after:?}"
        );
    }
}
