//! What the discovery tests share: a listing made by `discover_file`, in
//! the shape of `fntrace list --json`, and its comparison with independent
//! readings of the file; the rest comes from `fntrace-testkit`, which the
//! CLI's tests share.
// Each test uses some of these, none uses all.
#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::path::Path;

use fntrace_sites::SiteKind;
pub use fntrace_testkit::{
    build_program, cc, program, run, sites, truth, ListedFunction, ListedSite, Work, CXX_PROGRAM, C_PROGRAM,
};

pub mod check {
    //! [`fntrace_testkit::check`] of the listing `discover_file` makes.

    use std::path::Path;

    pub use fntrace_testkit::check::{Expect, FENTRY_SCAN, FENTRY_TABLE, MCOUNT_SCAN, MCOUNT_TABLE};

    use super::{list, ListedFunction};

    /// Compares what discovery finds in `bin` with independent readings,
    /// and returns the listing for further checks.
    pub fn check(bin: &Path, expect: Expect) -> Vec<ListedFunction> {
        fntrace_testkit::check::check(bin, list(bin), expect)
    }
}

/// The functions `fntrace_sites::discover_file` finds in `path`, with their
/// sites, grouped and named as `fntrace list --json` shows them (in address
/// order, demangled). Discovery must find sites and reject nothing, and no
/// site may lie before its function's entry (what `fntrace list` would
/// warn of).
pub fn list(path: &Path) -> Vec<ListedFunction> {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let binary = fntrace_sites::discover_file(path, &data)
        .unwrap_or_else(|e| panic!("discovery in {}: {e}", path.display()));
    assert!(!binary.sites.is_empty(), "no sites in {}", path.display());
    assert!(
        binary.rejected.is_empty(),
        "{}: rejected {:?}",
        path.display(),
        binary.rejected
    );
    assert!(
        !binary.sites.iter().any(|s| s.before_entry()),
        "{}: sites before the entry",
        path.display()
    );
    let mut groups: BTreeMap<(usize, u64), ListedFunction> = BTreeMap::new();
    let mut kinds: BTreeMap<(usize, u64), Vec<SiteKind>> = BTreeMap::new();
    for site in &binary.sites {
        let function = binary.function_of(site);
        let key = function.map_or((site.section, site.address), |f| (f.section, f.address));
        let listed = groups.entry(key).or_insert_with(|| ListedFunction {
            name: function.map_or_else(
                || format!("<no symbol at {:#x}>", site.address),
                |f| f.demangled(),
            ),
            symbol: function.map(|f| f.name.to_string()).unwrap_or_default(),
            address: key.1,
            kind: String::new(),
            local: function.is_some_and(|f| f.local),
            file: function.and_then(|f| f.file.clone()),
            sites: Vec::new(),
        });
        kinds.entry(key).or_default().push(site.kind);
        listed.sites.push(ListedSite {
            section: binary.section_name(site.section).to_string(),
            address: site.address,
            len: site.len(),
            kind: site.kind.as_str().to_string(),
            source: site.source.as_str().to_string(),
            form: site.form.to_string(),
            prefix: u64::from(site.prefix),
            bytes: site.bytes.to_vec(),
        });
    }
    // A function's kinds, in `SiteKind`'s order, joined by `+`.
    for (key, mut kinds) in kinds {
        kinds.sort();
        kinds.dedup();
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        groups.get_mut(&key).unwrap().kind = names.join("+");
    }
    groups.into_values().collect()
}

pub mod bare {
    //! The checks of bare sites that the tests of plain builds and of
    //! libc share.

    use std::path::Path;

    use fntrace_sites::{Binary, Form, SiteKind};
    use fntrace_testkit::truth::{self, Frame, SectionHeader, Symbol};

    /// Why the documented rules (`docs/SITES.md`, "Functions no compiler
    /// prepared") leave the function of `symbol` in `section` unpatched: a
    /// word its reason must hold; `None`: it gets a bare site.
    pub fn skip_word(symbol: &Symbol, section: &str) -> Option<&'static str> {
        const NEVER: &[&str] = &[
            "vfork",
            "__vfork",
            "setjmp",
            "_setjmp",
            "sigsetjmp",
            "__sigsetjmp",
            "getcontext",
            "__getcontext",
            "clone",
            "__clone",
            "__clone3",
            "__restore_rt",
            "_start",
            "swapcontext",
            "__swapcontext",
            "_Unwind_Resume",
            "_Unwind_Resume_or_Rethrow",
            "_Unwind_RaiseException",
            "_Unwind_ForcedUnwind",
            "_Unwind_Backtrace",
        ];
        let cold = symbol.name.ends_with(".cold")
            || symbol
                .name
                .rsplit_once(".cold.")
                .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if symbol.kind == "IFUNC" {
            Some("ifunc resolver")
        } else if section.starts_with(".plt") {
            Some("PLT stub")
        } else if section == ".init" {
            Some("in .init")
        } else if section == ".fini" {
            Some("in .fini")
        } else if NEVER.contains(&symbol.name.as_str()) {
            Some("never patched")
        } else if cold {
            Some("split part")
        } else if symbol.size == 0 {
            Some("no size")
        } else {
            None
        }
    }

    /// Checks each site's place and bytes against objdump: after `endbr64`
    /// when the function starts with one, its bytes those objdump shows there
    /// (5, or to the end of the section).
    pub fn check_places(bin: &Path, binary: &Binary, sections: &[SectionHeader]) -> usize {
        let disasm = truth::objdump(bin);
        let mut endbr = 0;
        for s in &binary.sites {
            let f = binary.function_of(s).expect("every bare site has its function");
            let first = disasm
                .insn(f.address)
                .unwrap_or_else(|| panic!("no instruction at {:#x}", f.address));
            let pad = if first.text == "endbr64" { 4 } else { 0 };
            endbr += usize::from(pad == 4);
            assert_eq!(s.address, f.address + pad, "{}", f.name);
            let section = sections.iter().find(|h| h.index == s.section).unwrap();
            let len = (section.address + section.size - s.address).min(5) as usize;
            assert_eq!(&s.bytes[..], &disasm.bytes(s.address, len)[..], "{}", f.name);
            assert_eq!((s.kind, s.form, s.prefix), (SiteKind::Bare, Form::Code, 0));
        }
        endbr
    }

    /// The FDEs readelf shows whose first row is the frame of a call, outside
    /// the PLT: the functions a stripped file's `.eh_frame` gives.
    pub fn called_frames(bin: &Path) -> Vec<Frame> {
        let sections = truth::sections(bin);
        truth::frames(bin)
            .into_iter()
            .filter(|f| f.called)
            .filter(|f| {
                let section = sections
                    .iter()
                    .find(|s| s.exec && s.address <= f.start && f.start < s.address + s.size);
                section.is_some_and(|s| !s.name.starts_with(".plt"))
            })
            .collect()
    }
}
