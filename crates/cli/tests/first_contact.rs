//! What a newcomer meets first, as the README gives it (issue 17): its
//! first command builds the example without a warning and traces it; the
//! build it starts makes only what a user runs; its test command is the
//! one `.ci/run` runs.

mod common;

use std::path::Path;
use std::process::Command;

use common::procs::{run, runtime, text};
use common::Work;

/// The repository's root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
}

/// The README's two set-up commands: the lines of its first `sh` block.
fn readme_commands() -> (String, String) {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the README starts with a sh block");
    let mut lines = block.lines();
    let first = lines.next().expect("a first command").to_string();
    let second = lines.next().expect("a test command").to_string();
    (first, second)
}

/// The part of `command` (joined by `&&`) that starts with `word`.
fn step(command: &str, word: &str) -> String {
    command
        .split("&&")
        .map(str::trim)
        .find(|s| s.starts_with(word))
        .unwrap_or_else(|| panic!("no '{word}' step in: {command}"))
        .to_string()
}

#[test]
fn the_first_command_builds_the_example_quietly_and_traces_it() {
    runtime();
    let work = Work::new("first-contact");
    std::fs::create_dir_all(work.path("examples")).unwrap();
    std::fs::copy(root().join("examples/demo.c"), work.path("examples/demo.c")).unwrap();
    let (first, _) = readme_commands();

    let build = step(&first, "gcc ");
    let out = run(
        Command::new("sh").args(["-c", &build]).current_dir(&work.dir),
        std::time::Duration::from_secs(120),
    );
    assert!(out.status.success(), "{build}: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "{build} warns");

    // The same trace with the binary the tests built.
    let live = step(&first, "target/release/fntrace").replacen(
        "target/release/fntrace",
        env!("CARGO_BIN_EXE_fntrace"),
        1,
    );
    let out = run(
        Command::new("sh").args(["-c", &live]).current_dir(&work.dir),
        std::time::Duration::from_secs(120),
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{live}: {stderr}");
    // Standard output is a pipe here, not a terminal: it keeps the
    // program's output, and the trace follows on standard error after a
    // note that says so; nothing else is said.
    let (note, trace) = stderr.split_once('\n').unwrap_or((&stderr, ""));
    assert!(note.contains("the trace follows on standard error"), "{stderr}");
    assert!(!trace.contains("fntrace:"), "{live} warns: {stderr}");
    for function in ["main() {", "count_primes();", "fib() {"] {
        assert!(trace.contains(function), "{function} not in:\n{trace}");
    }
    assert!(
        !text(&out.stdout).contains("main() {"),
        "the trace went into the program's output"
    );
}

/// `cargo build` (the README's first step) builds the CLI and the runtime,
/// not the test-only crates: cargo's own view of the workspace.
#[test]
fn cargo_build_makes_what_users_run() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            meta["workspace_default_members"]
                .as_array()
                .unwrap()
                .contains(&p["id"])
        })
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.iter().any(|n| n == "fntrace"), "{names:?}");
    assert!(names.iter().any(|n| n == "fntrace-runtime"), "{names:?}");
    assert!(!names.iter().any(|n| n == "fntrace-emu"), "{names:?}");
}

/// The README's test command is what CI runs.
#[test]
fn ci_runs_the_readme_test_command() {
    let (_, second) = readme_commands();
    let command = second.split('#').next().unwrap().trim();
    assert!(command.starts_with("cargo test"), "{second}");
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == command),
        ".ci/run does not run '{command}'"
    );
}
