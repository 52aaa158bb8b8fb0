//! Inserting jobs: one at a time or many in one statement.
//!
//! Each insert also wakes idle workers with `pg_notify` (see
//! [`crate::NOTIFY_CHANNEL`]); the notification is delivered when, and only
//! if, the transaction commits.
//!
//! Enqueue runs on the caller's connection and inside the caller's open
//! transaction, if any: the jobs exist if and only if it commits. A unique-key
//! clash is resolved with `ON CONFLICT DO NOTHING`, so it never aborts the
//! caller's transaction.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, Double, Integer, Nullable, Text, Timestamptz, Uuid};

use crate::{Error, JobId, NewJob, Result, sql};

/// How often an enqueue retries when the job holding its unique key finished
/// between the insert and the look-up of that job.
const UNIQUE_RETRIES: usize = 3;

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = Uuid)]
    id: JobId,
}

/// The outcome of [`enqueue_many`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Enqueued {
    /// Ids of the jobs inserted.
    pub inserted: Vec<JobId>,
    /// Ids of the jobs not inserted because a live job already held their
    /// unique key (or an earlier job of the same batch did).
    pub skipped: Vec<JobId>,
}

/// Inserts one job; returns its id.
///
/// Fails with [`Error::UniqueConflict`] (and inserts nothing) when a live
/// job already holds the job's unique key.
pub fn enqueue(conn: &mut PgConnection, job: &NewJob) -> Result<JobId> {
    for _ in 0..UNIQUE_RETRIES {
        let inserted = diesel::sql_query(sql::JOB_INSERT)
            .bind::<Uuid, _>(job.id)
            .bind::<Text, _>(&job.job_type)
            .bind::<Text, _>(&job.queue)
            .bind::<Integer, _>(job.priority)
            .bind::<Text, _>(&job.payload)
            .bind::<Integer, _>(job.max_attempts)
            .bind::<Nullable<Timestamptz>, _>(job.run_at)
            .bind::<Double, _>(job.delay_secs)
            .bind::<Nullable<Text>, _>(job.unique_key.as_deref())
            .bind::<Text, _>(crate::NOTIFY_CHANNEL)
            .get_result::<IdRow>(conn)
            .optional()?;
        if let Some(row) = inserted {
            return Ok(row.id);
        }
        let Some(key) = &job.unique_key else {
            // Only the unique-key index can make the insert do nothing.
            return Err(Error::invalid(
                "unique_key",
                "insert skipped without a unique key",
            ));
        };
        if let Some(existing) = live_holder(conn, key)? {
            return Err(Error::UniqueConflict {
                unique_key: key.clone(),
                existing: Some(existing),
            });
        }
        // The holder finished in between: its key is free again, try once more.
    }
    Err(Error::UniqueConflict {
        unique_key: job.unique_key.clone().unwrap_or_default(),
        existing: None,
    })
}

/// The live job holding `key`, if any.
fn live_holder(conn: &mut PgConnection, key: &str) -> Result<Option<JobId>> {
    use crate::schema::jobqueue_jobs::dsl::*;
    let holder = jobqueue_jobs
        .select(id)
        .filter(unique_key.eq(key))
        .filter(status.eq_any(["pending", "claimed", "running"]))
        .first::<uuid::Uuid>(conn)
        .optional()?;
    Ok(holder.map(JobId::from))
}

/// Inserts many jobs in ONE statement (`INSERT ... SELECT FROM unnest(...)`).
///
/// Jobs whose unique key is held by a live job, or by an earlier job of the
/// same batch, are skipped and reported in [`Enqueued::skipped`]; the others
/// are inserted. Runs inside the caller's open transaction, if any.
pub fn enqueue_many(conn: &mut PgConnection, jobs: &[NewJob]) -> Result<Enqueued> {
    if jobs.is_empty() {
        return Ok(Enqueued::default());
    }
    let n = jobs.len();
    let mut ids = Vec::with_capacity(n);
    let mut types = Vec::with_capacity(n);
    let mut queues = Vec::with_capacity(n);
    let mut priorities = Vec::with_capacity(n);
    let mut payloads = Vec::with_capacity(n);
    let mut max_attempts = Vec::with_capacity(n);
    let mut run_ats: Vec<Option<DateTime<Utc>>> = Vec::with_capacity(n);
    let mut delays = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    for job in jobs {
        ids.push(job.id);
        types.push(job.job_type.as_str());
        queues.push(job.queue.as_str());
        priorities.push(job.priority);
        payloads.push(job.payload.as_str());
        max_attempts.push(job.max_attempts);
        run_ats.push(job.run_at);
        delays.push(job.delay_secs);
        keys.push(job.unique_key.as_deref());
    }
    let rows = diesel::sql_query(sql::JOB_INSERT_MANY)
        .bind::<Array<Uuid>, _>(&ids)
        .bind::<Array<Text>, _>(&types)
        .bind::<Array<Text>, _>(&queues)
        .bind::<Array<Integer>, _>(&priorities)
        .bind::<Array<Text>, _>(&payloads)
        .bind::<Array<Integer>, _>(&max_attempts)
        .bind::<Array<Nullable<Timestamptz>>, _>(&run_ats)
        .bind::<Array<Double>, _>(&delays)
        .bind::<Array<Nullable<Text>>, _>(&keys)
        .bind::<Text, _>(crate::NOTIFY_CHANNEL)
        .load::<IdRow>(conn)?;
    let inserted: std::collections::HashSet<JobId> = rows.iter().map(|row| row.id).collect();
    let (inserted, skipped): (Vec<JobId>, Vec<JobId>) =
        ids.into_iter().partition(|id| inserted.contains(id));
    Ok(Enqueued { inserted, skipped })
}
