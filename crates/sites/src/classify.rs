//! Checking what a table says against the bytes: every entry must point at
//! one of the forms its kind allows, or it is rejected with the reason.

use fntrace_arch::{hex, Call, SledKind};

use crate::bytes::SiteBytes;
use crate::hooks::{Hook, Hooks};
use crate::image::Image;
use crate::model::{Form, Rejected, Site, SiteKind, Source};
use crate::symbols::FunctionTable;
use crate::tables::Entry;

/// The longest run of NOPs taken as one patchable site.
pub(crate) const MAX_PATCHABLE_BYTES: usize = 128;
/// How many bytes a rejection message shows.
const SHOWN_BYTES: usize = 8;

/// What classification needs to know of the file.
pub(crate) struct Context<'a, 'd> {
    pub image: &'a Image<'d>,
    pub functions: &'a FunctionTable,
    pub hooks: &'a Hooks,
}

impl Context<'_, '_> {
    /// A site made of `bytes` at (`section`, `address`), attributed to the
    /// function holding it.
    pub fn site(
        &self,
        section: usize,
        address: u64,
        bytes: &[u8],
        kind: SiteKind,
        source: Source,
        form: Form,
    ) -> Site {
        Site {
            section,
            address,
            kind,
            source,
            form,
            bytes: SiteBytes::new(bytes),
            prefix: 0,
            function: self.functions.containing(section, address),
        }
    }

    /// The hook that `call`, at this place, goes to, and the call's length
    /// (objects: as its relocation says).
    fn hook_of_call(&self, section: usize, address: u64, call: Call) -> Option<(usize, Hook)> {
        if self.image.relocatable() {
            let (len, hook) = self.hooks.relocated_call(section, address)?;
            return Some((len.into(), hook));
        }
        Some((call.len.into(), self.hooks.linked_call(call.target)?))
    }
}

/// Turns a table entry into a site, or says why it is not one.
pub(crate) fn classify(cx: &Context<'_, '_>, entry: &Entry) -> Result<Site, Rejected> {
    let reject = |reason: String| Rejected {
        section: Some(entry.section),
        address: entry.address,
        source: entry.source,
        reason,
    };
    let code = cx
        .image
        .code(entry.section, entry.address)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| reject("points outside executable code".into()))?;
    let shown = || hex(&code[..code.len().min(SHOWN_BYTES)]);
    let (section, address, source) = (entry.section, entry.address, entry.source);

    match (entry.source, entry.sled) {
        (Source::McountLoc | Source::ReturnLoc, _) => {
            let wanted: &[Hook] = if source == Source::ReturnLoc {
                &[Hook::Return]
            } else {
                &[Hook::Fentry, Hook::Mcount]
            };
            let names = if source == Source::ReturnLoc {
                "__return__"
            } else {
                "__fentry__ or mcount"
            };
            if let Some(call) = cx.image.isa.decode_call(code, address) {
                return match cx.hook_of_call(section, address, call) {
                    Some((len, hook)) if wanted.contains(&hook) => Ok(cx.site(
                        section,
                        address,
                        &code[..len],
                        hook_kind(hook),
                        source,
                        Form::Call,
                    )),
                    _ => {
                        let target = if cx.image.relocatable() {
                            "a function other than".to_string()
                        } else {
                            cx.hooks.describe(call.target, cx.image, cx.functions) + ", not"
                        };
                        Err(reject(format!("a call to {target} {names}")))
                    }
                };
            }
            // -mnop-mcount and -minstrument-return=nop5: one 5-byte NOP.
            if cx.image.isa.nop_run(code, 5) == (1, 5) {
                let kind = if source == Source::ReturnLoc {
                    SiteKind::Return
                } else {
                    entry_kind_by_position(cx, section, address)
                };
                return Ok(cx.site(
                    section,
                    address,
                    &code[..5],
                    kind,
                    source,
                    Form::Nops { insns: 1 },
                ));
            }
            Err(reject(format!(
                "expected a call to {names} or a 5-byte NOP, found {}",
                shown()
            )))
        }
        (Source::PatchableFunctionEntries, _) => {
            let (insns, len) = cx.image.isa.nop_run(code, MAX_PATCHABLE_BYTES);
            if len == 0 {
                return Err(reject(format!("expected NOPs, found {}", shown())));
            }
            let form = Form::Nops { insns: insns as u16 };
            let mut site = cx.site(section, address, &code[..len], SiteKind::Patchable, source, form);
            // -fpatchable-function-entry=N,M puts M bytes before the entry;
            // gcc 12 on MIPS puts all N there, whatever M says (the function
            // starts right after the run, and calls never run it).
            let end = address.saturating_add(len as u64);
            if let Some(f) = cx
                .functions
                .starting_between(section, address, end.saturating_add(1))
            {
                site.prefix = (cx.functions.functions[f].address - address) as u8;
                site.function = Some(f);
            }
            Ok(site)
        }
        (Source::XrayInstrMap, Some(sled)) => {
            let len = cx
                .image
                .isa
                .xray_sled(sled, code)
                .map_err(|why| reject(format!("{why}, found {}", shown())))?;
            let kind = match sled {
                SledKind::Entry => SiteKind::XrayEntry,
                SledKind::Exit => SiteKind::XrayExit,
                SledKind::Tail => SiteKind::XrayTail,
            };
            let mut site = cx.site(section, address, &code[..len], kind, source, Form::XraySled);
            if let Some(f) = entry.function.and_then(|a| cx.functions.at(section, a)) {
                site.function = Some(f);
            }
            Ok(site)
        }
        _ => Err(reject("not a table entry".into())),
    }
}

pub(crate) fn hook_kind(hook: Hook) -> SiteKind {
    match hook {
        Hook::Fentry => SiteKind::Fentry,
        Hook::Mcount => SiteKind::Mcount,
        Hook::Return => SiteKind::Return,
    }
}

/// A NOP recorded in `__mcount_loc` is an fentry site if it is the first
/// instruction of its function (after a landing pad), an mcount site if it
/// follows the prologue.
fn entry_kind_by_position(cx: &Context<'_, '_>, section: usize, address: u64) -> SiteKind {
    let Some(f) = cx
        .functions
        .containing(section, address)
        .map(|i| &cx.functions.functions[i])
    else {
        return SiteKind::Fentry;
    };
    let pad = cx
        .image
        .code(section, f.address)
        .map_or(0, |c| cx.image.isa.landing_pad_len(c));
    if address == f.address.wrapping_add(pad as u64) {
        SiteKind::Fentry
    } else {
        SiteKind::Mcount
    }
}
