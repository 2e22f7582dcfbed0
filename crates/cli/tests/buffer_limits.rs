//! Buffer sizes the machine cannot map: `--buffer-size` and
//! `--flight-recorder` outside the limits are usage errors of `record`,
//! `live` and `attach` (one line naming the option and the limit, exit 2,
//! nothing run); the runtime given such a size in its environment, without
//! the CLI, says so in one line and lets the program run untraced, its
//! output and exit status unchanged.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_fails, fntrace_output, procs, Work};

/// A traced program that prints, calls traced functions and exits 3.
const PROGRAM: &str = "#include <stdio.h>\n\
int work(int x) { return x * 2 + 1; }\n\
int main(void) { int s = 0; for (int i = 0; i < 100000; i++) s += work(i);\n\
printf(\"sum %d\\n\", s); fprintf(stderr, \"to stderr\\n\"); return 3; }\n";

fn build(work: &Work) -> PathBuf {
    common::build_c(work, "three", PROGRAM, &["-O1", "-pg", "-mfentry"])
}

/// The runtime next to the `fntrace` under test (`procs::runtime` builds it).
fn runtime() -> PathBuf {
    procs::runtime();
    match std::env::var_os("FNTRACE_RUNTIME").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_BIN_EXE_fntrace"))
            .parent()
            .unwrap()
            .join("libfntrace_runtime.so"),
    }
}

#[test]
fn sizes_beyond_the_machine_are_usage_errors() {
    let work = Work::new("limits-cli");
    let data = work.path("x.data");
    let data = data.to_str().unwrap();
    for (command, option, size, what) in [
        (
            "record",
            "--buffer-size",
            "18446744073709551615",
            "16 EiB is more than a thread's buffer may take here",
        ),
        (
            "record",
            "--flight-recorder",
            "18446744073709551615",
            "(a quarter of the ",
        ),
        ("live", "--buffer-size", "1024G", "1 TiB is more than"),
        (
            "record",
            "--buffer-size",
            "4K",
            "4 KiB is less than the smallest buffer, 64 KiB",
        ),
        ("live", "--flight-recorder", "1000", "1000 bytes is less than"),
        (
            "attach",
            "--buffer-size",
            "18446744073709551615",
            "at most 32 GiB",
        ),
    ] {
        let args = match command {
            "attach" => vec!["attach", option, size, "-o", data, "1"],
            "live" => vec!["live", option, size, "--", "true"],
            _ => vec!["record", option, size, "-o", data, "--", "true"],
        };
        let out = fntrace_output(&args);
        assert_fails(&out, 2, &format!("'{option} <SIZE>': "));
        let said = procs::text(&out.stderr);
        assert!(said.contains(what), "'{what}' not in: {said}");
        assert!(!work.path("x.data").exists(), "{args:?} made the data directory");
    }
    // The limits themselves are accepted.
    let out = fntrace_output(&[
        "record",
        "--force",
        "--buffer-size",
        "64K",
        "-o",
        data,
        "--",
        "true",
    ]);
    assert!(out.status.success(), "{}", procs::text(&out.stderr));
}

/// `FNTRACE_BUFFER_SIZE` and `FNTRACE_FLIGHT` set by hand to sizes no
/// thread could map, or that overflow: one line from the runtime, the
/// program untraced and unchanged.
#[test]
fn hostile_environment_leaves_the_program_alone() {
    let work = Work::new("limits-runtime");
    let exe = build(&work);
    let runtime = runtime();
    let plain = Command::new(&exe).output().unwrap();
    assert_eq!(plain.status.code(), Some(3));
    for (variable, value, what) in [
        (
            "FNTRACE_BUFFER_SIZE",
            "18446744073709551615",
            "16 EiB is more than a thread's buffer may take here",
        ),
        ("FNTRACE_BUFFER_SIZE", "17179869184G", "bad size '17179869184G'"),
        ("FNTRACE_BUFFER_SIZE", "99999999999999999999", "bad size"),
        ("FNTRACE_FLIGHT", "18446744073709551615", "16 EiB is more than"),
        ("FNTRACE_FLIGHT", "16777216M", "16 TiB is more than"),
    ] {
        let data = work.path("env.data");
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir(&data).unwrap();
        let out = procs::run(
            Command::new(&exe)
                .env("LD_PRELOAD", &runtime)
                .env("FNTRACE_DATA", &data)
                .env(variable, value),
            std::time::Duration::from_secs(60),
        );
        let stderr = procs::text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{variable}={value}: {stderr}");
        assert_eq!(out.stdout, plain.stdout, "{variable}={value}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(
            lines.len(),
            2,
            "{variable}={value}: one line and the program's: {stderr}"
        );
        assert!(
            lines[0].starts_with(&format!("fntrace: cannot trace: {variable}={value}: "))
                && lines[0].contains(what)
                && lines[0].ends_with("; the program runs untraced"),
            "{variable}={value}: {stderr}"
        );
        assert_eq!(lines[1], "to stderr");
        assert!(
            std::fs::read_dir(&data).unwrap().next().is_none(),
            "{variable}={value}: something was recorded"
        );
    }
}
