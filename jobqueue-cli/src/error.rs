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
    /// The application's state for `work`'s handlers could not be built
    /// ([`crate::Cli::state_with`]): its own error, as it said it.
    #[error("building the application's state for the handlers: {0}")]
    State(Box<dyn std::error::Error + Send + Sync>),
    /// The SIGINT/SIGTERM handlers of `work` could not be installed.
    #[error("cannot install the signal handlers: {0}")]
    Signals(std::io::Error),
    /// Writing the output failed: most often its reader went away (a
    /// closed pipe, see [`CliError::is_closed_pipe`]), which ends the
    /// command quietly with exit code 0.
    #[error("cannot write the output: {0}")]
    Output(std::io::Error),
    /// A command added to the command line by its binary (see
    /// [`crate::Extra`]) failed.
    #[error(transparent)]
    Extra(Box<dyn std::error::Error + Send + Sync>),
}

/// The exit code of success, and of a command whose reader went away.
pub const EXIT_SUCCESS: u8 = 0;
/// The exit code of a command that ran and failed: a `doctor` check failed,
/// the database's state refused the command (a job already finished, the
/// schema missing), the runner failed.
pub const EXIT_FAILED: u8 = 1;
/// The exit code of a wrong command line: nothing was done.
pub const EXIT_BAD_INPUT: u8 = 2;
/// The exit code of a command that could not reach its database: the
/// connection could not be made (refused, timed out, the name unknown, the
/// password refused) or was lost on the way.
pub const EXIT_UNREACHABLE: u8 = 3;

impl CliError {
    /// The process's exit code for this error: [`EXIT_BAD_INPUT`] (2) when
    /// the command line itself is wrong (a bad flag value or argument, an
    /// unknown job type, a payload that does not fit its type: refused
    /// before anything was written), [`EXIT_UNREACHABLE`] (3) when the
    /// database could not be reached, [`EXIT_SUCCESS`] (0) when the
    /// output's reader went away ([`CliError::is_closed_pipe`]), and
    /// [`EXIT_FAILED`] (1) for everything else (a failed check, the state
    /// of a job, the runner).
    pub fn exit_code(&self) -> u8 {
        use jobqueue_core::Error as Queue;
        if self.is_closed_pipe() {
            return EXIT_SUCCESS;
        }
        if self.is_unreachable() {
            return EXIT_UNREACHABLE;
        }
        match self {
            CliError::Usage(_)
            | CliError::Queue(
                Queue::InvalidOption { .. }
                | Queue::UnknownQueue { .. }
                | Queue::UnknownSchedule { .. }
                | Queue::UnknownJobType { .. }
                | Queue::Deserialize { .. }
                | Queue::Serialize { .. }
                | Queue::PayloadTooLarge { .. }
                | Queue::Refused { .. },
            )
            | CliError::Runner(
                jobqueue_runner::RunnerError::Config(_)
                | jobqueue_runner::RunnerError::Queue(
                    Queue::InvalidOption { .. } | Queue::UnknownJobType { .. },
                ),
            ) => EXIT_BAD_INPUT,
            _ => EXIT_FAILED,
        }
    }

    /// Whether the output's reader went away before the command finished
    /// writing (`jobqueue list | head -1`): not a failure, so the command
    /// ends quietly, with exit code 0, as many command-line tools do.
    pub fn is_closed_pipe(&self) -> bool {
        matches!(self, CliError::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// Whether the database could not be reached: no connection could be
    /// made, or the one made was lost.
    pub fn is_unreachable(&self) -> bool {
        let queue = match self {
            CliError::Queue(queue)
            | CliError::Runner(jobqueue_runner::RunnerError::Queue(queue)) => queue,
            _ => return false,
        };
        matches!(
            queue,
            jobqueue_core::Error::Connection(_)
                | jobqueue_core::Error::Database(diesel::result::Error::DatabaseError(
                    diesel::result::DatabaseErrorKind::ClosedConnection,
                    _
                ))
        )
    }
}
