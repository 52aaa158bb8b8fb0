//! Enqueue throughput: bulk (the batch API) and transactional (one job per
//! transaction from many threads, against a plain insert+commit loop).

use std::sync::{Arc, Barrier};
use std::time::Instant;

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{Job, JobOptions, NewJob};

use super::noop::BenchNoop;
use super::{Row, Sizes, db, reset};
use crate::ToolError;

/// Jobs per `enqueue_many` call in the bulk measurement.
pub(crate) const BULK_CHUNK: usize = 10_000;

/// `n` bench jobs, built (validated, serialized) ahead of timing.
pub(crate) fn build(n: usize) -> Result<Vec<NewJob>, ToolError> {
    (0..n)
        .map(|_| {
            NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new()).map_err(ToolError::from)
        })
        .collect()
}

/// Inserts `jobs` through the batch API, `BULK_CHUNK` per statement.
pub(crate) fn insert(conn: &mut PgConnection, jobs: &[NewJob]) -> Result<(), ToolError> {
    for chunk in jobs.chunks(BULK_CHUNK) {
        jobqueue_core::enqueue_many(conn, chunk)?;
    }
    Ok(())
}

pub(crate) fn bulk(url: &str, sizes: &Sizes, runs: usize) -> Result<Row, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let mut rates = Vec::new();
    for _ in 0..runs {
        reset(&mut conn)?;
        let jobs = build(sizes.bulk_jobs)?;
        let started = Instant::now();
        insert(&mut conn, &jobs)?;
        rates.push(jobs.len() as f64 / started.elapsed().as_secs_f64());
    }
    Ok(Row::new(
        format!("bulk enqueue, {} jobs", sizes.bulk_jobs),
        "jobs/s",
        rates,
    )
    .note(format!("enqueue_many, {BULK_CHUNK} per statement")))
}

/// Runs `threads` threads, each on its own connection, calling `step` in a
/// loop for `sizes.txn_duration`; returns total calls per second.
fn hammer(
    url: &str,
    sizes: &Sizes,
    step: impl Fn(&mut PgConnection) -> Result<(), ToolError> + Send + Sync + 'static,
) -> Result<f64, ToolError> {
    let step = Arc::new(step);
    let barrier = Arc::new(Barrier::new(sizes.txn_threads));
    let handles: Vec<_> = (0..sizes.txn_threads)
        .map(|_| {
            let (url, step, barrier, duration) = (
                url.to_owned(),
                Arc::clone(&step),
                Arc::clone(&barrier),
                sizes.txn_duration,
            );
            std::thread::spawn(move || -> Result<(u64, f64), ToolError> {
                let mut conn = PgConnection::establish(&url).map_err(db)?;
                barrier.wait();
                let started = Instant::now();
                let mut done = 0u64;
                while started.elapsed() < duration {
                    step(&mut conn)?;
                    done += 1;
                }
                Ok((done, started.elapsed().as_secs_f64()))
            })
        })
        .collect();
    let mut total = 0.0;
    for handle in handles {
        let (done, secs) = handle
            .join()
            .map_err(|_| ToolError::Usage("a bench thread panicked".into()))??;
        total += done as f64 / secs;
    }
    Ok(total)
}

pub(crate) fn transactional(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    diesel::sql_query(
        "CREATE TABLE IF NOT EXISTS bench_plain (id uuid PRIMARY KEY, payload jsonb NOT NULL)",
    )
    .execute(&mut conn)
    .map_err(db)?;
    let (mut queue, mut plain, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        reset(&mut conn)?;
        diesel::sql_query("TRUNCATE bench_plain")
            .execute(&mut conn)
            .map_err(db)?;
        let ceiling = hammer(url, sizes, |conn| {
            conn.transaction(|conn| {
                diesel::sql_query(
                    "INSERT INTO bench_plain (id, payload) VALUES ($1, '{\"seq\":0}')",
                )
                .bind::<diesel::sql_types::Uuid, _>(jobqueue_core::JobId::new())
                .execute(conn)
            })
            .map_err(db)?;
            Ok(())
        })?;
        let rate = hammer(url, sizes, |conn| {
            conn.transaction(|conn| BenchNoop { seq: 0 }.enqueue(conn))?;
            Ok(())
        })?;
        queue.push(rate);
        plain.push(ceiling);
        ratios.push(rate / ceiling);
    }
    Ok(vec![
        Row::new(
            format!("transactional enqueue, {} threads", sizes.txn_threads),
            "jobs/s",
            queue,
        )
        .note("one job per transaction, NOTIFY included"),
        Row::new(
            format!(
                "plain insert+commit, {} threads (ceiling)",
                sizes.txn_threads
            ),
            "rows/s",
            plain,
        ),
        Row::new("transactional enqueue / commit ceiling", "ratio", ratios),
    ])
}
