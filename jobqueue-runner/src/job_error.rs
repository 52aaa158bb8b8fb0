//! What a handler returns when a job did not succeed.

use std::fmt;

/// The failure of one attempt, as the handler describes it.
///
/// Any error type converts into [`JobError::Retry`] with `?`, so a handler
/// can propagate errors as usual; use [`JobError::permanent`] when retrying
/// cannot help.
#[derive(Debug)]
pub enum JobError {
    /// The attempt failed; retry after the backoff while attempts remain.
    Retry(String),
    /// The job can never succeed: `failed` at once, whatever attempts remain.
    Permanent(String),
    /// The handler stopped because the job was cancelled: `cancelled`.
    Cancelled,
    /// The worker no longer holds the job (its lease expired and it was
    /// recovered); nothing the handler did through the runner counted.
    LeaseLost,
}

impl JobError {
    /// A failure worth retrying.
    pub fn retry(error: impl fmt::Display) -> Self {
        JobError::Retry(error.to_string())
    }

    /// A failure retrying cannot fix.
    pub fn permanent(error: impl fmt::Display) -> Self {
        JobError::Permanent(error.to_string())
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Retry(e) => write!(f, "{e}"),
            JobError::Permanent(e) => write!(f, "{e} (permanent)"),
            JobError::Cancelled => f.write_str("cancelled"),
            JobError::LeaseLost => {
                f.write_str("lease lost: the job was recovered by another worker")
            }
        }
    }
}

impl<E: std::error::Error> From<E> for JobError {
    fn from(error: E) -> Self {
        JobError::Retry(error.to_string())
    }
}
