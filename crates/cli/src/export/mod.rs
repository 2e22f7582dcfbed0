//! Exports of a trace for other tools, one module per format: among them
//! Chrome trace events ([`chrome`]), folded stacks ([`folded`]) and flame
//! charts ([`chart`]) over the stack tree of [`stacks`], written through a
//! [`sink`] (a file replaced whole or not at all) with a [`progress`] bar.

pub mod chart;
pub mod chrome;
pub mod firefox;
pub mod folded;
pub mod perfetto;
pub mod progress;
pub mod sink;
pub mod stacks;
