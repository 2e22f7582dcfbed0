//! The layers of the runtime (`docs/ARCHITECTURE.md`, "The runtime's
//! layers") as the code has them: no engine file uses the tracers' module.
//! Attach control (`attach.rs`) and the library's set-up (`lib.rs`) sit
//! above both and may.

use std::path::Path;

/// Files above the engine: they may start and stop the tracer.
const ABOVE: [&str; 2] = ["attach.rs", "lib.rs"];

/// Whether `line` of Rust code (not a comment) names the tracer module.
fn names_tracer(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or_default();
    code.contains("tracer::") || code.contains("mod tracer")
}

fn engine_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src readable") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tracer") {
                engine_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && !ABOVE.iter().any(|a| path.file_name().is_some_and(|n| n == *a))
        {
            out.push(path);
        }
    }
}

#[test]
fn the_engine_names_no_tracer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    engine_files(&src, &mut files);
    assert!(files.len() > 20, "the engine's files were found: {files:?}");
    let mut offending = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable");
        for (n, line) in text.lines().enumerate() {
            if names_tracer(line) {
                offending.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offending.is_empty(),
        "engine files that use the tracer:\n{}",
        offending.join("\n")
    );
}
