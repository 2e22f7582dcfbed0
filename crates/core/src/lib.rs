//! The generic core of fntrace's dynamic patching, after the kernel's
//! `kernel/trace/ftrace.c`: a record per site with the set of ops that want
//! it and what is in effect, the ops (clients with a callback and a filter),
//! and the pure decision of what each site must call. It never touches
//! memory: it turns registrations and filter changes into [`Change`]s, which
//! the runtime applies in one batch through the arch layer's verbs and then
//! commits.
#![forbid(unsafe_code)]

mod core;
mod decide;
mod model;

pub use crate::core::{wanted_ops, Core, CoreError};
pub use decide::{bits, decide};
pub use model::{Change, Module, ModuleId, Ops, OpsFlags, OpsId, Role, SiteRecord, Target, MAX_OPS};

#[cfg(test)]
mod tests;
