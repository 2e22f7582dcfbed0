//! Times `discover_file_with` on a file, with and without bare sites: the
//! numbers of `docs/SITES.md` ("Functions no compiler prepared", "Cost").
//!
//! `cargo run --release -p fntrace-sites --example discovery_time -- FILE [RUNS]`

use std::path::PathBuf;
use std::time::Instant;

use fntrace_sites::Options;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: discovery_time FILE [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(31).max(1);
    let data = match std::fs::read(&path) {
        Ok(data) => data,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            std::process::exit(1);
        }
    };
    for bare in [false, true] {
        let options = Options {
            bare,
            ..Options::default()
        };
        let mut ms = Vec::with_capacity(runs);
        let mut last = None;
        for _ in 0..runs {
            let start = Instant::now();
            let binary = fntrace_sites::discover_file_with(&path, &data, &options);
            ms.push(start.elapsed().as_secs_f64() * 1e3);
            last = Some(binary);
        }
        ms.sort_by(f64::total_cmp);
        let binary = match last {
            Some(Ok(binary)) => binary,
            Some(Err(e)) => {
                eprintln!("{}: {e}", path.display());
                std::process::exit(1);
            }
            None => unreachable!("at least one run"),
        };
        let count = |source| binary.sites.iter().filter(|s| s.source == source).count();
        println!(
            "bare: {bare:<5}  median {:.2} ms (min {:.2}, max {:.2}, {runs} runs)  {} sites \
             ({} symtab, {} debug-file, {} dynsym, {} eh_frame), {} unpatchable",
            ms[runs / 2],
            ms[0],
            ms[runs - 1],
            binary.sites.len(),
            count(fntrace_sites::Source::Symbol),
            count(fntrace_sites::Source::DebugFile),
            count(fntrace_sites::Source::DynSym),
            count(fntrace_sites::Source::EhFrame),
            binary.unpatchable.len(),
        );
    }
}
