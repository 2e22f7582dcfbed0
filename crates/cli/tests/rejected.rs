//! Table entries are checked against the bytes they point at: wrong ones
//! are reported with the reason and the bytes found, never trusted; the
//! right ones in the same tables are kept.

mod common;

use common::{build_program, fntrace_output, Work};

#[test]
fn lying_tables() {
    let work = Work::new("rejected-lying");
    let exe = build_program(
        &work,
        "prog",
        "gcc",
        &["c/bad_tables.s", "c/bad_tables_main.c"],
        &["-O2"],
    );
    let out = fntrace_output(&["list", "--sites", exe.to_str().unwrap()]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);

    // Kept: the fentry call in good(), the five NOPs of padded().
    let kept: Vec<&str> = stdout.lines().collect();
    assert_eq!(kept.len(), 2, "{stdout}");
    assert!(
        kept[0].contains(" fentry ") && kept[0].contains(" good+0x0 "),
        "{stdout}"
    );
    assert!(
        kept[1].contains(" patchable ") && kept[1].contains("[90 90 90 90 90]"),
        "{stdout}"
    );

    // Rejected, each with its reason.
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 6, "{stderr}");
    assert!(
        warnings.iter().all(|w| w.starts_with("fntrace: warning: ")),
        "{stderr}"
    );
    for reason in [
        "a call to puts@plt, not __fentry__ or mcount",
        "expected a call to __fentry__ or mcount or a 5-byte NOP, found b8 01 00 00 00 c3",
        "points outside executable code",
        "expected NOPs, found 31 c0 c3",
        "overlaps the site at",
    ] {
        assert!(stderr.contains(reason), "'{reason}' not in:\n{stderr}");
    }

    // The JSON listing holds only the kept sites as well.
    let out = fntrace_output(&["list", "--json", exe.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["good", "padded"]);
}
