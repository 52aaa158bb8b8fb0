//! A job as stored: one row of `jobqueue_jobs`.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::lease::Lease;
use crate::schema::jobqueue_jobs;
use crate::{JobId, JobStatus};

/// A full row of `jobqueue_jobs`.
#[derive(Debug, Clone, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = jobqueue_jobs, check_for_backend(diesel::pg::Pg))]
#[non_exhaustive]
pub struct JobRow {
    /// The job's id.
    pub id: JobId,
    /// Stable job type name.
    pub job_type: String,
    /// Named queue.
    pub queue: String,
    /// Higher runs first.
    pub priority: i32,
    /// Lifecycle state.
    pub status: JobStatus,
    /// The payload as JSON.
    pub payload: serde_json::Value,
    /// Not claimed before this time.
    pub run_at: DateTime<Utc>,
    /// Attempts used so far (the current one included while held).
    pub attempts: i32,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// Error of the latest failed attempt.
    pub last_error: Option<String>,
    /// The last few failures, oldest first: `[{"attempt", "at", "error"}]`.
    pub errors: serde_json::Value,
    /// Unique key, if any.
    pub unique_key: Option<String>,
    /// The worker holding (or that last held) the job.
    pub worker_id: Option<String>,
    /// Number of claims so far; the fencing token of the current one.
    pub claim_count: i32,
    /// When the current claim was made.
    pub claimed_at: Option<DateTime<Utc>>,
    /// Last heartbeat of the holder.
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// When the current lease runs out.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// A cancel was requested while the job was held.
    pub cancel_requested: bool,
    /// Percent done, 0-100.
    pub progress: i16,
    /// Current stage reported by the handler.
    pub current_stage: Option<String>,
    /// Events reported by the handler.
    pub events_count: i32,
    /// When the job was enqueued.
    pub created_at: DateTime<Utc>,
    /// When the handler started.
    pub started_at: Option<DateTime<Utc>>,
    /// When the job reached a finished status.
    pub finished_at: Option<DateTime<Utc>>,
    /// Times a handler asked to run it again later (no attempt used).
    pub snoozes: i32,
}

impl JobRow {
    /// The lease a worker holds on this row, as of when it was read.
    pub fn lease(&self) -> Lease {
        Lease {
            job_id: self.id,
            token: self.claim_count,
            attempt: self.attempts,
        }
    }

    /// Decodes the payload as the job type `T`.
    pub fn payload_as<T: serde::de::DeserializeOwned>(&self) -> crate::Result<T> {
        T::deserialize(&self.payload).map_err(|source| crate::Error::Deserialize {
            job_type: self.job_type.clone(),
            source,
        })
    }
}

/// Reads one job's row by id, if there is one (see `lookup::get_job` for
/// what callers outside the crate get).
pub(crate) fn read_job(conn: &mut PgConnection, id: JobId) -> crate::Result<Option<JobRow>> {
    let row = diesel::sql_query(crate::sql::JOB_GET)
        .bind::<diesel::sql_types::Uuid, _>(id)
        .get_result::<JobRow>(conn)
        .optional()?;
    Ok(row)
}
