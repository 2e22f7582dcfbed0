//! The fntrace runtime: a `cdylib` that `fntrace record` loads into the
//! traced program with `LD_PRELOAD`.
//!
//! Not built yet: this crate is the place for issue #3 (the dynamic patching
//! core). It will, before `main`, discover the sites of the executable and
//! of every loaded library with `fntrace-sites`, turn each into the canonical
//! NOP of its length, and patch sites live (int3 + `membarrier` sync-core,
//! as the kernel's `text_poke_bp` does) for the functions a filter selects.
//! All of the project's `unsafe` code and code patching will live here and
//! nowhere else. See `docs/ARCHITECTURE.md`.
