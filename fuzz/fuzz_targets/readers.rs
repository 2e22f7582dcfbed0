//! Every reader of a data directory (`replay`, `report`, `graph`, `info`,
//! every `dump` format, `flamegraph`), in-process, on the data directory
//! packed in the input (`fntrace::readers::packed`). Any output or a
//! one-line error is fine; a panic, a hang, memory past the limit, or an
//! error of several lines is a failure.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fntrace::readers::{self, packed, READERS};
use libfuzzer_sys::fuzz_target;

/// The scratch data directory of this fuzzing process: in memory
/// (`/dev/shm`) where there is one, since a disk shared with other work
/// can stall a file removal for seconds, which libFuzzer reports as a
/// timeout.
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        base.join(format!("fntrace-fuzz-readers-{}/d", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch();
    packed::unpack(data, dir).expect("the scratch directory can be written");
    let dir_arg = dir.to_str().unwrap();
    for reader in READERS {
        let mut args = reader.to_vec();
        args.push(dir_arg);
        if let Err(e) = readers::run(&args, &mut std::io::sink()) {
            let message = format!("{e:#}");
            assert!(
                !message.contains('\n'),
                "{args:?}: an error of several lines: {message}"
            );
        }
    }
});
