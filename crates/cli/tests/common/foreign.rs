//! fntrace built for another machine: `fntrace_testkit::cross`.

pub use fntrace_testkit::cross::*;
