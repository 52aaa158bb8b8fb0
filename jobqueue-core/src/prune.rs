//! Deleting finished jobs after their retention period.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Double, Text};

use crate::isolation::{Scope, scoped};
use crate::{Error, JobStatus, Result, sql};

/// How long finished jobs are kept, per status. `None` keeps them forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// Completed jobs. Default zero: a runner's completion deletes the
    /// job's row at once, the least WAL per job (`jobqueue show` and the
    /// dashboard's list of completed jobs then find none). A longer time:
    /// the completion rewrites the row as `completed` and a prune deletes it
    /// once it is this old. Either way the completions are counted per
    /// minute, queue and type, for [`COUNTS_KEPT`].
    pub completed: Option<Duration>,
    /// Failed (dead-lettered) jobs. Default 30 days.
    pub failed: Option<Duration>,
    /// Cancelled jobs. Default 7 days.
    pub cancelled: Option<Duration>,
    /// Workflows and batches whose steps all ended, counted from the last
    /// end: the record `jobqueue workflow show` reads (steps, edges,
    /// results), whatever became of the jobs' own rows. Default 7 days.
    pub workflows: Option<Duration>,
    /// The results handlers recorded for their enqueuers
    /// ([`crate::result`]), counted from the job's completion; set when
    /// the result is written, so a change applies to results written
    /// after it. Default 1 day.
    pub results: Option<Duration>,
    /// Rows deleted per statement, so pruning never holds many locks at once.
    /// Default 5000.
    pub batch: i64,
}

const DAY: u64 = 24 * 3600;

/// How long the per-minute counts of completed jobs are kept.
pub const COUNTS_KEPT: Duration = Duration::from_secs(30 * DAY);

/// Chaining setters, one per field, each the same as setting the field:
/// `Retention::default().completed(Some(day)).batch(1000)`.
impl Retention {
    /// Sets [`Retention::completed`].
    pub fn completed(mut self, keep: Option<Duration>) -> Self {
        self.completed = keep;
        self
    }

    /// Sets [`Retention::failed`].
    pub fn failed(mut self, keep: Option<Duration>) -> Self {
        self.failed = keep;
        self
    }

    /// Sets [`Retention::workflows`].
    pub fn workflows(mut self, keep: Option<Duration>) -> Self {
        self.workflows = keep;
        self
    }

    /// Sets [`Retention::cancelled`].
    pub fn cancelled(mut self, keep: Option<Duration>) -> Self {
        self.cancelled = keep;
        self
    }

    /// Sets [`Retention::results`].
    pub fn results(mut self, keep: Option<Duration>) -> Self {
        self.results = keep;
        self
    }

    /// Sets [`Retention::batch`].
    pub fn batch(mut self, rows: i64) -> Self {
        self.batch = rows;
        self
    }
}

impl Retention {
    /// Whether completed jobs are kept for no time: their completion then
    /// deletes them ([`crate::finish::complete_and_delete_many`]) instead of
    /// rewriting them as `completed` for a prune to delete later.
    pub fn deletes_completed(&self) -> bool {
        self.completed == Some(Duration::ZERO)
    }
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            completed: Some(Duration::ZERO),
            failed: Some(Duration::from_secs(30 * DAY)),
            cancelled: Some(Duration::from_secs(7 * DAY)),
            workflows: Some(Duration::from_secs(7 * DAY)),
            results: Some(Duration::from_secs(DAY)),
            batch: 5000,
        }
    }
}

/// How many rows a prune deleted, per status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pruned {
    /// Completed jobs deleted.
    pub completed: u64,
    /// Failed jobs deleted.
    pub failed: u64,
    /// Cancelled jobs deleted.
    pub cancelled: u64,
    /// Finished workflows deleted (with their steps and edges).
    pub workflows: u64,
    /// Kept results whose time ran out, deleted.
    pub results: u64,
}

/// Deletes finished jobs older than their retention (by `finished_at` and the
/// database's clock), `retention.batch` rows per statement until none are
/// left; then folds the completion counts of minutes more than an hour old
/// into one row per minute, queue and type, and deletes those older than
/// [`COUNTS_KEPT`].
pub fn prune(conn: &mut PgConnection, retention: &Retention) -> Result<Pruned> {
    prune_in(conn, Scope::Own, retention)
}

/// `sql` (the prune, or the prune under `EXPLAIN`) bound to delete up to
/// `batch` jobs in `status` finished more than `keep` ago.
pub(crate) fn prune_query(
    sql: &str,
    status: JobStatus,
    keep: Duration,
    batch: i64,
) -> diesel::query_builder::BoxedSqlQuery<'static, diesel::pg::Pg, diesel::query_builder::SqlQuery>
{
    diesel::sql_query(sql)
        .into_boxed()
        .bind::<Text, _>(status)
        .bind::<Double, _>(keep.as_secs_f64())
        .bind::<BigInt, _>(batch)
}

pub(crate) fn prune_in(
    conn: &mut PgConnection,
    scope: Scope,
    retention: &Retention,
) -> Result<Pruned> {
    if !(1..=1_000_000).contains(&retention.batch) {
        return Err(Error::invalid(
            "batch",
            format!("{} is out of range (1 to 1000000)", retention.batch),
        ));
    }
    let mut pruned = Pruned::default();
    let plan = [
        (JobStatus::Completed, retention.completed),
        (JobStatus::Failed, retention.failed),
        (JobStatus::Cancelled, retention.cancelled),
    ];
    for (status, keep) in plan {
        let Some(keep) = keep else { continue };
        let mut deleted = 0u64;
        loop {
            let n = scoped(conn, scope, sql::READ_COMMITTED_BEGIN, |conn| {
                Ok(prune_query(sql::JOB_PRUNE, status, keep, retention.batch).execute(conn)?)
            })?;
            deleted += n as u64;
            if (n as i64) < retention.batch {
                break;
            }
        }
        match status {
            JobStatus::Completed => pruned.completed = deleted,
            JobStatus::Failed => pruned.failed = deleted,
            _ => pruned.cancelled = deleted,
        }
    }
    if let Some(keep) = retention.workflows {
        loop {
            let n = scoped(conn, scope, sql::READ_COMMITTED_BEGIN, |conn| {
                Ok(diesel::sql_query(sql::WORKFLOW_PRUNE)
                    .bind::<Double, _>(keep.as_secs_f64())
                    .bind::<BigInt, _>(retention.batch)
                    .execute(conn)?)
            })?;
            pruned.workflows += n as u64;
            if (n as i64) < retention.batch {
                break;
            }
        }
    }
    loop {
        let n = scoped(conn, scope, sql::READ_COMMITTED_BEGIN, |conn| {
            Ok(diesel::sql_query(sql::RESULT_PRUNE)
                .bind::<BigInt, _>(retention.batch)
                .execute(conn)?)
        })?;
        pruned.results += n as u64;
        if (n as i64) < retention.batch {
            break;
        }
    }
    scoped(conn, scope, sql::READ_COMMITTED_BEGIN, |conn| {
        diesel::sql_query(sql::COMPLETIONS_FOLD).execute(conn)?;
        Ok(diesel::sql_query(sql::COMPLETIONS_PRUNE)
            .bind::<Double, _>(COUNTS_KEPT.as_secs_f64())
            .execute(conn)?)
    })?;
    Ok(pruned)
}

impl crate::session::QueueSession {
    /// [`prune`], one round trip per batch.
    pub fn prune(&mut self, retention: &Retention) -> Result<Pruned> {
        prune_in(self.conn(), Scope::Session, retention)
    }
}
