//! Inputs on which a reader once failed, kept in `tests/fuzz-regressions/`,
//! each a data directory packed as the fuzz target `readers` (`fuzz/`)
//! reads it (`fntrace::readers::packed`): the target's findings
//! (`readers-*`) and the hostile tester's of issue 16 (`issue16-*`). Every
//! reader, run as a user runs it, bounded in time and memory, must end
//! cleanly on each (as `crates/sites/tests/robustness.rs` replays the site
//! discovery's findings).

mod common;

use std::fs;
use std::path::Path;

use common::readers::every_reader;
use common::Work;
use fntrace::readers::packed;

#[test]
fn fuzz_regressions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let mut inputs: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no input in {}", dir.display());
    let work = Work::new("fuzz-regressions");
    for input in inputs {
        let name = input.file_name().unwrap().to_str().unwrap().to_string();
        let data = work.path(&format!("{name}.data"));
        packed::unpack(&fs::read(&input).unwrap(), &data).unwrap();
        for run in every_reader(data.to_str().unwrap()) {
            assert!(!run.stderr().contains("panicked"), "{name}: {:?}", run.args);
        }
    }
}
