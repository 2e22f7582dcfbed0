//! recordmcount on arbitrary bytes; when it rewrites an object, the result
//! must read back with the same sites, now from the table.
#![no_main]

use fntrace_sites::recordmcount::{record, Outcome};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Outcome::Recorded { output, sites, .. }) = record(data) {
        let back = fntrace_sites::discover(&output).expect("rewritten object reads back");
        let from_table = back.sites.iter().filter(|s| s.source == fntrace_sites::Source::McountLoc).count();
        assert_eq!(from_table, sites);
    }
});
