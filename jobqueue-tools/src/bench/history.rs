//! Claim cost with an empty table against one holding a long history of
//! finished (not yet pruned) rows.

use std::time::Instant;

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::engine::{Claim, QueueSession};
use jobqueue_core::{JobOptions, NewJob};

use super::enqueue::insert;
use super::noop::BenchNoop;
use super::{Row, Sizes, checkpoint, db, median, reset};
use crate::ToolError;

/// Jobs per measured claim.
pub(crate) const BATCH: i64 = 100;

/// Median latency (ms) of `claims` claims of `BATCH` jobs from a backlog in
/// the queue `queue`. Each phase starts vacuumed and from a checkpoint, so
/// neither pays for the other's autovacuum run or full-page writes.
pub(crate) fn claim_latency(url: &str, claims: usize, queue: &str) -> Result<f64, ToolError> {
    let claim = Claim::new("bench-history").limit(BATCH).queues([queue]);
    claim_latency_of(url, claims, queue, &claim)
}

/// As [`claim_latency`], each claim being `claim` (of `BATCH` jobs, from
/// `queue` among others).
pub(crate) fn claim_latency_of(
    url: &str,
    claims: usize,
    queue: &str,
    claim: &Claim,
) -> Result<f64, ToolError> {
    let mut session = QueueSession::establish(url)?;
    let jobs: Vec<NewJob> = (0..claims * BATCH as usize)
        .map(|_| NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new().queue(queue)))
        .collect::<Result<_, _>>()?;
    insert(session.conn(), &jobs)?;
    diesel::sql_query("VACUUM (ANALYZE) jobqueue_jobs")
        .execute(session.conn())
        .map_err(db)?;
    checkpoint(session.conn())?;
    let mut times = Vec::with_capacity(claims);
    for _ in 0..claims {
        let started = Instant::now();
        let rows = session.claim(claim)?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        let leases: Vec<_> = rows.iter().map(|row| row.lease()).collect();
        session.complete_many(&leases)?;
    }
    Ok(median(&times))
}

pub(crate) fn claim_cost(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let (mut empty, mut full, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        reset(&mut conn)?;
        let base = claim_latency(url, sizes.history_claims, "default")?;
        diesel::sql_query(
            "INSERT INTO jobqueue_jobs (id, job_type, status, payload, attempts, claim_count, worker_id,
                                        claimed_at, started_at, finished_at, created_at, run_at)
             SELECT gen_random_uuid(), 'bench.noop', 'completed', '{\"seq\":0}', 1, 1, 'history',
                    now() - g * interval '1 ms', now() - g * interval '1 ms', now() - g * interval '1 ms',
                    now() - g * interval '1 ms', now() - g * interval '1 ms'
             FROM generate_series(1, $1) AS g",
        )
        .bind::<diesel::sql_types::Integer, _>(sizes.history_rows as i32)
        .execute(&mut conn)
        .map_err(db)?;
        let loaded = claim_latency(url, sizes.history_claims, "default")?;
        empty.push(base);
        full.push(loaded);
        ratios.push(loaded / base);
    }
    Ok(vec![
        Row::new(
            format!("claim {BATCH}, empty history (median of claims)"),
            "ms",
            empty,
        ),
        Row::new(
            format!(
                "claim {BATCH}, {} finished rows present",
                sizes.history_rows
            ),
            "ms",
            full,
        ),
        Row::new("claim cost with history / empty", "ratio", ratios),
    ])
}
