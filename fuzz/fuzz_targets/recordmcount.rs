//! recordmcount on arbitrary bytes; when it adds `__mcount_loc`, the result
//! must read back with the same sites, now from the table; when it
//! regroups `__patchable_function_entries`, with the same entries.
#![no_main]

use fntrace_sites::recordmcount::{record, Mcount, Outcome};
use fntrace_sites::Source;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Outcome {
        output: Some(output),
        mcount,
        ..
    }) = record(data)
    {
        let before = fntrace_sites::discover(data).expect("recordmcount read it");
        let back = fntrace_sites::discover(&output).expect("rewritten object reads back");
        let from = |b: &fntrace_sites::Binary, source| -> Vec<(usize, u64)> {
            b.sites
                .iter()
                .filter(|s| s.source == source)
                .map(|s| (s.section, s.address))
                .collect()
        };
        if let Mcount::Recorded { sites, .. } = mcount {
            assert_eq!(from(&back, Source::McountLoc).len(), sites);
        }
        assert_eq!(
            from(&back, Source::PatchableFunctionEntries),
            from(&before, Source::PatchableFunctionEntries)
        );
    }
});
