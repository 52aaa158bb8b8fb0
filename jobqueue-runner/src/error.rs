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
    /// The database's jobqueue schema is missing or behind this library:
    /// the migrations it has not applied, by name.
    #[error(
        "the database's jobqueue schema is missing or behind this library ({} migration(s) \
         pending: {}): run `jobqueue migrate` (or jobqueue::run_migrations) first",
        .0.len(),
        .0.join(", ")
    )]
    Schema(Vec<String>),
    /// The metrics address could not be bound (taken, or not this
    /// machine's).
    #[error(
        "cannot serve metrics on {addr}: {reason} (choose another address with --metrics-addr, or leave metrics off)"
    )]
    Metrics {
        /// The address given.
        addr: std::net::SocketAddr,
        /// Why it could not be bound.
        reason: String,
    },
    /// The operating system refused to start one of the runner's threads.
    #[error("cannot start a thread: {0}")]
    Thread(#[from] std::io::Error),
}
