//! Unit tests of the site records and their commit (`state.rs`): a page of
//! real code with four 5-byte NOP sites, patched by `State::apply` with
//! plain writes (no other thread runs it), each change committed once with
//! what the batch did.

use fntrace_arch::{Code, Shape};
use fntrace_core::{Module, Ops as CoreOps, OpsFlags, Role, Target};
use fntrace_filter::Filter;
use fntrace_sites::SiteKind;

use crate::error::Error;
use crate::modules::Loaded;
use crate::ops::RawOps;
use crate::routines::Regs;
use crate::state::{ModState, Record, Site, State};
use crate::sys::SyncMethod;

const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];
const SITES: usize = 4;

/// A page of code: a site every 16 bytes, `ret` elsewhere; its address.
fn code_page() -> usize {
    // SAFETY: a fresh anonymous mapping, filled while writable, then made
    // read + execute as a module's code is.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let bytes = std::slice::from_raw_parts_mut(p as *mut u8, 4096);
        bytes.fill(0xc3);
        for i in 0..SITES {
            bytes[16 * i..16 * i + 5].copy_from_slice(&NOP5);
        }
        assert_eq!(libc::mprotect(p, 4096, libc::PROT_READ | libc::PROT_EXEC), 0);
        p as usize
    }
}

/// The 5 bytes at `addr`.
fn bytes_at(addr: usize) -> [u8; 5] {
    // SAFETY: `addr` is in the test's code page, readable.
    unsafe { *(addr as *const [u8; 5]) }
}

/// Writes `bytes` at `addr` in the code page, as another party would.
fn scribble(base: usize, addr: usize, bytes: &[u8]) {
    // SAFETY: the test's own page, made writable for the write only.
    unsafe {
        let p = base as *mut libc::c_void;
        assert_eq!(libc::mprotect(p, 4096, libc::PROT_READ | libc::PROT_WRITE), 0);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len());
        assert_eq!(libc::mprotect(p, 4096, libc::PROT_READ | libc::PROT_EXEC), 0);
    }
}

unsafe extern "C" fn entry(_: usize, _: usize, _: *mut RawOps, _: *mut Regs) {}

/// A state with one module: the code page and its four sites.
fn state_with_page() -> (State, usize) {
    let base = code_page();
    let patcher = &fntrace_arch::NATIVE_PATCHER;
    let mut state = State::new(patcher, SyncMethod::Mprotect, false);
    let nop = Code::new(&NOP5).expect("5 bytes");
    let records: Vec<Record> = (0..SITES)
        .map(|i| {
            let site = Site {
                addr: base + 16 * i,
                shape: Shape::Inline,
                kind: SiteKind::Patchable,
                cur: nop,
                fid: i as u32,
                slot: 0,
            };
            Record::with(Some(i as u32), Role::Entry, site)
        })
        .collect();
    let loaded = Loaded {
        path: "/nowhere/libtest.so".into(),
        bias: base,
        exec: vec![(base, base + 4096, libc::PROT_READ | libc::PROT_EXEC)],
        main: false,
    };
    let module = ModState::new(loaded, &records, 0, Vec::new(), None);
    let names = (0..SITES).map(|i| format!("f{i}")).collect();
    let (id, changes) = state.core.add_module(Module::new("libtest.so", names, records));
    assert!(changes.is_empty(), "no ops yet: nothing to change");
    state.mods.resize_with(id + 1, || None);
    state.mods[id] = Some(module);
    (state, base)
}

/// Registers an ops selecting `patterns` with the core; its id.
fn register(state: &mut State, patterns: &[&str]) -> u8 {
    let raw = RawOps::leak(Some(entry), None, std::ptr::null_mut(), 0, None);
    let ops = CoreOps {
        flags: OpsFlags {
            entry: true,
            ..Default::default()
        },
        filter: Filter::parse(patterns).expect("filter"),
        notrace: Filter::parse::<&str>(&[]).expect("filter"),
    };
    let (id, changes) = state.core.register(ops).expect("register");
    state.by_id[id as usize] = Some(raw);
    state.apply(changes).expect("applied");
    id
}

fn record(state: &State, i: usize) -> Record {
    state.core.module(0).expect("module").sites[i]
}

fn wanted_word(state: &State, i: usize) -> u64 {
    let words = state.mods[0].as_ref().expect("module").words;
    words.wanted[i].load(std::sync::atomic::Ordering::Acquire)
}

#[test]
fn applied_changes_are_in_memory_and_committed_once() {
    let (mut state, _) = state_with_page();
    let id = register(&mut state, &["f1", "f3"]);
    for i in 0..SITES {
        let r = record(&state, i);
        let wanted = i % 2 == 1;
        assert_eq!(
            r.data.cur.as_slice(),
            bytes_at(r.data.addr),
            "site {i}: the record holds the bytes in memory"
        );
        assert_eq!(
            r.in_effect,
            if wanted { Target::Ops(id) } else { Target::Nop },
            "site {i}"
        );
        assert_eq!(r.published, if wanted { 1 << id } else { 0 }, "site {i}");
        assert_eq!(
            wanted_word(&state, i),
            r.published,
            "site {i}: the list's word is the record's"
        );
        assert!(!r.failed);
        if wanted {
            assert_eq!(bytes_at(r.data.addr)[0], 0xe8, "site {i}: a call");
        } else {
            assert_eq!(bytes_at(r.data.addr), NOP5, "site {i}: untouched");
        }
    }
    assert_eq!(state.stats.batches, 1, "one batch for the module");
    assert_eq!(state.stats.refused, 0);
}

#[test]
fn a_refused_change_keeps_what_is_in_effect_and_its_published_set() {
    let (mut state, base) = state_with_page();
    let id = register(&mut state, &["*"]);
    // Someone else changed site 2 since: its expected bytes are gone.
    let foreign = [0x66, 0x0f, 0x1f, 0x44, 0x00];
    scribble(base, record(&state, 2).data.addr, &foreign);
    let changes = state.core.unregister(id).expect("unregister");
    assert_eq!(changes.len(), SITES);
    match state.apply(changes) {
        Err(Error::Refused { count: 1, .. }) => {}
        other => panic!("expected one refusal, got {other:?}"),
    }
    for i in 0..SITES {
        let r = record(&state, i);
        assert_eq!(
            r.data.cur.as_slice(),
            bytes_at(r.data.addr),
            "site {i}: the record holds the bytes in memory"
        );
        if i == 2 {
            assert!(r.failed, "a refused site is left alone from now on");
            assert_eq!(r.in_effect, Target::Ops(id), "what was in effect stays recorded");
            assert_eq!(r.published, 1 << id);
            assert_eq!(
                wanted_word(&state, i),
                1 << id,
                "the list's word goes back to the published set"
            );
            assert_eq!(bytes_at(r.data.addr), foreign);
        } else {
            assert!(!r.failed);
            assert_eq!(r.in_effect, Target::Nop);
            assert_eq!(r.published, 0);
            assert_eq!(wanted_word(&state, i), 0);
            assert_eq!(bytes_at(r.data.addr), NOP5);
        }
    }
    assert_eq!(state.stats.refused, 1);
}

#[test]
fn a_site_keeps_its_per_site_slot() {
    fn own_slot(_: &RawOps, site: &crate::ops::SlotSite) -> Option<(usize, usize)> {
        Some((
            site.fid as usize,
            crate::routines::routine(crate::routines::Variant {
                role: site.role,
                regs: false,
            }),
        ))
    }
    let (mut state, _) = state_with_page();
    let raw = RawOps::leak(Some(entry), None, std::ptr::null_mut(), 0, Some(own_slot));
    let everything = || CoreOps {
        flags: OpsFlags {
            entry: true,
            ..Default::default()
        },
        filter: Filter::parse(&["*"]).expect("filter"),
        notrace: Filter::parse::<&str>(&[]).expect("filter"),
    };
    let (id, changes) = state.core.register(everything()).expect("register");
    state.by_id[id as usize] = Some(raw);
    state.apply(changes).expect("applied");
    let slots: Vec<usize> = (0..SITES).map(|i| record(&state, i).data.slot).collect();
    assert!(
        slots.iter().all(|&s| s != 0),
        "every site got a slot of its own: {slots:x?}"
    );
    let mut distinct = slots.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), SITES, "one per site");
    // Off and on again: the same slots.
    let changes = state.core.unregister(id).expect("unregister");
    state.apply(changes).expect("applied");
    let (id, changes) = state.core.register(everything()).expect("register");
    state.by_id[id as usize] = Some(raw);
    state.apply(changes).expect("applied");
    let again: Vec<usize> = (0..SITES).map(|i| record(&state, i).data.slot).collect();
    assert_eq!(again, slots);
}

/// The record stays small: 100,000 of them are walked by every register
/// and unregister (at 96 bytes, registering on 100,000 sites took 5.36 ms against 4.81 at 80: BENCHMARKS.md).
#[test]
fn a_site_record_fits_in_80_bytes() {
    assert!(
        std::mem::size_of::<Record>() <= 80,
        "{} bytes",
        std::mem::size_of::<Record>()
    );
}
