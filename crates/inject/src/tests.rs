//! Injections into real processes built here with gcc (see `testkit`):
//! the calls work and leave the target running, and each refusal says why.

use std::process::Command;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::procfs::syscall_of;
use super::testkit::{assert_progress, state_of, wait_until, Scratch, Target, STATIC_C};
use super::{inject, InjectError};

#[test]
fn inject_into_a_thread_blocked_in_read() {
    let scratch = Scratch::new("read");
    let (program, library) = (scratch.target(), scratch.library());
    let mut target = Target::start(&program, &[]);
    let pid = target.pid();
    wait_until("the main thread blocks in read", || {
        syscall_of(pid, pid) == Some(0)
    });

    let out = scratch.0.join("probe-output");
    let arg = out.to_str().unwrap();
    let first = inject(pid, &library, "probe", arg).unwrap();
    println!("first injection: tid {} stopped for {:?}", first.tid, first.pause);
    assert_eq!(
        first.tid, pid,
        "the main thread, blocked in read, is the one to stop"
    );
    assert!(first.loaded);
    assert_eq!(first.result, 1000 + arg.len() as i64);
    assert!(first.pause > Duration::ZERO);
    let written = std::fs::read_to_string(&out).unwrap();
    assert_eq!(written, format!("constructed=1 calls=1 tid={pid}\n"));

    // The read the injection interrupted was restarted: it gets this line.
    assert_progress(&mut target, false);

    // Through a symlink: the same file, so already loaded; the constructor does not run again.
    let link = scratch.0.join("link-to-libinj.so");
    std::os::unix::fs::symlink(&library, &link).unwrap();
    wait_until("the main thread blocks in read again", || {
        syscall_of(pid, pid) == Some(0)
    });
    let second = inject(pid, &link, "probe", arg).unwrap();
    println!(
        "second injection: tid {} stopped for {:?}",
        second.tid, second.pause
    );
    assert!(!second.loaded);
    assert_eq!(second.result, first.result);
    let written = std::fs::read_to_string(&out).unwrap();
    assert_eq!(written, format!("constructed=1 calls=2 tid={}\n", second.tid));
    assert_progress(&mut target, false);
    assert_eq!(target.finish(), Some(0), "the target's read failed or it died");
}

#[test]
fn inject_into_a_thread_blocked_in_clock_nanosleep() {
    let scratch = Scratch::new("sleep");
    let (program, library) = (scratch.target(), scratch.library());
    let mut target = Target::start(&program, &["sleep"]);
    let pid = target.pid();
    wait_until("the main thread sleeps", || syscall_of(pid, pid) == Some(230));

    let out = scratch.0.join("probe-output");
    let arg = out.to_str().unwrap();
    for round in 0..3 {
        let injection = inject(pid, &library, "probe", arg).unwrap();
        println!(
            "sleep round {round}: tid {} stopped for {:?}",
            injection.tid, injection.pause
        );
        // The main thread, unless it was just awake (a busy machine): then a
        // worker in usleep, which checks its result too.
        assert!(
            std::path::Path::new(&format!("/proc/{pid}/task/{}", injection.tid)).exists(),
            "{} is not a thread of the target",
            injection.tid
        );
        assert_eq!(injection.loaded, round == 0);
        assert_eq!(injection.result, 1000 + arg.len() as i64);
        let written = std::fs::read_to_string(&out).unwrap();
        let expected = format!("constructed=1 calls={} tid={}\n", round + 1, injection.tid);
        assert_eq!(written, expected);
        // clock_nanosleep and usleep returned 0 after the restart, or the
        // target has exited with 3 or 4.
        assert_progress(&mut target, true);
        // Not in the restart_syscall (219) of the interrupted nap, which ranks lower.
        wait_until("the main thread sleeps again", || {
            syscall_of(pid, pid) == Some(230)
        });
    }
    assert_eq!(target.finish(), Some(0));
}

#[test]
fn inject_errors_in_the_target_leave_it_running() {
    let scratch = Scratch::new("errors");
    let (program, library) = (scratch.target(), scratch.library());
    let mut target = Target::start(&program, &[]);
    let pid = target.pid();

    // Refused before touching it.
    let error = inject(pid, &library, "no_such_function", "x").unwrap_err();
    assert!(matches!(error, InjectError::NoSymbol { .. }), "{error}");
    assert!(
        error
            .to_string()
            .ends_with("does not export a function named no_such_function"),
        "{error}"
    );

    // dlopen fails: a library whose dependency is gone; dlerror says why.
    let gone = scratch.gcc(
        "int gone(void) { return 1; }",
        "libgone.so",
        &["-shared", "-fPIC"],
    );
    let needs_c = "int gone(void); int needs(const char *a) { (void)a; return gone(); }";
    let link_gone = [format!("-L{}", scratch.0.display()), "-lgone".to_string()];
    let needs = scratch.gcc(
        needs_c,
        "libneeds.so",
        &["-shared", "-fPIC", &link_gone[0], &link_gone[1]],
    );
    std::fs::remove_file(&gone).unwrap();
    let error = inject(pid, &needs, "needs", "x").unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, InjectError::DlopenFailed { .. }), "{message}");
    assert!(
        message.starts_with(&format!("the target could not load {}: ", needs.display())),
        "{message}"
    );
    assert!(message.contains("libgone.so"), "{message}");
    assert_progress(&mut target, false);

    // A fault in the called function: registers restored, the program goes on.
    let error = inject(pid, &library, "crash", "x").unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(
            error,
            InjectError::Faulted {
                signal: "SIGSEGV",
                ..
            }
        ),
        "{message}"
    );
    assert!(
        message.starts_with("the injected call to crash faulted at 0x"),
        "{message}"
    );
    assert_progress(&mut target, false);
    let injection = inject(pid, &library, "probe", "/dev/null").unwrap();
    assert!(!injection.loaded, "crash's dlopen loaded it");
    assert_eq!(injection.result, 1000 + "/dev/null".len() as i64);
    assert_progress(&mut target, false);
    assert_eq!(target.finish(), Some(0));

    // The program exits in the middle of the call.
    let target = Target::start(&program, &[]);
    let error = inject(target.pid(), &library, "bye", "x").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("process {} exited during attach", target.pid())
    );
}

#[test]
fn inject_refuses_what_it_cannot_attach() {
    let scratch = Scratch::new("refuse");
    let (program, library) = (scratch.target(), scratch.library());

    let error = inject(i32::MAX, &library, "probe", "x").unwrap_err();
    assert_eq!(error.to_string(), format!("no process with PID {}", i32::MAX));
    let error = inject(0, &library, "probe", "x").unwrap_err();
    assert_eq!(error.to_string(), "no process with PID 0");
    let own = std::process::id() as i32;
    let error = inject(own, &library, "probe", "x").unwrap_err();
    assert_eq!(error.to_string(), format!("process {own} is fntrace itself"));

    // A zombie: a child that exited and was not waited for.
    let mut zombie = Command::new("true").spawn().unwrap();
    let zpid = zombie.id() as i32;
    wait_until("the child is a zombie", || state_of(zpid) == Some('Z'));
    let error = inject(zpid, &library, "probe", "x").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("process {zpid} is a zombie (it has exited)")
    );
    zombie.wait().unwrap();

    // A stopped process is refused, and goes on once continued.
    let mut target = Target::start(&program, &[]);
    let pid = target.pid();
    kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    wait_until("the target is stopped", || state_of(pid) == Some('T'));
    let error = inject(pid, &library, "probe", "x").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("process {pid} is stopped (continue it first)")
    );
    kill(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    assert_progress(&mut target, false);

    // A thread ID is not a process ID.
    let tid = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.parse::<i32>().ok())
        .find(|&tid| tid != pid)
        .unwrap();
    let error = inject(tid, &library, "probe", "x").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{tid} is a thread of process {pid}; give the process ID")
    );

    // Not a library.
    let error = inject(pid, &program, "main", "x").unwrap_err();
    assert!(
        matches!(error, InjectError::NoSymbol { .. } | InjectError::Library { .. }),
        "{error}"
    );
    let error = inject(pid, &scratch.0.join("missing.so"), "probe", "x").unwrap_err();
    assert!(error.to_string().starts_with("cannot use "), "{error}");
    assert_eq!(target.finish(), Some(0));
}

#[test]
fn inject_refuses_a_static_program() {
    let scratch = Scratch::new("static");
    let library = scratch.library();
    let program = scratch.gcc(STATIC_C, "static", &["-static", "-O1"]);
    let mut target = Target::start(&program, &[]);
    let pid = target.pid();
    let error = inject(pid, &library, "probe", "x").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("process {pid} has no dynamic loader (statically linked?)")
    );
    target.send("still here");
    assert_eq!(target.line(), "static still here");
    assert_eq!(target.finish(), Some(0));
}

#[test]
fn inject_names_foreign_machines() {
    let header = |class: u8, machine: u16| {
        let mut h = [0u8; 20];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = 1;
        h[18..].copy_from_slice(&machine.to_le_bytes());
        h
    };
    assert_eq!(super::procfs::machine(&header(2, 62)), None);
    assert_eq!(
        super::procfs::machine(&header(1, 3)).as_deref(),
        Some("32-bit x86")
    );
    assert_eq!(
        super::procfs::machine(&header(2, 183)).as_deref(),
        Some("AArch64")
    );
    assert_eq!(super::procfs::machine(&[b'#'; 20]).as_deref(), Some("non-ELF"));
    let error = InjectError::Machine {
        pid: 7,
        machine: "AArch64".into(),
    };
    assert_eq!(
        error.to_string(),
        "process 7 runs a AArch64 program; fntrace attach works on x86-64 processes"
    );
}

#[test]
fn inject_parses_maps_lines() {
    let line = "7f0e1c200000-7f0e1c228000 r--p 00001000 fe:01 1835   /usr/lib/x86_64-linux-gnu/libc.so.6";
    let mapping = super::procfs::parse_map_line(line).unwrap();
    assert_eq!(mapping.start, 0x7f0e_1c20_0000);
    assert_eq!(mapping.offset, 0x1000);
    assert_eq!(
        mapping.id,
        super::procfs::FileId {
            major: 0xfe,
            minor: 1,
            inode: 1835
        }
    );
    assert_eq!(mapping.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    assert!(!mapping.exec);
    assert_eq!(
        super::procfs::parse_map_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0    [stack]"),
        None
    );
    let spaced = "1000-2000 r-xp 00000000 08:02 99 /tmp/a b (deleted)";
    assert!(super::procfs::parse_map_line(spaced).unwrap().exec);
    assert_eq!(
        super::procfs::parse_map_line(spaced).unwrap().path,
        "/tmp/a b (deleted)"
    );
}
