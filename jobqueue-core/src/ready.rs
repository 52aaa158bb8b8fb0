//! Moving waiting jobs into `pending`, where claims find them: scheduled
//! jobs that became due, and jobs set aside as unhandled once a runner that
//! handles their type runs.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Text, Timestamptz};

use crate::isolation::{Scope, scoped};
use crate::{Result, limits, sql};

/// Default number of jobs moved per statement.
pub const DEFAULT_PROMOTE_BATCH: i64 = 5000;

#[derive(QueryableByName)]
struct Moved {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Moves up to `limit` scheduled jobs that are due by the database's clock
/// to `pending`, and wakes their queues; returns how many it moved. Safe to
/// run from many processes at once: each takes jobs the others do not
/// (SKIP LOCKED). A runner does this every poll interval.
pub fn promote_due(conn: &mut PgConnection, limit: i64) -> Result<i64> {
    promote_due_in(conn, Scope::Own, limit)
}

pub(crate) fn promote_due_in(conn: &mut PgConnection, scope: Scope, limit: i64) -> Result<i64> {
    limits::check_batch(limit)?;
    scoped(conn, scope, sql::READ_COMMITTED_BEGIN, |conn| {
        Ok(diesel::sql_query(sql::JOB_PROMOTE_DUE)
            .bind::<BigInt, _>(limit)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .get_result::<Moved>(conn)?
            .n)
    })
}

/// Moves up to `limit` scheduled jobs due by `until` to `pending`, as
/// [`promote_due`] does for those due by the database's clock; returns how
/// many it moved. For a caller whose clock is not the database's: inside a
/// transaction, `now()` stands still at the transaction's start, so a test
/// lets time pass by naming the time (the testing kit's drain "as of").
pub fn promote_due_by(conn: &mut PgConnection, until: DateTime<Utc>, limit: i64) -> Result<i64> {
    limits::check_batch(limit)?;
    scoped(conn, Scope::Own, sql::READ_COMMITTED_BEGIN, |conn| {
        Ok(diesel::sql_query(sql::JOB_PROMOTE_DUE_BY)
            .bind::<BigInt, _>(limit)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .bind::<Timestamptz, _>(until)
            .get_result::<Moved>(conn)?
            .n)
    })
}

/// Puts up to `limit` jobs set aside as [`crate::JobStatus::Unhandled`]
/// back to `pending` if their type is one of `job_types` and their queue one
/// of `queues` (empty: any queue), and wakes their queues; returns how many
/// it moved. A runner does this when it starts and at every recovery pass,
/// for the types it handles in the queues it works.
pub fn reclaim_unhandled(
    conn: &mut PgConnection,
    job_types: &[String],
    queues: &[String],
    limit: i64,
) -> Result<i64> {
    reclaim_unhandled_in(conn, Scope::Own, job_types, queues, limit)
}

pub(crate) fn reclaim_unhandled_in(
    conn: &mut PgConnection,
    scope: Scope,
    job_types: &[String],
    queues: &[String],
    limit: i64,
) -> Result<i64> {
    limits::check_batch(limit)?;
    for job_type in job_types {
        limits::check_job_type(job_type)?;
    }
    for queue in queues {
        limits::check_queue(queue)?;
    }
    if job_types.is_empty() {
        return Ok(0);
    }
    scoped(conn, scope, sql::READ_COMMITTED_BEGIN, |conn| {
        Ok(diesel::sql_query(sql::JOB_UNPARK)
            .bind::<Array<Text>, _>(job_types)
            .bind::<Array<Text>, _>(queues)
            .bind::<BigInt, _>(limit)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .get_result::<Moved>(conn)?
            .n)
    })
}

impl crate::session::QueueSession {
    /// [`promote_due`], in one round trip.
    pub fn promote_due(&mut self, limit: i64) -> Result<i64> {
        promote_due_in(self.conn(), Scope::Session, limit)
    }

    /// [`reclaim_unhandled`], in one round trip.
    pub fn reclaim_unhandled(
        &mut self,
        job_types: &[String],
        queues: &[String],
        limit: i64,
    ) -> Result<i64> {
        reclaim_unhandled_in(self.conn(), Scope::Session, job_types, queues, limit)
    }
}
