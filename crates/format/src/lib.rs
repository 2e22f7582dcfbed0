//! The fntrace trace format: `docs/FORMAT.md` in code.
//!
//! Writing side (used by the runtime, a `cdylib` inside traced programs):
//! pure functions and plain structs, no I/O policy —
//! - [`event`]: event words (`delta | fid | kind`), encoded and decoded;
//! - [`chunk`]: the 32-byte chunk header;
//! - [`write`](mod@write): whole chunks built in memory (tools and tests);
//! - [`layout`]: file and directory names of `fntrace.data/`;
//! - [`limits`]: how large a thread's buffer may be;
//! - [`settings`]: every `FNTRACE_*` variable and the tracer's
//!   [`Settings`] the CLI gives the runtime, both ways;
//! - [`control`]: the control channel's requests and answers (the runtime
//!   serves them, `fntrace attach` and `ctl` send them);
//! - [`args`]: what `-A`/`-R` ask to record, and [`values`]: the
//!   recorded values of a call;
//! - [`units`]: sizes and durations as people type them (`4M`, `1.5ms`);
//! - [`meta`]: `info.json`, `process.json` (with the [`Clock`]),
//!   `functions.tsv` and `profile.tsv` lines;
//! - [`replace`](mod@replace): rewriting `info.json` and `process.json`,
//!   atomically, or in place on a full disk.
//!
//! Reading side (used by the CLI):
//! - [`read`]: [`open`] a data directory into a [`Trace`], stream a
//!   thread's [`Event`]s, with damage notes instead of failures wherever the
//!   data allows;
//! - [`calls`]: events turned into [`Call`]s with self times;
//! - [`stack`]: the calls a thread has open, bounded, for every reader.
//!
//! Malformed input gives an error or a damage note, never a panic.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod args;
pub mod calls;
pub mod chunk;
pub mod control;
pub mod event;
pub mod layout;
pub mod limits;
pub mod meta;
pub mod read;
pub mod replace;
pub mod settings;
pub mod stack;
pub mod units;
pub mod values;
pub mod write;

pub use calls::{Call, CallBuilder, End};
pub use chunk::ChunkHeader;
pub use event::Kind;
pub use meta::{Clock, FunctionEntry, ModuleInfo, ProcessInfo, ProfileRow, RunInfo};
pub use read::{
    open, Event, EventKind, FormatError, Functions, Losses, Process, RawEvents, RawItem, ThreadEvents, Trace,
};
pub use settings::Settings;
pub use stack::CallStack;
pub use write::ChunkBuilder;
