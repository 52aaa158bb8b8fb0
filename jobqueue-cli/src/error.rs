//! Errors of the command line.

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// An argument is invalid, or something the command needs is missing:
    /// the message says which and what to do.
    #[error("{0}")]
    Usage(String),
    /// The command is well formed, but the database's state refuses it
    /// (a job already finished, a schema missing): the message says why.
    #[error("{0}")]
    Refused(String),
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

impl CliError {
    /// The process's exit code for this error: 2 when the command line
    /// itself is wrong (a bad flag value or argument, an unknown job type, a
    /// payload that does not fit its type: refused before anything was
    /// written), 1 for everything else (the database, the state of a job,
    /// the runner).
    pub fn exit_code(&self) -> u8 {
        use jobqueue_core::Error as Queue;
        match self {
            CliError::Usage(_)
            | CliError::Queue(
                Queue::InvalidOption { .. }
                | Queue::UnknownQueue { .. }
                | Queue::UnknownSchedule { .. }
                | Queue::UnknownJobType { .. }
                | Queue::Deserialize { .. }
                | Queue::Serialize { .. }
                | Queue::PayloadTooLarge { .. },
            )
            | CliError::Runner(
                jobqueue_runner::RunnerError::Config(_)
                | jobqueue_runner::RunnerError::Queue(
                    Queue::InvalidOption { .. } | Queue::UnknownJobType { .. },
                ),
            ) => 2,
            _ => 1,
        }
    }
}
