//! Errors of the runtime's API.

use fntrace_core::CoreError;
use fntrace_filter::FilterError;

/// Why a runtime request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The runtime could not set up in this process.
    #[error("fntrace is not active in this process: {0}")]
    NotActive(String),
    /// A bad filter pattern.
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// The core refused.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The ops is already registered.
    #[error("the ops is already registered")]
    AlreadyRegistered,
    /// The ops is not registered.
    #[error("the ops is not registered")]
    NotRegistered,
    /// Some sites were refused (their bytes were not the expected ones, or
    /// their code could not be written); the others were patched.
    #[error("{count} site(s) refused; first: {first}")]
    Refused {
        /// How many.
        count: usize,
        /// The first refusal, with the site, expected and actual bytes.
        first: String,
    },
}

/// Result of runtime requests.
pub type Result<T, E = Error> = std::result::Result<T, E>;
