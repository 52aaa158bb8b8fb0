//! Errors of the demo, the bench and the server helpers.

use jobqueue_runner::RunnerError;

use crate::postgres::ServerError;

/// Why the demo or the bench failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// An argument is invalid: the message says which and what to do.
    #[error("{0}")]
    Usage(String),
    /// A queue operation or a query failed.
    #[error(transparent)]
    Queue(#[from] jobqueue_core::Error),
    /// A runner could not start.
    #[error(transparent)]
    Runner(#[from] RunnerError),
    /// No PostgreSQL server could be found or started.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A process (the footprint's runner, a `getconf`) could not be started
    /// or read.
    #[error("cannot run a process or read its state: {0}")]
    Process(#[from] std::io::Error),
}
