//! `fntrace list BINARY [PATTERN...] [--json] [--sites]`: the patchable
//! functions of a binary, like ftrace's `available_filter_functions`.

mod bare;

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use fntrace_filter::{demangle, Filter, Names};
use fntrace_sites::{hex, Binary, Code, FileKind, Function, Site, SiteKind, Unpatchable};
use serde::Serialize;

use crate::output::{self, file_name, read_input};
use bare::Verdict;

const AFTER_HELP: &str = "\
Sites come from the tables compilers write, or from the calls to the
profiling hooks when there is no table. Compiler flags that make them:
  gcc   -pg -mfentry -mrecord-mcount      fentry, recorded in __mcount_loc
  gcc   -pg [-mrecord-mcount]             mcount after the prologue
  gcc   -pg -mfentry -mnop-mcount -mrecord-mcount   (non-PIC code only)
  gcc   -minstrument-return=nop5 -mrecord-return    exit sites (__return_loc)
  clang -pg [-mfentry]                    fentry/mcount, found by scanning
  gcc/clang -fpatchable-function-entry=N[,M]         patchable NOPs
  clang -fxray-instrument -fxray-instruction-threshold=1   XRay sleds
  rustc -Z instrument-mcount | -Z patchable-function-entry=5
        (with RUSTC_BOOTSTRAP=1 on a stable toolchain)
  MIPS, AArch64: gcc -pg [-mlong-calls] | -fpatchable-function-entry=N
        (gcc 12 puts the MIPS NOPs before the entry, where they never run)

An x86-64 executable or library with none of these has a 'bare' site in
every function: its own first instructions (after endbr64), which a patch
moves elsewhere. Its functions come from .symtab, the debug file, .dynsym
and, for code no symbol names, .eh_frame. --sites (and --json) show how
each would be patched (jump, trap) with its interior instruction
boundaries, or 'refused: REASON', and the functions left alone on purpose
(IFUNC resolvers, setjmp, vfork, .cold parts...) with their reason.

Patterns use ftrace's filter syntax: 'name', 'glob*', '*glob*', '!pattern'
removes, 'PATTERN:mod:MODULE' selects within a module.

Names come from .symtab; in a stripped file from its separate debug file
(.gnu_debuglink beside it, in .debug/ or under /usr/lib/debug; or
/usr/lib/debug/.build-id/xx/yyyy.debug; $FNTRACE_DEBUG_FILE_DIRECTORY
replaces /usr/lib/debug, as gdb's debug-file-directory), else .dynsym;
a function no symbol names is FILE+0xADDRESS.";

/// List the patchable functions of a binary.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// ELF executable, shared library or relocatable object.
    binary: PathBuf,
    /// Only functions matching these patterns (ftrace filter syntax).
    patterns: Vec<String>,
    /// Print a JSON array of objects instead of text.
    #[arg(long)]
    json: bool,
    /// One line per site (kind, form, source, bytes) instead of per function.
    #[arg(long)]
    sites: bool,
    /// Show symbol names as they are in the file.
    #[arg(long)]
    no_demangle: bool,
}

/// How many rejected entries are shown one by one.
const SHOWN_REJECTED: usize = 10;

/// A function with the sites selected in it, or a function discovery
/// left without a bare site (`unpatchable`, no sites).
struct Entry<'a> {
    function: Option<&'a Function>,
    name: String,
    sites: Vec<&'a Site>,
    unpatchable: Option<&'a Unpatchable>,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let filter = Filter::parse(&args.patterns)?;
    let data = read_input(&args.binary)?;
    let path = args.binary.display();
    let binary = fntrace_sites::discover_file(&args.binary, &data).with_context(|| format!("{path}"))?;

    report_rejected(&binary, &args.binary.display().to_string());
    report_before_entry(&binary, &args.binary.display().to_string());
    if binary.sites.is_empty() {
        // Bare sites were looked for: in an x86-64 executable or library.
        let bare = binary.arch == "x86_64" && binary.kind != FileKind::Relocatable;
        anyhow::bail!(
            "{path}: no patchable sites{}{} (build it with -pg -mfentry, \
             -fpatchable-function-entry=5 or clang -fxray-instrument; see 'fntrace list --help')",
            match binary.rejected.len() {
                0 => String::new(),
                n => format!(", {n} rejected table entries"),
            },
            match (bare, binary.unpatchable.len()) {
                (false, _) => String::new(),
                (true, 0) =>
                    ": no compiler sites, and no symbol or .eh_frame entry names a function".to_string(),
                (true, n) =>
                    format!(": no compiler sites, and none of its {n} functions can be patched as it is"),
            }
        );
    }

    let module = file_name(&args.binary);
    let details = args.sites || args.json;
    let entries = select(&binary, &filter, &module, !args.no_demangle, details);
    if entries.is_empty() {
        anyhow::bail!(
            "no patchable function in {path} matches {}",
            args.patterns.join(" ")
        );
    }

    let mut out = BufWriter::new(io::stdout().lock());
    // Bare sites are decoded only for the details, and only those shown.
    let code = Code::new(&data).with_context(|| format!("{path}"))?;
    let verdict = |site: &Site| bare::verdict(&code, &binary, site);
    if args.json {
        write_json(&mut out, &binary, &entries, &verdict)?;
    } else if args.sites {
        write_sites(&mut out, &binary, &entries, &verdict)?;
    } else {
        write_functions(&mut out, &binary, &entries)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn report_rejected(binary: &Binary, path: &str) {
    for r in binary.rejected.iter().take(SHOWN_REJECTED) {
        eprintln!(
            "fntrace: warning: {path}: {} entry {:#x} rejected: {}",
            r.source, r.address, r.reason
        );
    }
    if binary.rejected.len() > SHOWN_REJECTED {
        eprintln!(
            "fntrace: warning: {path}: {} more rejected entries",
            binary.rejected.len() - SHOWN_REJECTED
        );
    }
}

fn report_before_entry(binary: &Binary, path: &str) {
    let n = binary.sites.iter().filter(|s| s.before_entry()).count();
    if n > 0 {
        eprintln!(
            "fntrace: warning: {path}: {n} patchable site{} lie wholly before the function entry, \
             where calls never run them (gcc puts every -fpatchable-function-entry NOP \
             before the label on MIPS)",
            if n == 1 { "" } else { "s" }
        );
    }
}

/// Groups the sites by function, in address order, with the functions
/// left without a bare site if `unpatchable`, and applies the filter.
fn select<'a>(
    binary: &'a Binary,
    filter: &Filter,
    module: &str,
    demangled: bool,
    unpatchable: bool,
) -> Vec<Entry<'a>> {
    let mut groups: BTreeMap<(usize, u64), Entry<'a>> = BTreeMap::new();
    for site in &binary.sites {
        let function = binary.function_of(site);
        let key = function.map_or((site.section, site.address), |f| (f.section, f.address));
        groups
            .entry(key)
            .or_insert_with(|| Entry {
                function,
                name: String::new(),
                sites: Vec::new(),
                unpatchable: None,
            })
            .sites
            .push(site);
    }
    for u in binary.unpatchable.iter().filter(|_| unpatchable) {
        let Some(f) = binary.functions.get(u.function) else {
            continue;
        };
        groups.entry((f.section, f.address)).or_insert(Entry {
            function: Some(f),
            name: String::new(),
            sites: Vec::new(),
            unpatchable: Some(u),
        });
    }
    groups
        .into_values()
        .filter_map(|mut e| {
            // Demangle once: for the filter, and for display.
            let Some(f) = e.function else {
                e.name = format!("<no symbol at {:#x}>", e.sites[0].address);
                let names = Names {
                    symbol: &e.name,
                    demangled: &e.name,
                    base: None,
                    module,
                };
                return filter.selects(&names).then_some(e);
            };
            let full = f.demangled();
            let base = if filter.is_empty() {
                None
            } else {
                demangle::demangle_without_params(&f.name)
            };
            let names = Names {
                symbol: &f.name,
                demangled: &full,
                base: base.as_deref(),
                module,
            };
            if !filter.selects(&names) {
                return None;
            }
            e.name = if demangled { full } else { f.name.to_string() };
            Some(e)
        })
        .collect()
}

fn address(binary: &Binary, section: usize, address: u64) -> String {
    if binary.kind == FileKind::Relocatable {
        format!("{}+{:#x}", binary.section_name(section), address)
    } else {
        format!("{address:016x}")
    }
}

fn kinds(entry: &Entry<'_>) -> String {
    if entry.unpatchable.is_some() {
        return SiteKind::Bare.as_str().to_string();
    }
    let mut kinds: Vec<(SiteKind, bool)> = entry.sites.iter().map(|s| (s.kind, s.before_entry())).collect();
    kinds.sort();
    kinds.dedup();
    kinds
        .iter()
        .map(|&(k, before)| match before {
            true => format!("{}(before-entry)", k.as_str()),
            false => k.as_str().to_string(),
        })
        .collect::<Vec<_>>()
        .join("+")
}

fn start(entry: &Entry<'_>) -> (usize, u64) {
    entry.function.map_or_else(
        || (entry.sites[0].section, entry.sites[0].address),
        |f| (f.section, f.address),
    )
}

fn write_functions(out: &mut impl Write, binary: &Binary, entries: &[Entry<'_>]) -> io::Result<()> {
    for e in entries {
        let (section, addr) = start(e);
        writeln!(
            out,
            "{} {:<12} {}",
            address(binary, section, addr),
            kinds(e),
            e.name
        )?;
    }
    Ok(())
}

fn write_sites(
    out: &mut impl Write,
    binary: &Binary,
    entries: &[Entry<'_>],
    verdict: &dyn Fn(&Site) -> Option<Verdict>,
) -> io::Result<()> {
    for e in entries {
        if let (Some(u), Some(f)) = (e.unpatchable, e.function) {
            writeln!(
                out,
                "{} {:>3} {:<10} {:<8} {:<28} {}+0x0 []{}",
                address(binary, f.section, f.address),
                0,
                SiteKind::Bare.as_str(),
                "refused",
                u.source.as_str(),
                e.name,
                Verdict::refused(u).suffix(),
            )?;
        }
        for s in &e.sites {
            let verdict = verdict(s);
            let offset = match e.function {
                Some(f) if s.address < f.address => format!("-{:#x}", f.address - s.address),
                Some(f) => format!("+{:#x}", s.address - f.address),
                None => String::new(),
            };
            writeln!(
                out,
                "{} {:>3} {:<10} {:<8} {:<28} {}{} [{}]{}",
                address(binary, s.section, s.address),
                s.len(),
                s.kind.as_str(),
                verdict
                    .as_ref()
                    .map_or_else(|| s.form.to_string(), |v| v.form.to_string()),
                s.source.as_str(),
                e.name,
                offset,
                hex(&s.bytes),
                match &verdict {
                    Some(v) => v.suffix(),
                    None if s.before_entry() => " before the entry: never runs".to_string(),
                    None => String::new(),
                },
            )?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct JsonFunction<'a> {
    name: &'a str,
    symbol: Option<&'a str>,
    address: String,
    size: Option<u64>,
    kind: String,
    section: &'a str,
    local: bool,
    file: Option<&'a str>,
    sites: Vec<JsonSite<'a>>,
}

#[derive(Serialize)]
struct JsonSite<'a> {
    address: String,
    len: usize,
    kind: &'static str,
    form: String,
    source: &'static str,
    prefix: u8,
    /// The whole site lies before the entry: calls never run it.
    before_entry: bool,
    bytes: String,
    section: &'a str,
    /// A bare site's interior instruction boundaries (offsets from its
    /// address), when it can be patched.
    #[serde(skip_serializing_if = "Option::is_none")]
    boundaries: Option<Vec<u64>>,
    /// Why a bare site's function is not patched.
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<String>,
}

fn write_json(
    out: &mut impl Write,
    binary: &Binary,
    entries: &[Entry<'_>],
    verdict: &dyn Fn(&Site) -> Option<Verdict>,
) -> anyhow::Result<()> {
    let functions: Vec<JsonFunction<'_>> = entries
        .iter()
        .map(|e| {
            let (section, addr) = start(e);
            JsonFunction {
                name: &e.name,
                symbol: e.function.map(|f| &*f.name),
                address: format!("{addr:#x}"),
                size: e.function.map(|f| f.size),
                kind: kinds(e),
                section: binary.section_name(section),
                local: e.function.is_some_and(|f| f.local),
                file: e.function.and_then(|f| f.file.as_deref()),
                sites: match (e.unpatchable, e.function) {
                    (Some(u), Some(f)) => vec![JsonSite {
                        address: format!("{:#x}", f.address),
                        len: 0,
                        kind: SiteKind::Bare.as_str(),
                        form: "refused".to_string(),
                        source: u.source.as_str(),
                        prefix: 0,
                        before_entry: false,
                        bytes: String::new(),
                        section: binary.section_name(f.section),
                        boundaries: None,
                        refused: Some(u.reason.clone()),
                    }],
                    _ => e.sites.iter().map(|s| json_site(binary, s, verdict(s))).collect(),
                },
            }
        })
        .collect();
    Ok(output::write_json(out, &functions)?)
}

fn json_site<'a>(binary: &'a Binary, s: &Site, verdict: Option<Verdict>) -> JsonSite<'a> {
    JsonSite {
        address: format!("{:#x}", s.address),
        len: s.len(),
        kind: s.kind.as_str(),
        form: verdict
            .as_ref()
            .map_or_else(|| s.form.to_string(), |v| v.form.to_string()),
        source: s.source.as_str(),
        prefix: s.prefix,
        before_entry: s.before_entry(),
        bytes: s.bytes.iter().map(|b| format!("{b:02x}")).collect(),
        section: binary.section_name(s.section),
        boundaries: verdict
            .as_ref()
            .filter(|v| v.refused.is_none())
            .map(|v| v.boundaries.clone()),
        refused: verdict.and_then(|v| v.refused),
    }
}
