//! The fntrace trace format.
//!
//! Not built yet: this crate is the place for issue #4 (tracers and the
//! recording pipeline): compact per-thread event records (a function id and
//! a time delta, 8 bytes on average), the `fntrace.data/` directory layout
//! (events per thread, symbol tables of traced modules, command line, clock
//! calibration, format version) and its readers, which read a truncated or
//! corrupt directory up to the damage. See `docs/ARCHITECTURE.md`.
#![forbid(unsafe_code)]
