//! Operator actions: putting finished jobs back to work.

use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Uuid};

use crate::id_rows::IdRow;
use crate::isolation::read_committed;
use crate::{Error, JobId, JobStatus, Result, limits, sql};

/// Puts a failed or cancelled job back to `pending`, due now, with its
/// attempts reset (its error history is kept).
///
/// [`Error::NotFound`] if there is no such job; [`Error::WrongStatus`] if
/// it is not failed or cancelled; [`Error::UniqueConflict`]
/// if a live job now holds its unique key.
pub fn retry_job(conn: &mut PgConnection, id: JobId) -> Result<()> {
    let requeued = read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::JOB_RETRY)
            .bind::<Uuid, _>(id)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .load::<IdRow>(conn)?)
    })?;
    if !requeued.is_empty() {
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

/// Puts every failed job of `queue` and of `job_type` (each: all if
/// `None`) back to `pending`, as [`retry_job`] does one; returns the ids
/// requeued. Jobs whose unique key a live job holds stay failed.
pub fn retry_failed(
    conn: &mut PgConnection,
    queue: Option<&str>,
    job_type: Option<&str>,
) -> Result<Vec<JobId>> {
    if let Some(queue) = queue {
        limits::check_queue(queue)?;
    }
    if let Some(job_type) = job_type {
        limits::check_job_type(job_type)?;
    }
    let rows = read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::JOB_RETRY_FAILED)
            .bind::<Nullable<Text>, _>(queue)
            .bind::<Nullable<Text>, _>(job_type)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .load::<IdRow>(conn)?)
    })?;
    Ok(rows.into_iter().map(|row| row.id).collect())
}
