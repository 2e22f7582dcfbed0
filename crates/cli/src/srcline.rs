//! `record --srcline`: each function's source file and line, from the
//! DWARF of its module (or of the module's separate debug file), kept in
//! its process directory (`srclines.tsv`) when the command ends, so the
//! readers show them after the binaries are gone or rebuilt (uftrace's
//! `record --srcline`).

use std::collections::HashMap;
use std::path::Path;

use fntrace_format::layout;
use fntrace_format::read;
use fntrace_sites::srclines::{srclines, SrcLine};

/// Writes `srclines.tsv` in each process directory of the data directory
/// `dir`; what it cannot do is a warning (the recording stands).
pub fn keep(dir: &Path) {
    let trace = match read::open(dir) {
        Ok(trace) => trace,
        Err(e) => {
            eprintln!("fntrace: warning: --srcline: {e}");
            return;
        }
    };
    // Each module read once, whatever the processes that load it.
    let mut tables: HashMap<String, Vec<SrcLine>> = HashMap::new();
    let (mut placed, mut functions) = (0usize, 0usize);
    for process in &trace.processes {
        let biases: HashMap<&str, u64> = process
            .info
            .modules
            .iter()
            .map(|m| (m.path.as_str(), m.bias))
            .collect();
        let mut text = String::new();
        for f in process.functions.iter() {
            functions += 1;
            let table = tables
                .entry(f.module.clone())
                .or_insert_with(|| of_module(&f.module));
            let address = f
                .address
                .wrapping_sub(biases.get(f.module.as_str()).copied().unwrap_or(0));
            if let Ok(i) = table.binary_search_by_key(&address, |s| s.address) {
                let s = &table[i];
                text.push_str(&format!(
                    "{}\t{}:{}\n",
                    f.fid,
                    s.file.replace(['\t', '\n'], " "),
                    s.line
                ));
                placed += 1;
            }
        }
        if text.is_empty() {
            continue;
        }
        if let Err(e) = std::fs::write(process.dir.join(layout::SRCLINES), text) {
            eprintln!("fntrace: warning: --srcline: {}: {e}", process.dir.display());
        }
    }
    if functions > 0 && placed == 0 {
        eprintln!("fntrace: warning: --srcline: no function has a source line (built without -g?)");
    }
}

/// The source lines of the functions of the module at `path`, from its
/// own DWARF or its separate debug file's; none if neither has any.
fn of_module(path: &str) -> Vec<SrcLine> {
    let Ok(data) = std::fs::read(path) else {
        return Vec::new();
    };
    match srclines(&data) {
        Ok(lines) if !lines.is_empty() => lines,
        _ => fntrace_sites::debugfile::find(Path::new(path), &data)
            .and_then(|debug| srclines(&debug).ok())
            .unwrap_or_default(),
    }
}
