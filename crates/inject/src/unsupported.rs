//! The tracee on a machine where injection is not implemented (anything
//! but x86-64): the same interface as `tracee.rs`, whose every way in is
//! the one-line [`InjectError::Architecture`]. Nothing here is untested
//! code that would run: [`Tracee::stop`] never returns a tracee.

use std::convert::Infallible;
use std::time::Duration;

use super::InjectError;

/// An argument of an injected call (made by the callers, never read
/// here).
#[allow(dead_code)]
pub(super) enum Arg<'a> {
    Int(u64),
    Str(&'a [u8]),
}

/// A stopped thread: none can exist here.
pub(super) struct Tracee {
    never: Infallible,
}

impl Tracee {
    /// Refuses: injection is x86-64 only.
    pub(super) fn stop(_pid: i32, _tid: i32) -> Result<Self, InjectError> {
        Err(InjectError::Architecture {
            arch: std::env::consts::ARCH,
        })
    }

    pub(super) fn pid(&self) -> i32 {
        match self.never {}
    }

    pub(super) fn call(
        &mut self,
        _name: &str,
        _function: u64,
        _args: &[Arg<'_>],
    ) -> Result<u64, InjectError> {
        match self.never {}
    }

    pub(super) fn read_c_string(&self, _address: u64) -> Result<Vec<u8>, InjectError> {
        match self.never {}
    }

    pub(super) fn release(self) -> Result<Duration, InjectError> {
        match self.never {}
    }
}
