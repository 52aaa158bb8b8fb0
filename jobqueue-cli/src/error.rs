//! Errors of the command line.

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// An argument is invalid, or something the command needs is missing:
    /// the message says which and what to do.
    #[error("{0}")]
    Usage(String),
    /// A queue operation failed.
    #[error(transparent)]
    Queue(#[from] jobqueue_core::Error),
    /// The runner could not start.
    #[error(transparent)]
    Runner(#[from] jobqueue_runner::RunnerError),
    /// Threads of the runner panicked (a defect in the runner; the log has
    /// the panic). Their jobs are recovered when their leases expire.
    #[error("runner threads panicked: {}", .0.join(", "))]
    RunnerPanicked(Vec<String>),
    /// The SIGINT/SIGTERM handlers of `work` could not be installed.
    #[error("cannot install the signal handlers: {0}")]
    Signals(std::io::Error),
    /// A command added to the command line by its binary (see
    /// [`crate::Extra`]) failed.
    #[error(transparent)]
    Extra(Box<dyn std::error::Error + Send + Sync>),
}
