//! Queue statistics: counts by queue and status, age of the oldest due job.
//!
//! The everyday counts ([`queue_stats`], [`type_stats`]) read the partial
//! indexes of the live statuses and of `failed`, so they cost what the
//! backlog and the dead letter hold, however much finished history is
//! kept. Completed and cancelled jobs are counted only when asked
//! ([`Counting::WithHistory`]): that reads the whole table.

use std::collections::BTreeMap;
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Double, Nullable, Text};

use crate::isolation::report;
use crate::{JobStatus, Result, sql};

/// What [`queue_stats`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Counting {
    /// Live jobs (scheduled, pending, unhandled, claimed, running) and
    /// failed ones: cheap at any history size.
    #[default]
    Live,
    /// Every job, completed and cancelled included: a scan of the table,
    /// which grows with the retained history.
    WithHistory,
}

/// The state of one queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueStats {
    /// The queue's name.
    pub queue: String,
    /// Jobs per status (statuses with no job are absent; completed and
    /// cancelled only with [`Counting::WithHistory`]).
    pub counts: BTreeMap<JobStatus, i64>,
    /// How long the oldest due pending job has been waiting past its `run_at`.
    pub oldest_due_age: Option<Duration>,
}

impl QueueStats {
    /// Jobs in `status`.
    pub fn count(&self, status: JobStatus) -> i64 {
        self.counts.get(&status).copied().unwrap_or(0)
    }
}

#[derive(QueryableByName)]
struct StatsRow {
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Text)]
    status: JobStatus,
    #[diesel(sql_type = BigInt)]
    jobs: i64,
    #[diesel(sql_type = Nullable<Double>)]
    oldest_due_secs: Option<f64>,
}

/// Counts jobs by queue and status, one entry per queue, sorted by name:
/// what `counting` says.
pub fn queue_stats(conn: &mut PgConnection, counting: Counting) -> Result<Vec<QueueStats>> {
    let statement = match counting {
        Counting::Live => sql::JOB_STATS,
        Counting::WithHistory => sql::JOB_STATS_HISTORY,
    };
    let rows = report(conn, |conn| {
        Ok(diesel::sql_query(statement).load::<StatsRow>(conn)?)
    })?;
    Ok(one_per_key(
        rows,
        |entry: &QueueStats, row: &StatsRow| entry.queue == row.queue,
        |row| QueueStats {
            queue: row.queue.clone(),
            ..QueueStats::default()
        },
        |entry, row| {
            entry.counts.insert(row.status, row.jobs);
            if let Some(secs) = row.oldest_due_secs {
                entry.oldest_due_age = Some(Duration::from_secs_f64(secs.max(0.0)));
            }
        },
    ))
}

/// Folds `rows`, sorted by a key, into one entry per key: `new` starts the
/// entry of a row that is not `of` the last one, and `add` adds each row
/// to its entry.
fn one_per_key<R, E>(
    rows: Vec<R>,
    of: impl Fn(&E, &R) -> bool,
    new: impl Fn(&R) -> E,
    add: impl Fn(&mut E, R),
) -> Vec<E> {
    let mut out: Vec<E> = Vec::new();
    for row in rows {
        match out.last_mut() {
            Some(entry) if of(entry, &row) => add(entry, row),
            _ => {
                let mut entry = new(&row);
                add(&mut entry, row);
                out.push(entry);
            }
        }
    }
    out
}

/// Live jobs of one type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeStats {
    /// The job type.
    pub job_type: String,
    /// Live jobs per status (pending, claimed, running; absent if none).
    pub counts: BTreeMap<JobStatus, i64>,
}

#[derive(QueryableByName)]
struct TypeRow {
    #[diesel(sql_type = Text)]
    job_type: String,
    #[diesel(sql_type = Text)]
    status: JobStatus,
    #[diesel(sql_type = BigInt)]
    jobs: i64,
}

/// Counts live jobs by job type and status, sorted by type.
pub fn type_stats(conn: &mut PgConnection) -> Result<Vec<TypeStats>> {
    let rows = report(conn, |conn| {
        Ok(diesel::sql_query(sql::JOB_STATS_BY_TYPE).load::<TypeRow>(conn)?)
    })?;
    Ok(one_per_key(
        rows,
        |entry: &TypeStats, row: &TypeRow| entry.job_type == row.job_type,
        |row| TypeStats {
            job_type: row.job_type.clone(),
            counts: BTreeMap::new(),
        },
        |entry, row| {
            entry.counts.insert(row.status, row.jobs);
        },
    ))
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Jobs completed in the last `within` (whole minutes, the current one
/// included), from the counts every completion adds to, whether the
/// completed rows are kept or not. The counts go back [`crate::prune::COUNTS_KEPT`].
pub fn completed_within(conn: &mut PgConnection, within: Duration) -> Result<i64> {
    let row = report(conn, |conn| {
        Ok(diesel::sql_query(sql::COMPLETIONS_WITHIN)
            .bind::<Double, _>(within.as_secs_f64())
            .get_result::<CountRow>(conn)?)
    })?;
    Ok(row.n)
}
