//! The comparison of a listing with independent readings of the file.

use std::collections::BTreeSet;
use std::path::Path;

use crate::truth::{objdump, table, xray_sleds, Sled};
use crate::{sites, ListedFunction};

#[derive(Clone, Copy)]
pub enum Expect {
    /// Calls to a hook; from `table` if given, else found by scanning.
    Calls {
        kind: &'static str,
        hooks: &'static [&'static str],
        table: Option<&'static str>,
    },
    /// `-mnop-mcount`: 5-byte NOPs recorded in `__mcount_loc`.
    NopTable,
    /// `-mrecord-return`: exit sites in `__return_loc` (plus recorded fentry
    /// calls); `call` when built with `-minstrument-return=call`.
    Returns { call: bool },
    /// `-fpatchable-function-entry=N,M`.
    Patchable { m: u64 },
    /// XRay sleds, read by this `llvm-xray`.
    Xray { llvm_xray: &'static str },
}

pub const FENTRY: &[&str] = &["__fentry__"];
pub const MCOUNT: &[&str] = &["mcount", "_mcount"];
pub const FENTRY_TABLE: Expect = Expect::Calls {
    kind: "fentry",
    hooks: FENTRY,
    table: Some("__mcount_loc"),
};
pub const FENTRY_SCAN: Expect = Expect::Calls {
    kind: "fentry",
    hooks: FENTRY,
    table: None,
};
pub const MCOUNT_TABLE: Expect = Expect::Calls {
    kind: "mcount",
    hooks: MCOUNT,
    table: Some("__mcount_loc"),
};
pub const MCOUNT_SCAN: Expect = Expect::Calls {
    kind: "mcount",
    hooks: MCOUNT,
    table: None,
};

/// Compares `listing`, what fntrace lists for `bin`, with independent
/// readings, and returns it for further checks.
pub fn check(bin: &Path, listing: Vec<ListedFunction>, expect: Expect) -> Vec<ListedFunction> {
    let d = objdump(bin);

    for (f, s) in sites(&listing) {
        assert_eq!(s.len, s.bytes.len());
        assert_eq!(
            s.bytes,
            d.bytes(s.address, s.len),
            "bytes of the site at {:#x}",
            s.address
        );
        let (label, name) = d.function_at(s.address + s.prefix).expect("a label");
        assert_eq!(
            f.address, label,
            "site {:#x} attributed to {} at {:#x}, objdump says {name}",
            s.address, f.name, f.address
        );
    }
    let of_kind = |kind: &str| -> BTreeSet<u64> {
        sites(&listing)
            .iter()
            .filter(|(_, s)| s.kind == kind)
            .map(|(_, s)| s.address)
            .collect()
    };
    let sources = |kind: &str| -> BTreeSet<String> {
        sites(&listing)
            .iter()
            .filter(|(_, s)| s.kind == kind)
            .map(|(_, s)| s.source.clone())
            .collect()
    };
    match expect {
        Expect::Calls {
            kind,
            hooks,
            table: from,
        } => {
            assert_eq!(
                of_kind(kind),
                d.hook_calls(hooks),
                "{kind} sites vs objdump's calls"
            );
            let source = from.unwrap_or("code-scan");
            assert_eq!(sources(kind), BTreeSet::from([source.to_string()]));
            if let Some(name) = from {
                assert_eq!(
                    of_kind(kind),
                    table(bin, name).into_iter().collect(),
                    "{kind} vs {name}"
                );
            }
        }
        Expect::NopTable => {
            assert_eq!(
                of_kind("fentry"),
                table(bin, "__mcount_loc").into_iter().collect()
            );
            for (_, s) in sites(&listing) {
                assert_eq!(s.bytes, [0x0f, 0x1f, 0x44, 0x00, 0x00]);
                assert!(d.insn(s.address).unwrap().text.starts_with("nop"));
            }
        }
        Expect::Returns { call } => {
            assert_eq!(of_kind("fentry"), d.hook_calls(FENTRY));
            assert_eq!(
                of_kind("return"),
                table(bin, "__return_loc").into_iter().collect()
            );
            for (_, s) in sites(&listing).into_iter().filter(|(_, s)| s.kind == "return") {
                let text = &d.insn(s.address).unwrap().text;
                if call {
                    assert!(
                        text.starts_with("call") && text.contains("<__return__>"),
                        "{text}"
                    );
                } else {
                    assert!(text.starts_with("nop"), "{text}");
                }
            }
            if call {
                assert_eq!(of_kind("return"), d.hook_calls(&["__return__"]));
            }
        }
        Expect::Patchable { m } => {
            // Sites from the table are exactly the table; sites recovered by
            // scanning (see docs/SITES.md) pass the same checks below.
            let recorded: BTreeSet<u64> = table(bin, "__patchable_function_entries").into_iter().collect();
            let from_table: BTreeSet<u64> = sites(&listing)
                .iter()
                .filter(|(_, s)| s.source == "__patchable_function_entries")
                .map(|(_, s)| s.address)
                .collect();
            assert_eq!(from_table, recorded);
            for (_, s) in sites(&listing) {
                assert_eq!(s.prefix, m, "prefix of {:#x}", s.address);
                let mut at = s.address;
                while at < s.address + s.len as u64 {
                    let insn = d.insn(at).unwrap_or_else(|| panic!("no instruction at {at:#x}"));
                    assert!(
                        insn.text.contains("nop") || insn.text.starts_with("xchg   %ax,%ax"),
                        "{insn:?}"
                    );
                    at += insn.bytes.len() as u64;
                }
            }
        }
        Expect::Xray { llvm_xray } => {
            let mut found: Vec<Sled> = listing
                .iter()
                .flat_map(|f| {
                    f.sites.iter().map(|s| Sled {
                        address: s.address,
                        function: f.address,
                        kind: s.kind.clone(),
                    })
                })
                .collect();
            found.sort();
            let mut expected = xray_sleds(bin, llvm_xray);
            expected.sort();
            assert_eq!(found, expected);
        }
    }
    listing
}
