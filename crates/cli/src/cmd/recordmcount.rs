//! `fntrace recordmcount OBJECT.o...`: the build-time tool of seed `002_*`.
//! Adds a `__mcount_loc` table to each relocatable object, and regroups
//! gcc's `__patchable_function_entries`, in place.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use fntrace_sites::recordmcount::{self, Mcount, Patchable};

use crate::output::read_input;

const AFTER_HELP: &str = "\
For objects built with -pg [-mfentry] by a compiler that cannot write the
table itself (clang, or gcc without -mrecord-mcount). Each entry is a
relocation against the function symbol, and each code section gets its own
table piece linked to it (SHF_LINK_ORDER, same COMDAT group), so the table
stays exact under -ffunction-sections, --gc-sections and COMDAT folding.
Objects that already have a table are left as they are.

For objects built with -fpatchable-function-entry by gcc, whose one
__patchable_function_entries per object is linked to the object's first
function (g++ 12 cannot link C++ templates used in two objects; entries
are lost under --gc-sections), the entries are regrouped the same way:
one piece per code section, linked to it, in its COMDAT group.

Running it twice changes nothing the second time. Each file is replaced
atomically: a failure never leaves a half-written object.";

/// Add __mcount_loc tables, regroup __patchable_function_entries, in place.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Relocatable objects (.o) to rewrite.
    #[arg(required = true)]
    objects: Vec<PathBuf>,
    /// Say what was done to each object.
    #[arg(short, long)]
    verbose: bool,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut failed = false;
    for path in &args.objects {
        match rewrite(path) {
            Ok(message) => {
                if args.verbose {
                    println!("{}: {message}", path.display());
                }
            }
            Err(e) => {
                eprintln!("fntrace: error: {e:#}");
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn rewrite(path: &Path) -> anyhow::Result<String> {
    let data = read_input(path)?;
    let outcome = recordmcount::record(&data).with_context(|| format!("{}", path.display()))?;
    let mcount = match outcome.mcount {
        Mcount::AlreadyRecorded => "has a __mcount_loc table already".to_string(),
        Mcount::NoSites => "calls no __fentry__/mcount: nothing to record".into(),
        Mcount::Recorded { sites, tables } => format!("recorded {sites} sites in {tables} table sections"),
    };
    let patchable = match outcome.patchable {
        Patchable::Absent => String::new(),
        Patchable::Grouped => "; __patchable_function_entries is grouped by section already".into(),
        Patchable::Regrouped { entries, tables } => {
            format!("; regrouped {entries} __patchable_function_entries into {tables} sections")
        }
    };
    if let Some(output) = outcome.output {
        replace_file(path, &output).with_context(|| format!("cannot rewrite {}", path.display()))?;
    }
    Ok(format!("{mcount}{patchable}"))
}

/// Replaces `path` with `contents` atomically, keeping its permissions.
fn replace_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or_else(|| "object".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.fntrace-{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(contents)?;
        file.set_permissions(fs::metadata(path)?.permissions())?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
