//! Stale-job recovery: jobs whose holder stopped renewing its lease.

use diesel::prelude::*;
use diesel::sql_types::BigInt;

use crate::id_rows::IdStatusRow;
use crate::isolation::{Scope, scoped};
use crate::{JobId, JobStatus, Result, sql};

/// Default number of stale jobs recovered per statement.
pub const DEFAULT_RESCUE_BATCH: i64 = 1000;

/// What one recovery pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rescued {
    /// Jobs back to `pending` (they had attempts left).
    pub requeued: Vec<JobId>,
    /// Jobs now `failed` with "worker lost" (their last attempt was lost).
    pub failed: Vec<JobId>,
    /// Jobs now `cancelled` (a cancel had been requested).
    pub cancelled: Vec<JobId>,
}

impl Rescued {
    /// Jobs recovered in all.
    pub fn total(&self) -> usize {
        self.requeued.len() + self.failed.len() + self.cancelled.len()
    }
}

/// Recovers up to `limit` held jobs whose lease expired (by the database's
/// clock): back to `pending` while attempts remain, else `failed` with a
/// "worker lost" error — never left `running`. Safe to run from many
/// processes at once.
pub fn rescue_stale(conn: &mut PgConnection, limit: i64) -> Result<Rescued> {
    rescue_stale_in(conn, Scope::Own, limit)
}

/// `sql` (the rescue, or the rescue under `EXPLAIN`) bound to `limit`.
pub(crate) fn rescue_query(
    sql: &str,
    limit: i64,
) -> diesel::query_builder::BoxedSqlQuery<'static, diesel::pg::Pg, diesel::query_builder::SqlQuery>
{
    diesel::sql_query(sql).into_boxed().bind::<BigInt, _>(limit)
}

pub(crate) fn rescue_stale_in(
    conn: &mut PgConnection,
    scope: Scope,
    limit: i64,
) -> Result<Rescued> {
    crate::limits::check_batch(limit)?;
    let rows = scoped(conn, scope, sql::READ_COMMITTED_BEGIN, |conn| {
        Ok(rescue_query(sql::JOB_RESCUE_STALE, limit).load::<IdStatusRow>(conn)?)
    })?;
    let mut rescued = Rescued::default();
    for row in rows {
        match row.status {
            JobStatus::Pending => rescued.requeued.push(row.id),
            JobStatus::Cancelled => rescued.cancelled.push(row.id),
            _ => rescued.failed.push(row.id),
        }
    }
    Ok(rescued)
}

impl crate::session::QueueSession {
    /// [`rescue_stale`], in one round trip.
    pub fn rescue_stale(&mut self, limit: i64) -> Result<Rescued> {
        rescue_stale_in(self.conn(), Scope::Session, limit)
    }
}
