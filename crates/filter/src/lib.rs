//! Which functions to trace: ftrace's filter syntax (`set_ftrace_filter`:
//! names, globs, `!pattern`, `PATTERN:mod:MODULE`) and the demangling of
//! symbol names that patterns are matched against.
//!
//! A crate of its own so that what selects functions can be used without
//! reading ELF files: the patching core (`fntrace-core`), the runtime's
//! tracers and the CLI's readers take it from here, and site discovery
//! (`fntrace-sites`) uses its globs and names functions with its
//! demangler.
#![forbid(unsafe_code)]

pub mod demangle;
mod filter;

pub use filter::{first_unmatched, first_unmatched_as, Filter, FilterError, Glob, Names, Syntax};
