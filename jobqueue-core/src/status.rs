//! The lifecycle states of a job.

use std::fmt;
use std::str::FromStr;

use diesel::deserialize::{FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::pg::{Pg, PgValue};
use diesel::serialize::{Output, ToSql};
use diesel::sql_types::Text;

/// Where a job is in its lifecycle (the `status` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, AsExpression, FromSqlRow)]
#[diesel(sql_type = Text)]
#[non_exhaustive]
pub enum JobStatus {
    /// A step of a workflow waiting for the steps it comes after: due
    /// (`pending`, `scheduled` or `waiting`) once each of them completed.
    Blocked,
    /// In line behind its concurrency key: a keyed job of a queue with a
    /// key limit, admitted (to `pending`, or `scheduled` while its `run_at`
    /// is ahead) once fewer than the limit of its key's jobs are admitted
    /// and unfinished.
    Waiting,
    /// Waiting for its `run_at` (a delayed job, or a retry's backoff); moved
    /// to `pending` by a runner once due by the database's clock.
    Scheduled,
    /// Due: waiting to be claimed.
    Pending,
    /// Set aside by a runner that works its queue but has no handler for its
    /// type; moved back to `pending` when a runner that handles the type
    /// runs. No attempt is used up.
    Unhandled,
    /// Claimed by a worker, handler not started yet; the lease is running.
    Claimed,
    /// The handler is running; the lease is running.
    Running,
    /// Finished successfully.
    Completed,
    /// Attempts exhausted or failed permanently: the dead-letter state.
    Failed,
    /// Cancelled before it completed.
    Cancelled,
}

impl JobStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [JobStatus; 10] = [
        JobStatus::Blocked,
        JobStatus::Waiting,
        JobStatus::Scheduled,
        JobStatus::Pending,
        JobStatus::Unhandled,
        JobStatus::Claimed,
        JobStatus::Running,
        JobStatus::Completed,
        JobStatus::Failed,
        JobStatus::Cancelled,
    ];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Blocked => "blocked",
            JobStatus::Waiting => "waiting",
            JobStatus::Scheduled => "scheduled",
            JobStatus::Pending => "pending",
            JobStatus::Unhandled => "unhandled",
            JobStatus::Claimed => "claimed",
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the job is finished (completed, failed or cancelled).
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Failed | JobStatus::Cancelled
        )
    }

    /// Whether the job waits to run (blocked, waiting, scheduled, pending
    /// or unhandled).
    pub fn is_waiting(self) -> bool {
        matches!(
            self,
            JobStatus::Blocked
                | JobStatus::Waiting
                | JobStatus::Scheduled
                | JobStatus::Pending
                | JobStatus::Unhandled
        )
    }

    /// Whether a worker holds the job (claimed or running).
    pub fn is_held(self) -> bool {
        matches!(self, JobStatus::Claimed | JobStatus::Running)
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobStatus {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| {
                crate::Error::invalid(
                    "status",
                    format!(
                        "`{s}` is not a status (expected one of blocked, waiting, scheduled, pending, \
                         unhandled, claimed, running, completed, failed, cancelled)"
                    ),
                )
            })
    }
}

impl FromSql<Text, Pg> for JobStatus {
    fn from_sql(bytes: PgValue<'_>) -> diesel::deserialize::Result<Self> {
        let text = <String as FromSql<Text, Pg>>::from_sql(bytes)?;
        Ok(text.parse()?)
    }
}

impl ToSql<Text, Pg> for JobStatus {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> diesel::serialize::Result {
        <str as ToSql<Text, Pg>>::to_sql(self.as_str(), out)
    }
}
