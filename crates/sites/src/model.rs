//! What discovery finds: functions, the sites in them, and the entries that
//! did not check out.

use std::fmt;
use std::sync::Arc;

pub use fntrace_arch::SledKind;

use crate::bytes::SiteBytes;

/// What a site is for, from the instrumentation that produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SiteKind {
    /// `call __fentry__` at the function entry (gcc/clang `-pg -mfentry`),
    /// or the 5-byte NOP of `-mnop-mcount` there.
    Fentry,
    /// `call mcount` after the prologue (`-pg` without `-mfentry`, Rust's
    /// `-Z instrument-mcount`).
    Mcount,
    /// A run of NOPs from `-fpatchable-function-entry=N[,M]`.
    Patchable,
    /// XRay entry sled.
    XrayEntry,
    /// XRay exit sled (at a `ret`).
    XrayExit,
    /// XRay tail-call exit sled.
    XrayTail,
    /// A function-exit site before a `ret` (gcc `-minstrument-return=nop5`
    /// or `=call` with `-mrecord-return`).
    Return,
    /// The first instructions of a function no compiler prepared (after
    /// its `endbr64`): its own code, which a patch must move elsewhere,
    /// not a NOP or call a compiler left (`docs/SITES.md`, "Functions no
    /// compiler prepared").
    Bare,
}

impl SiteKind {
    /// True for sites at (or near) the function entry, false for exit sites.
    /// A [`SiteKind::Bare`] site is one; [`SiteKind::is_compiled`] tells it
    /// from those a compiler left.
    pub fn is_entry(self) -> bool {
        matches!(
            self,
            SiteKind::Fentry | SiteKind::Mcount | SiteKind::Patchable | SiteKind::XrayEntry | SiteKind::Bare
        )
    }

    /// The name used in listings.
    pub fn as_str(self) -> &'static str {
        match self {
            SiteKind::Fentry => "fentry",
            SiteKind::Mcount => "mcount",
            SiteKind::Patchable => "patchable",
            SiteKind::XrayEntry => "xray-entry",
            SiteKind::XrayExit => "xray-exit",
            SiteKind::XrayTail => "xray-tail",
            SiteKind::Return => "return",
            SiteKind::Bare => "bare",
        }
    }

    /// True for the sites a compiler left (NOPs, calls, sleds), which can
    /// be rewritten in place; false for [`SiteKind::Bare`].
    pub fn is_compiled(self) -> bool {
        self != SiteKind::Bare
    }
}

impl fmt::Display for SiteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where discovery learnt of a site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The `__mcount_loc` table (gcc `-mrecord-mcount`, `fntrace recordmcount`).
    McountLoc,
    /// The `__patchable_function_entries` table.
    PatchableFunctionEntries,
    /// The `xray_instr_map` table.
    XrayInstrMap,
    /// The `__return_loc` table (gcc `-mrecord-return`).
    ReturnLoc,
    /// A relocation against `__fentry__`/`mcount` in a relocatable object.
    Relocation,
    /// A call to `__fentry__`/`mcount` found by decoding the code.
    CodeScan,
    /// A function symbol of `.symtab` (bare sites).
    Symbol,
    /// A function symbol of `.dynsym`, in a file without `.symtab` (bare
    /// sites).
    DynSym,
    /// A function symbol of the separate debug file (bare sites).
    DebugFile,
    /// A frame description entry of `.eh_frame` that no symbol covers
    /// (bare sites).
    EhFrame,
}

impl Source {
    /// The section name of a table source, or a short description.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::McountLoc => "__mcount_loc",
            Source::PatchableFunctionEntries => "__patchable_function_entries",
            Source::XrayInstrMap => "xray_instr_map",
            Source::ReturnLoc => "__return_loc",
            Source::Relocation => "relocation",
            Source::CodeScan => "code-scan",
            Source::Symbol => "symtab",
            Source::DynSym => "dynsym",
            Source::DebugFile => "debug-file",
            Source::EhFrame => "eh_frame",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The instruction at a site now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A call instruction (to the profiling hook named by the site's kind).
    Call,
    /// One or more NOP instructions; `insns` counts them.
    Nops {
        /// Number of NOP instructions in the site.
        insns: u16,
    },
    /// An unpatched XRay sled.
    XraySled,
    /// The function's own instructions ([`SiteKind::Bare`]).
    Code,
}

impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Form::Call => f.write_str("call"),
            Form::Nops { insns: 1 } => f.write_str("nop"),
            Form::Nops { insns } => write!(f, "nop*{insns}"),
            Form::XraySled => f.write_str("sled"),
            Form::Code => f.write_str("code"),
        }
    }
}

/// One patchable place in the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// ELF section index of the code section holding the site.
    pub section: usize,
    /// Link-time address: the virtual address in linked files (the runtime
    /// adds the load bias), the section offset in relocatable objects.
    pub address: u64,
    /// What the site is for.
    pub kind: SiteKind,
    /// Where it was found.
    pub source: Source,
    /// The instruction(s) there now.
    pub form: Form,
    /// The exact bytes there now (their count is the site's length).
    pub bytes: SiteBytes,
    /// Bytes of the site that lie before the function's entry point
    /// (`M` of `-fpatchable-function-entry=N,M`); 0 for every other kind.
    pub prefix: u8,
    /// Index into [`Binary::functions`] of the function it belongs to.
    pub function: Option<usize>,
}

impl Site {
    /// Length of the site in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the whole site lies before its function's entry, where
    /// calls never run it (gcc 12's `-fpatchable-function-entry` on MIPS).
    pub fn before_entry(&self) -> bool {
        self.kind == SiteKind::Patchable && usize::from(self.prefix) >= self.len()
    }

    /// Never true: every site has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// A function symbol of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The symbol name as it is in the file (mangled).
    pub name: Arc<str>,
    /// Index of the symbol in its symbol table (`.symtab`, or `.dynsym`
    /// when the file has no `.symtab`).
    pub symbol: usize,
    /// ELF section index.
    pub section: usize,
    /// Link-time address (section offset in relocatable objects).
    pub address: u64,
    /// Size in bytes (from the symbol, or up to the next function).
    pub size: u64,
    /// A local (static) symbol.
    pub local: bool,
    /// For local symbols: the source file named by the preceding `STT_FILE`
    /// symbol, which tells apart static functions of the same name.
    pub file: Option<String>,
    /// The symbol gave the size (false: hand-written assembly without
    /// `.size`, or a function made for an unnamed site; `size` then
    /// reaches the next function).
    pub sized: bool,
    /// An `STT_GNU_IFUNC` symbol is at its address: the code there is an
    /// IFUNC resolver, run once by the dynamic linker.
    pub ifunc: bool,
}

impl Function {
    /// The demangled name (C++ Itanium, Rust legacy and v0), or the name.
    pub fn demangled(&self) -> String {
        fntrace_filter::demangle::demangle(&self.name)
    }

    /// True if `address` lies inside the function.
    pub fn contains(&self, section: usize, address: u64) -> bool {
        section == self.section && address >= self.address && address - self.address < self.size.max(1)
    }
}

/// A table entry or code location that looked like a site but is not one
/// of the forms its kind allows: reported, never trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// ELF section index, if the address lies in a known section.
    pub section: Option<usize>,
    /// The address the entry designates.
    pub address: u64,
    /// Where the entry came from.
    pub source: Source,
    /// Why it was rejected.
    pub reason: String,
}

/// A function that gets no [`SiteKind::Bare`] site, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpatchable {
    /// Index into [`Binary::functions`].
    pub function: usize,
    /// Where the function came from.
    pub source: Source,
    /// Why it is not patched, in a few words (`ifunc resolver`).
    pub reason: String,
}

/// The kind of ELF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A position-dependent executable (`ET_EXEC`).
    Executable,
    /// A position-independent executable (`ET_DYN` with an interpreter).
    PieExecutable,
    /// A shared library (`ET_DYN`).
    SharedLibrary,
    /// A relocatable object (`ET_REL`).
    Relocatable,
}

impl FileKind {
    /// The name used in listings.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Executable => "executable",
            FileKind::PieExecutable => "PIE executable",
            FileKind::SharedLibrary => "shared library",
            FileKind::Relocatable => "relocatable object",
        }
    }
}

/// Everything discovery learnt about one ELF file.
#[derive(Debug, Clone)]
pub struct Binary {
    /// The kind of file.
    pub kind: FileKind,
    /// Architecture name (`x86_64`).
    pub arch: &'static str,
    /// Function symbols, sorted by section and address.
    pub functions: Vec<Function>,
    /// Sites, sorted by section and address, each found once.
    pub sites: Vec<Site>,
    /// Entries that did not check out.
    pub rejected: Vec<Rejected>,
    /// Functions left without a bare site on purpose, in address order
    /// (only when bare sites were wanted: [`crate::Options`]).
    pub unpatchable: Vec<Unpatchable>,
    /// Names of the sections, by ELF section index.
    pub section_names: Vec<String>,
}

impl Binary {
    /// The name of section `index` (empty if unknown).
    pub fn section_name(&self, index: usize) -> &str {
        self.section_names.get(index).map_or("", String::as_str)
    }

    /// The function a site belongs to.
    pub fn function_of(&self, site: &Site) -> Option<&Function> {
        site.function.and_then(|i| self.functions.get(i))
    }
}
