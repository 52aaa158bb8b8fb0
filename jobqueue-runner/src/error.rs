//! Errors of the runner.

/// Why a runner could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// A queue operation failed.
    #[error(transparent)]
    Queue(#[from] jobqueue_core::Error),
    /// The configuration is invalid: the message names the field.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The operating system refused to start one of the runner's threads.
    #[error("cannot start a thread: {0}")]
    Thread(#[from] std::io::Error),
}
