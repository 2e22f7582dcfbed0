//! Site discovery on arbitrary bytes: any result or error, never a panic,
//! a hang or an out-of-bounds access.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(binary) = fntrace_sites::discover(data) {
        // What discovery returns must hold together.
        for site in &binary.sites {
            assert!(!site.bytes.is_empty());
            if let Some(f) = site.function {
                assert!(f < binary.functions.len());
            }
        }
        for pair in binary.sites.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(a.section != b.section || a.address + a.bytes.len() as u64 <= b.address);
        }
    }
});
