//! Lock-free lookup from a callback's `ip` to its site: which ops want it
//! (for the list dispatcher) and which function it is (for clients). An
//! immutable, sorted snapshot is published through an atomic pointer and
//! replaced when a module comes or goes; old snapshots are kept (a reader
//! may still be in one), which costs a few bytes per `dlopen`.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Per-site words a module shares with the lock-free readers.
#[derive(Debug)]
pub struct SiteWords {
    /// The ops that want each site (mirrors the core's `wanted`).
    pub wanted: Box<[AtomicU64]>,
    /// Calls counted by the built-in counting client.
    pub hits: Box<[AtomicU64]>,
    /// Each site's function id.
    pub fid: Box<[u32]>,
}

impl SiteWords {
    /// Words for sites of these function ids, leaked (modules' words live forever).
    pub fn leak(fid: Vec<u32>) -> &'static SiteWords {
        let n = fid.len();
        Box::leak(Box::new(SiteWords {
            wanted: (0..n).map(|_| AtomicU64::new(0)).collect(),
            hits: (0..n).map(|_| AtomicU64::new(0)).collect(),
            fid: fid.into_boxed_slice(),
        }))
    }
}

/// One site in the snapshot.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The `ip` callbacks get for the site.
    pub ip: usize,
    /// Core module id.
    pub module: u32,
    /// Site index in the module.
    pub site: u32,
    /// The module's shared words.
    pub words: &'static SiteWords,
}

/// A snapshot: entries sorted by `ip`.
#[derive(Debug, Default)]
pub struct Snapshot {
    entries: Vec<Entry>,
}

static CURRENT: AtomicPtr<Snapshot> = AtomicPtr::new(std::ptr::null_mut());

/// Publishes a new snapshot of `entries`.
pub fn publish(mut entries: Vec<Entry>) {
    entries.sort_unstable_by_key(|e| e.ip);
    let snapshot: &'static Snapshot = Box::leak(Box::new(Snapshot { entries }));
    CURRENT.store(snapshot as *const Snapshot as *mut Snapshot, Ordering::Release);
}

/// The site whose callback `ip` this is.
pub fn lookup(ip: usize) -> Option<Entry> {
    let ptr = CURRENT.load(Ordering::Acquire);
    if ptr.is_null() {
        return None;
    }
    // SAFETY: published snapshots are leaked, never freed.
    let snapshot = unsafe { &*ptr };
    let i = snapshot.entries.binary_search_by_key(&ip, |e| e.ip).ok()?;
    Some(snapshot.entries[i])
}

/// The ops that want the site of `ip` (0 if unknown).
pub fn wanted(ip: usize) -> u64 {
    lookup(ip).map_or(0, |e| e.words.wanted[e.site as usize].load(Ordering::Acquire))
}
