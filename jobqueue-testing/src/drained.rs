//! What a drain did: each job it worked, what its handler came to and what
//! the job became, and why the drain stopped.

use std::fmt;

use chrono::{DateTime, Utc};
use jobqueue_core::{Job, JobId, JobRow, JobStatus};
use jobqueue_runner::inline::{Outcome, Report};

use crate::listing::time;

/// What a drain did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Drained {
    /// The jobs worked, in the order they were worked: by round, and in
    /// each round in claim order (highest priority first, then due first).
    pub jobs: Vec<Worked>,
    /// Why the drain stopped.
    pub stop: Stop,
}

/// Why a drain stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stop {
    /// Nothing it would work is due any more.
    Empty,
    /// It worked its last round while jobs were still due: jobs its jobs
    /// enqueued, or retries and snoozes due by its time (see
    /// [`Drain::recursive`](crate::Drain::recursive)).
    Rounds,
    /// It worked as many jobs as it was allowed while others were still
    /// due (see [`Drain::stop_after`](crate::Drain::stop_after)).
    Jobs,
}

/// One job a drain worked (or found without a handler).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Worked {
    /// The job's id.
    pub id: JobId,
    /// Its type.
    pub job_type: String,
    /// Its queue.
    pub queue: String,
    /// Its payload.
    pub payload: serde_json::Value,
    /// The attempt it was (1 for the first).
    pub attempt: i32,
    /// The round of the drain that worked it, from 1.
    pub round: usize,
    /// What its handler came to ([`Outcome::Unhandled`] if no handler of
    /// the registry handles its type).
    pub outcome: Outcome,
    /// What the job became once the outcome was written.
    pub ended: Ended,
    /// Every progress report its handler made, in order.
    pub reports: Vec<Report>,
    /// A statement of its handler failed, so the handler's writes of this
    /// attempt were rolled back (see `jobqueue_runner::inline`).
    pub rolled_back: bool,
}

/// What a worked job became, as its row says once the outcome is written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// Completed (its row kept or deleted, as the retention says).
    Completed,
    /// The attempt failed and the job waits for its next one.
    Retried {
        /// The attempt's error.
        error: String,
        /// When the next attempt is due (the database's clock: inside a
        /// test transaction, counted from the transaction's start).
        due: DateTime<Utc>,
    },
    /// Failed for good (a permanent error, the last attempt, too many
    /// snoozes): the dead letter.
    Failed {
        /// The last error.
        error: String,
    },
    /// Snoozed: due again later, without using up an attempt.
    Snoozed {
        /// When it is due again.
        due: DateTime<Utc>,
    },
    /// Cancelled.
    Cancelled,
    /// Set aside as unhandled: no handler of the registry handles its type.
    Unhandled,
    /// Still held: its handler found its lease lost, and nothing was written.
    Held,
}

impl Ended {
    /// What `row` (read after the outcome was written; none if completing
    /// deleted it) says the job became, `snoozed` whether its handler
    /// snoozed.
    pub(crate) fn of(row: Option<&JobRow>, snoozed: bool) -> Ended {
        let Some(row) = row else {
            return Ended::Completed;
        };
        let error = || row.last_error.clone().unwrap_or_default();
        match row.status {
            JobStatus::Scheduled | JobStatus::Pending if snoozed => {
                Ended::Snoozed { due: row.run_at }
            }
            JobStatus::Scheduled | JobStatus::Pending => Ended::Retried {
                error: error(),
                due: row.run_at,
            },
            JobStatus::Failed => Ended::Failed { error: error() },
            JobStatus::Cancelled => Ended::Cancelled,
            JobStatus::Unhandled => Ended::Unhandled,
            JobStatus::Claimed | JobStatus::Running => Ended::Held,
            _ => Ended::Completed,
        }
    }
}

impl Worked {
    /// Whether the job is of type `T`.
    pub fn is<T: Job>(&self) -> bool {
        self.job_type == T::JOB_TYPE
    }

    /// Its payload decoded as `T`.
    pub fn payload_as<T: Job>(&self) -> jobqueue_core::Result<T> {
        T::deserialize(&self.payload).map_err(|source| jobqueue_core::Error::Deserialize {
            job_type: self.job_type.clone(),
            source,
        })
    }
}

impl Drained {
    /// The jobs of type `T` it worked, in order.
    pub fn of_type<T: Job>(&self) -> Vec<&Worked> {
        self.jobs.iter().filter(|job| job.is::<T>()).collect()
    }

    /// How many of the jobs it worked ended as `ended` says.
    pub fn count(&self, ended: impl Fn(&Ended) -> bool) -> usize {
        self.jobs.iter().filter(|job| ended(&job.ended)).count()
    }
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ended::Completed => f.write_str("completed"),
            Ended::Retried { error, due } => {
                write!(f, "retrying, due {}, after: {error}", time(*due))
            }
            Ended::Failed { error } => write!(f, "failed: {error}"),
            Ended::Snoozed { due } => write!(f, "snoozed, due {}", time(*due)),
            Ended::Cancelled => f.write_str("cancelled"),
            Ended::Unhandled => f.write_str("set aside as unhandled"),
            Ended::Held => f.write_str("still held (lease lost)"),
        }
    }
}

/// One line per job: round, type, attempt, queue, payload and what it
/// became; then why the drain stopped.
impl fmt::Display for Drained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for job in &self.jobs {
            writeln!(
                f,
                "round {}: {} attempt {} in queue `{}` {}: {}",
                job.round, job.job_type, job.attempt, job.queue, job.payload, job.ended
            )?;
        }
        match self.stop {
            Stop::Empty => write!(f, "stopped: nothing left due"),
            Stop::Rounds => write!(f, "stopped: the last round allowed, with jobs still due"),
            Stop::Jobs => write!(f, "stopped: the most jobs allowed, with jobs still due"),
        }
    }
}
