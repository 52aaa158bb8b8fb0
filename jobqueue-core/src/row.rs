//! A job as stored: one row of `jobqueue_jobs`.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::lease::Lease;
use crate::schema::jobqueue_jobs;
use crate::{JobId, JobStatus, NewJob};

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
    /// The W3C `traceparent` of the span that enqueued the job (feature
    /// `tracing`): its first attempt's parent; `None` if it was enqueued
    /// outside a sampled span.
    pub traceparent: Option<String>,
    /// The concurrency key its queue's key limit counts it under, if any
    /// (see [`crate::JobOptions::concurrency_key`]).
    pub concurrency_key: Option<String>,
    /// The workflow the job is a step of, if any (see [`crate::Workflow`]).
    pub workflow_id: Option<JobId>,
    /// Its tags ([`crate::JobOptions::tag`]); `None` when it has none.
    pub tags: Option<Vec<String>>,
    /// Its metadata, a JSON object ([`crate::JobOptions::meta`]); `None`
    /// when none was set.
    pub metadata: Option<serde_json::Value>,
    /// The durable steps its handler finished, in order, each
    /// `{"name", "output"}` (see `JobContext::step` in the runner);
    /// `None` before the first.
    pub step_outputs: Option<serde_json::Value>,
    /// Where its handler's durable cursor has got to (see
    /// `JobContext::advance` in the runner); `None` before the first
    /// advance.
    pub step_cursor: Option<serde_json::Value>,
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

    /// The row `job` would have once enqueued at `now` and claimed for its
    /// attempt number `attempt`, stored nowhere: what a handler worked
    /// without a database is given (the testing kit's `perform`). It is
    /// `running` under its first claim (fencing token 1), due when `job`
    /// says (at `now` unless delayed or scheduled), with `job`'s type,
    /// payload, queue, priority, attempts allowed and unique key.
    pub fn unstored(job: &NewJob, attempt: i32, now: DateTime<Utc>) -> crate::Result<JobRow> {
        let payload =
            serde_json::from_str(&job.payload).map_err(|source| crate::Error::Deserialize {
                job_type: job.job_type.clone(),
                source,
            })?;
        // A delay is at most 100 years (`NewJob` refuses longer ones): its
        // microseconds fit an i64.
        let delay = chrono::Duration::microseconds((job.delay_secs * 1e6) as i64);
        Ok(JobRow {
            id: job.id,
            job_type: job.job_type.clone(),
            queue: job.queue.clone(),
            priority: job.priority,
            status: JobStatus::Running,
            payload,
            run_at: job.run_at.unwrap_or(now + delay),
            attempts: attempt,
            max_attempts: job.max_attempts,
            last_error: None,
            errors: serde_json::Value::Array(Vec::new()),
            unique_key: job.unique_key.clone(),
            worker_id: None,
            claim_count: 1,
            claimed_at: Some(now),
            heartbeat_at: Some(now),
            lease_expires_at: None,
            cancel_requested: false,
            progress: 0,
            current_stage: None,
            events_count: 0,
            created_at: now,
            started_at: Some(now),
            finished_at: None,
            snoozes: 0,
            traceparent: None,
            concurrency_key: job.concurrency_key.clone(),
            workflow_id: None,
            tags: (!job.tags.is_empty()).then(|| job.tags.clone()),
            metadata: match &job.metadata {
                None => None,
                Some(text) => Some(serde_json::from_str(text).map_err(|source| {
                    crate::Error::Deserialize {
                        job_type: job.job_type.clone(),
                        source,
                    }
                })?),
            },
            step_outputs: None,
            step_cursor: None,
        })
    }

    /// Whether the job carries `tag`.
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().flatten().any(|t| t == tag)
    }

    /// The value of `key` in the job's metadata, if set.
    pub fn meta(&self, key: &str) -> Option<&serde_json::Value> {
        self.metadata.as_ref().and_then(|m| m.get(key))
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
