//! Errors of the runner and the CLI.

/// Why the runner could not start or a command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// A queue operation failed.
    #[error(transparent)]
    Queue(#[from] jobqueue_core::Error),
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// No PostgreSQL server could be found or started.
    #[error(transparent)]
    Server(#[from] crate::postgres::ServerError),
    /// A thread could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(#[from] std::io::Error),
    /// A command-line argument is invalid.
    #[error("{0}")]
    Usage(String),
}
