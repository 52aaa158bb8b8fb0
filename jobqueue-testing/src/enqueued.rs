//! A job found enqueued: its payload decoded as its type, and its row.

use chrono::{DateTime, Utc};
use jobqueue_core::{JobId, JobRow, JobStatus};

/// A job of type `T` found in the database: its payload decoded, and the
/// row it was read from (queue, priority, when due, unique key, status...).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EnqueuedJob<T> {
    /// The payload, decoded as `T`.
    pub job: T,
    /// The row as read.
    pub row: JobRow,
}

impl<T> EnqueuedJob<T> {
    pub(crate) fn new(job: T, row: JobRow) -> Self {
        EnqueuedJob { job, row }
    }

    /// The job's id.
    pub fn id(&self) -> JobId {
        self.row.id
    }

    /// Its queue.
    pub fn queue(&self) -> &str {
        &self.row.queue
    }

    /// Its priority.
    pub fn priority(&self) -> i32 {
        self.row.priority
    }

    /// When it is (or was) due.
    pub fn due_at(&self) -> DateTime<Utc> {
        self.row.run_at
    }

    /// Its unique key, if any.
    pub fn unique_key(&self) -> Option<&str> {
        self.row.unique_key.as_deref()
    }

    /// Its status.
    pub fn status(&self) -> JobStatus {
        self.row.status
    }
}
