//! What the readers share: opening a data directory, damage notes, function
//! names (demangled once, matched against filters), command lines and
//! wall-clock times.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use fntrace_filter::demangle;
use fntrace_filter::{Filter, Names as FilterNames};
use fntrace_format::read::{self, Functions, Process, Trace};

use crate::output;

/// Opens the data directory `dir`; the error is one line naming it.
pub fn open(dir: &Path) -> anyhow::Result<Trace> {
    Ok(read::open(dir)?)
}

/// Prints damage notes on stderr, one line each.
pub fn warn_damage<S: AsRef<str>>(notes: &[S]) {
    // A note two readings of one stream made alike (the narrowing's and
    // the reader's) is said once.
    let mut said = std::collections::HashSet::new();
    for note in notes {
        if said.insert(note.as_ref()) {
            eprintln!("fntrace: warning: {}", note.as_ref());
        }
    }
}

/// The processes to read, with the threads asked for (`--tid`, all when
/// empty); processes left with no thread are left out.
pub fn select<'t>(trace: &'t Trace, tids: &[u32]) -> Vec<(&'t Process, Vec<u32>)> {
    trace
        .processes
        .iter()
        .filter_map(|p| {
            let threads: Vec<u32> = p
                .tids
                .iter()
                .copied()
                .filter(|t| tids.is_empty() || tids.contains(t))
                .collect();
            (!threads.is_empty()).then_some((p, threads))
        })
        .collect()
}

/// Fails when threads were asked for (`--tid`) and the trace has none of
/// them.
pub fn check_tids(trace: &Trace, tids: &[u32]) -> anyhow::Result<()> {
    let known = |t: &u32| trace.processes.iter().any(|p| p.tids.contains(t));
    if !tids.is_empty() && !tids.iter().any(known) {
        let list: Vec<String> = tids.iter().map(u32::to_string).collect();
        anyhow::bail!(
            "{}: no thread {} in the trace",
            trace.dir.display(),
            list.join(", ")
        );
    }
    Ok(())
}

/// A process's command line, for headings.
pub fn command_line(process: &Process) -> String {
    if process.info.argv.is_empty() {
        process.info.exe.clone()
    } else {
        process.info.argv.join(" ")
    }
}

/// How function names are shown (`--demangle`): as the source spells
/// them, in full (`ns::f(int)`, the default); without return type,
/// template arguments and parameters, as uftrace's default shows them
/// (`ns::f`); or as the symbol table has them (`_ZN2ns1fEi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Demangle {
    #[default]
    Full,
    Simple,
    No,
}

/// The `--demangle` option of every reader, with `--no-demangle` as its
/// old spelling of `--demangle=no`.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct DemangleFlags {
    /// How to show function names: full (ns::f(int)), simple (ns::f, as uftrace's default) or no (the symbol).
    #[arg(long, value_enum, value_name = "HOW", default_value = "full")]
    demangle: Demangle,
    /// Show symbol names as recorded (--demangle=no).
    #[arg(long)]
    no_demangle: bool,
}

impl Demangle {
    /// How `symbol` shows in this mode.
    pub fn show(self, symbol: &str) -> String {
        self.shown(symbol, &full_name(symbol))
    }

    /// How `symbol`, whose full name is `demangled`, shows in this mode.
    fn shown(self, symbol: &str, demangled: &str) -> String {
        match self {
            Demangle::No => symbol.to_string(),
            Demangle::Simple if demangle::is_cxx(symbol) => demangle::simplify(demangled),
            Demangle::Full | Demangle::Simple => demangled.to_string(),
        }
    }
}

/// The demangled form of `symbol`: `cpp_demangle`'s or Rust's, else
/// binutils' `c++filt`'s for the C++ names `cpp_demangle` rejects
/// (`crate::cxxfilt`), else the symbol.
pub fn full_name(symbol: &str) -> String {
    let name = demangle::demangle(symbol);
    if name == symbol && demangle::is_cxx(symbol) {
        return crate::cxxfilt::demangle(symbol).unwrap_or(name);
    }
    name
}

impl DemangleFlags {
    /// The mode asked for.
    pub fn mode(&self) -> Demangle {
        match self.no_demangle {
            true => Demangle::No,
            false => self.demangle,
        }
    }
}

/// One function's names.
pub struct Name {
    /// What is shown: demangled, or the symbol with `--no-demangle`.
    pub shown: String,
    symbol: String,
    demangled: String,
    base: Option<String>,
    module: String,
}

impl Name {
    /// Whether `filter` selects this function.
    pub fn matches(&self, filter: &Filter) -> bool {
        filter.selects(&FilterNames {
            symbol: &self.symbol,
            demangled: &self.demangled,
            base: self.base.as_deref(),
            module: &self.module,
        })
    }
}

/// The names of one process's functions, made on first use. Two
/// functions of one name at different addresses (static functions of two
/// files) are told apart: each shown name gets ` [FILE+0xOFFSET]`, the
/// offset in its module, the same in every process of the same file. The
/// program's own function keeps its plain name when the other is a
/// library's (`step`, which glibc defines too).
pub struct Names<'p> {
    functions: &'p Functions,
    demangle: Demangle,
    cache: rustc_hash::FxHashMap<u32, Name>,
    /// Symbols that name more than one function.
    shared: HashSet<&'p str>,
    /// Symbols that name exactly one function of the program.
    program_once: HashSet<&'p str>,
    /// The program's path.
    program: Option<&'p str>,
    /// Load bias of each module path.
    biases: HashMap<&'p str, u64>,
    /// Each function's `FILE:LINE` (`record --srcline`).
    srclines: Option<&'p HashMap<u32, String>>,
}

impl<'p> Names<'p> {
    #[cfg(test)]
    pub fn new(functions: &'p Functions, demangle: Demangle) -> Names<'p> {
        Names::with_program(functions, demangle, None)
    }

    /// [`Names::new`], knowing which module is the program (`program`).
    fn with_program(functions: &'p Functions, demangle: Demangle, program: Option<&'p str>) -> Names<'p> {
        let mut first: HashMap<&str, u64> = HashMap::new();
        let mut shared = HashSet::new();
        let mut in_program: HashMap<&str, (u64, bool)> = HashMap::new();
        for f in functions.iter() {
            match first.insert(&f.name, f.address) {
                Some(address) if address != f.address => {
                    shared.insert(f.name.as_str());
                }
                _ => {}
            }
            if program == Some(f.module.as_str()) {
                in_program
                    .entry(&f.name)
                    .and_modify(|(address, once)| *once &= *address == f.address)
                    .or_insert((f.address, true));
            }
        }
        let program_once = in_program
            .into_iter()
            .filter(|(_, (_, once))| *once)
            .map(|(name, _)| name)
            .collect();
        Names {
            functions,
            demangle,
            cache: Default::default(),
            shared,
            program_once,
            program,
            biases: HashMap::new(),
            srclines: None,
        }
    }

    /// The names of `process`'s functions (with its modules' load biases).
    pub fn of(process: &'p Process, demangle: Demangle) -> Names<'p> {
        let program = (!process.info.exe.is_empty()).then_some(process.info.exe.as_str());
        let mut names = Names::with_program(&process.functions, demangle, program);
        names.biases = process
            .info
            .modules
            .iter()
            .map(|m| (m.path.as_str(), m.bias))
            .collect();
        names.srclines = Some(&process.srclines);
        names
    }

    /// Where function `fid` is in its source (`FILE:LINE`), if the
    /// recording kept it (`record --srcline`).
    pub fn srcline(&self, fid: u32) -> Option<&'p str> {
        self.srclines?.get(&fid).map(String::as_str)
    }

    /// The names of function `fid`.
    pub fn get(&mut self, fid: u32) -> &Name {
        let (functions, wanted) = (self.functions, self.demangle);
        let (shared, biases) = (&self.shared, &self.biases);
        let (program, program_once) = (self.program, &self.program_once);
        self.cache.entry(fid).or_insert_with(|| {
            let symbol = functions.name(fid);
            let entry = functions.get(fid);
            let module = entry.map_or_else(String::new, |f| output::file_name(Path::new(&f.module)));
            let demangled = full_name(&symbol);
            let mut shown = wanted.shown(&symbol, &demangled);
            let plain = |f: &&fntrace_format::meta::FunctionEntry| {
                program == Some(f.module.as_str()) && program_once.contains(symbol.as_str())
            };
            if let Some(f) = entry.filter(|f| shared.contains(symbol.as_str()) && !plain(f)) {
                let bias = biases.get(f.module.as_str()).copied().unwrap_or(0);
                shown = format!("{shown} [{module}+{:#x}]", f.address.wrapping_sub(bias));
            }
            let base = match demangled != symbol && demangle::is_cxx(&symbol) {
                true => {
                    Some(crate::funcgraph::without_params(&demangled).to_string()).filter(|b| *b != demangled)
                }
                false => None,
            };
            Name {
                shown,
                base: demangle::demangle_without_params(&symbol).or(base),
                symbol,
                demangled,
                module,
            }
        })
    }

    /// What is shown for function `fid`.
    pub fn shown(&mut self, fid: u32) -> &str {
        &self.get(fid).shown
    }

    /// The address of function `fid`, as the process had it.
    pub fn address_of(&self, fid: u32) -> Option<u64> {
        self.functions.get(fid).map(|f| f.address)
    }

    /// A return address as `function+0xoffset`, or the address itself.
    pub fn address(&mut self, addr: u64) -> String {
        match caller(self.functions, addr) {
            Some(fid) => {
                let off = addr - self.functions.get(fid).map_or(addr, |f| f.address);
                format!("{}+{off:#x}", self.shown(fid))
            }
            None => format!("{addr:#x}"),
        }
    }
}

/// The function a return address `addr` is in: the one holding `addr - 1`,
/// since a call to a function that does not return (`longjmp`, `abort`)
/// can be the last instruction of its caller.
pub fn caller(functions: &Functions, addr: u64) -> Option<u32> {
    functions.by_address(addr.checked_sub(1)?).map(|(f, _)| f.fid)
}

/// A Unix time in nanoseconds as UTC, ISO 8601: `2024-03-01T12:34:56.789Z`.
pub fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let millis = unix_ns % 1_000_000_000 / 1_000_000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fntrace_format::FunctionEntry;

    #[test]
    fn the_programs_name_stays_plain_beside_a_librarys() {
        let entry = |fid: u32, module: &str, address: u64, name: &str| FunctionEntry {
            fid,
            module: module.to_string(),
            address,
            size: 8,
            name: name.to_string(),
        };
        let functions = Functions::new(vec![
            entry(0, "/bin/prog", 0x1000, "step"),
            entry(1, "/bin/prog", 0x1100, "helper"),
            entry(2, "/bin/prog", 0x1200, "helper"),
            entry(3, "/lib/libc.so.6", 0x9000, "step"),
            entry(4, "/lib/libz.so.1", 0xa000, "inflate"),
            entry(5, "/lib/libzz.so.1", 0xb000, "inflate"),
        ])
        .unwrap();
        let mut names = Names::with_program(&functions, Demangle::No, Some("/bin/prog"));
        assert_eq!(names.shown(0), "step");
        assert_eq!(names.shown(1), "helper [prog+0x1100]");
        assert_eq!(names.shown(2), "helper [prog+0x1200]");
        assert_eq!(names.shown(3), "step [libc.so.6+0x9000]");
        assert_eq!(names.shown(4), "inflate [libz.so.1+0xa000]");
        // Without knowing the program, every shared name is told apart.
        assert_eq!(
            Names::new(&functions, Demangle::No).shown(0),
            "step [prog+0x1000]"
        );
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(1_709_296_496_789_000_000), "2024-03-01T12:34:56.789Z");
    }
}
