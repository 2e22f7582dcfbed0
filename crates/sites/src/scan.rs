//! Finding sites that no table records: recordmcount's job, done at read
//! time. Relocatable objects: every relocation against a hook at a call.
//! Linked files: every call to a hook in the code of functions that have no
//! entry site from a table (so a file that mixes objects with and without a
//! table is covered too, and a fully recorded file costs nothing).
//!
//! Linked files also get back the patchable entries that a table lost:
//! gcc 12 links the `__patchable_function_entries` piece of a whole
//! translation unit to its first function, so when that function is a
//! COMDAT copy the linker discards, the entries of every function of the
//! unit go with it (any C++ unit whose first function is an inline one).
//! Where all recorded entries share one shape (N bytes of NOPs, M of them
//! before the entry), a function without an entry site that has exactly
//! that NOP run at `entry - M` is such a site. Replacing a run of NOPs is
//! safe whatever put it there.

use crate::classify::{hook_kind, Context};
use crate::model::{Form, Site, SiteKind, Source};

/// Sections that hold PLT stubs rather than functions.
fn is_plt(name: &str) -> bool {
    name.starts_with(".plt") || name == ".iplt"
}

/// The sites found by scanning, that `known` does not hold yet.
pub(crate) fn scan(cx: &Context<'_, '_>, known: &[Site]) -> Vec<Site> {
    let mut found = hook_calls(cx, known);
    if !cx.image.relocatable() {
        let lost = lost_patchable_entries(cx, &[known, &found]);
        found.extend(lost);
    }
    found
}

/// For each function, whether it has an entry site in `known`.
fn covered(known: &[&[Site]], functions: usize) -> Vec<bool> {
    let mut covered = vec![false; functions];
    let sites = known.iter().flat_map(|k| k.iter());
    for f in sites.filter(|s| s.kind.is_entry()).filter_map(|s| s.function) {
        covered[f] = true;
    }
    covered
}

/// The places of `known`, sorted, to look up with `binary_search`.
fn places(known: &[Site]) -> Vec<(usize, u64)> {
    let mut at: Vec<(usize, u64)> = known.iter().map(|s| (s.section, s.address)).collect();
    at.sort_unstable();
    at
}

/// Calls to hooks that no table records.
fn hook_calls(cx: &Context<'_, '_>, known: &[Site]) -> Vec<Site> {
    let mut found = Vec::new();
    if cx.hooks.is_empty() {
        return found;
    }
    let at = places(known);

    if cx.image.relocatable() {
        for (section, offset, len, hook) in cx.hooks.relocated_calls() {
            if at.binary_search(&(section, offset)).is_ok() {
                continue;
            }
            if let Some(code) = cx.image.code(section, offset) {
                let len = usize::from(len).min(code.len());
                found.push(cx.site(
                    section,
                    offset,
                    &code[..len],
                    hook_kind(hook),
                    Source::Relocation,
                    Form::Call,
                ));
            }
        }
        return found;
    }

    let mut scan_range = |section: usize, start: u64, code: &[u8]| {
        // Decoding is for the code that may call a hook at all.
        if !cx
            .image
            .isa
            .may_call(code, start, &mut |target| cx.hooks.linked_call(target).is_some())
        {
            return;
        }
        cx.image.isa.for_each_call(code, start, &mut |address, call| {
            let Some(hook) = cx.hooks.linked_call(call.target) else {
                return;
            };
            if at.binary_search(&(section, address)).is_ok() {
                return;
            }
            let offset = (address - start) as usize;
            let len = usize::from(call.len);
            found.push(cx.site(
                section,
                address,
                &code[offset..offset + len],
                hook_kind(hook),
                Source::CodeScan,
                Form::Call,
            ));
        });
    };

    if cx.functions.functions.is_empty() {
        // No symbols at all (stripped): sweep the code sections.
        for (index, section) in cx.image.code_sections() {
            if !is_plt(&section.name) {
                scan_range(index, section.address, section.data);
            }
        }
        return found;
    }
    let covered = covered(&[known], cx.functions.functions.len());
    for (i, f) in cx.functions.functions.iter().enumerate() {
        if covered[i] || cx.image.section(f.section).is_some_and(|s| is_plt(&s.name)) {
            continue;
        }
        let Some(code) = cx.image.code(f.section, f.address) else {
            continue;
        };
        let body = &code[..code.len().min(usize::try_from(f.size).unwrap_or(usize::MAX))];
        scan_range(f.section, f.address, body);
    }
    found
}

/// Patchable entries missing from the table (see the module comment).
fn lost_patchable_entries(cx: &Context<'_, '_>, known: &[&[Site]]) -> Vec<Site> {
    let mut recorded = known
        .iter()
        .flat_map(|k| k.iter())
        .filter(|s| s.source == Source::PatchableFunctionEntries);
    let Some(first) = recorded.next() else {
        return Vec::new();
    };
    let (len, prefix) = (first.len(), first.prefix);
    // A run wholly before the entry (gcc 12 on MIPS) cannot be told from
    // the padding before any function: zero words are NOPs there.
    if first.before_entry() || recorded.any(|s| s.len() != len || s.prefix != prefix) {
        return Vec::new();
    }
    let covered = covered(known, cx.functions.functions.len());
    let mut found = Vec::new();
    for (i, f) in cx.functions.functions.iter().enumerate() {
        if covered[i] || cx.image.section(f.section).is_some_and(|s| is_plt(&s.name)) {
            continue;
        }
        let Some(start) = f.address.checked_sub(u64::from(prefix)) else {
            continue;
        };
        let Some(code) = cx.image.code(f.section, start) else {
            continue;
        };
        let (insns, run) = cx.image.isa.nop_run(code, crate::classify::MAX_PATCHABLE_BYTES);
        if run != len {
            continue;
        }
        let form = Form::Nops { insns: insns as u16 };
        let mut site = cx.site(
            f.section,
            start,
            &code[..len],
            SiteKind::Patchable,
            Source::CodeScan,
            form,
        );
        site.prefix = prefix;
        site.function = Some(i);
        found.push(site);
    }
    found
}
