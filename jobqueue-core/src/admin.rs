//! Operator actions: listing jobs and putting finished jobs back to work.

use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Uuid};

use crate::id_rows::IdRow;
use crate::isolation::read_committed;
use crate::schema::jobqueue_jobs::dsl;
use crate::{Error, JobId, JobRow, JobStatus, Result, limits, sql};

/// Which jobs [`list_jobs`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in this status.
    pub status: Option<JobStatus>,
    /// Only jobs in this queue.
    pub queue: Option<String>,
    /// Only jobs of this type.
    pub job_type: Option<String>,
    /// At most this many, `1..=10000`. Default 50.
    pub limit: i64,
}

impl Default for JobFilter {
    fn default() -> Self {
        JobFilter {
            status: None,
            queue: None,
            job_type: None,
            limit: 50,
        }
    }
}

/// Jobs matching `filter`, newest first.
pub fn list_jobs(conn: &mut PgConnection, filter: &JobFilter) -> Result<Vec<JobRow>> {
    if !(1..=10_000).contains(&filter.limit) {
        return Err(Error::invalid(
            "limit",
            format!("{} is out of range (1 to 10000)", filter.limit),
        ));
    }
    let mut query = dsl::jobqueue_jobs
        .select(JobRow::as_select())
        .order(dsl::id.desc())
        .limit(filter.limit)
        .into_boxed();
    if let Some(status) = filter.status {
        query = query.filter(dsl::status.eq(status.as_str()));
    }
    if let Some(queue) = &filter.queue {
        limits::check_queue(queue)?;
        query = query.filter(dsl::queue.eq(queue));
    }
    if let Some(job_type) = &filter.job_type {
        limits::check_job_type(job_type)?;
        query = query.filter(dsl::job_type.eq(job_type));
    }
    Ok(query.load(conn)?)
}

fn requeue(conn: &mut PgConnection, id: Option<JobId>) -> Result<Vec<JobId>> {
    let rows = read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::JOB_RETRY)
            .bind::<Nullable<Uuid>, _>(id)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .load::<IdRow>(conn)?)
    })?;
    Ok(rows.into_iter().map(|row| row.id).collect())
}

/// Puts a failed or cancelled job back to `pending`, due now, with its
/// attempts reset (its error history is kept).
///
/// [`Error::NotFound`] if there is no such job; [`Error::WrongStatus`] if
/// it is not failed or cancelled; [`Error::UniqueConflict`]
/// if a live job now holds its unique key.
pub fn retry_job(conn: &mut PgConnection, id: JobId) -> Result<()> {
    if !requeue(conn, Some(id))?.is_empty() {
        return Ok(());
    }
    let Some(job) = crate::row::read_job(conn, id)? else {
        return Err(Error::NotFound(id));
    };
    match (job.status, job.unique_key) {
        (JobStatus::Failed | JobStatus::Cancelled, Some(unique_key)) => {
            Err(Error::UniqueConflict {
                unique_key,
                existing: None,
            })
        }
        (status, _) => Err(Error::WrongStatus {
            job_id: id,
            status,
            expected: "only failed or cancelled jobs can be retried",
        }),
    }
}

/// Puts every failed job back to `pending` (see [`retry_job`]); returns the
/// ids requeued. Jobs whose unique key is held by a live job stay failed.
pub fn retry_failed(conn: &mut PgConnection) -> Result<Vec<JobId>> {
    requeue(conn, None)
}
