//! Job statistics: live jobs by type and status, jobs completed lately
//! (jobs by queue and status come with each queue, from `list_queues`).
//!
//! [`type_stats`] reads the partial indexes of the live statuses, so it
//! costs what the backlog holds, however much finished history is kept;
//! [`completed_within`] reads the per-minute counts of completions.

use std::collections::BTreeMap;
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Double, Text};

use crate::isolation::report;
use crate::{JobStatus, Result, sql};

/// Folds `rows`, sorted by a key, into one entry per key: `new` starts the
/// entry of a row that is not `of` the last one, and `add` adds each row
/// to its entry.
pub(crate) fn one_per_key<R, E>(
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
#[non_exhaustive]
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
