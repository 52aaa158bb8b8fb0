//! Enqueue through diesel-async (`AsyncPgConnection`, on a tokio runtime)
//! beside the blocking enqueue on the same server: the latency of one job
//! per transaction, and the batch rate (the async multi-row insert against
//! the blocking `COPY`).

use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection};
use diesel_async::{AsyncConnection, AsyncPgConnection};
use jobqueue_core::Job;

use super::enqueue::{BULK_CHUNK, build, insert};
use super::noop::BenchNoop;
use super::{Row, Sizes, db, reset};
use crate::ToolError;

/// Async enqueue latency over blocking enqueue latency that is still fine.
const LATENCY_RATIO_TARGET: f64 = 1.3;

/// The rows: per-job latency of each, their ratio, and both batch rates.
pub(crate) fn compare(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let mut aconn = runtime
        .block_on(AsyncPgConnection::establish(url))
        .map_err(db)?;
    let (mut sync_us, mut async_us, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut copy_rates, mut insert_rates) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        reset(&mut conn)?;
        let blocking = per_job(sizes.txn_duration, || {
            conn.transaction(|conn| BenchNoop { seq: 0 }.enqueue(conn))?;
            Ok(())
        })?;
        let awaited = runtime.block_on(async {
            let started = Instant::now();
            let mut done = 0u32;
            while started.elapsed() < sizes.txn_duration {
                aconn
                    .transaction::<_, jobqueue_core::Error, _>(async |conn| {
                        BenchNoop { seq: 0 }.enqueue_async(conn).await
                    })
                    .await?;
                done += 1;
            }
            Ok::<_, ToolError>(started.elapsed() / done.max(1))
        })?;
        sync_us.push(micros(blocking));
        async_us.push(micros(awaited));
        ratios.push(awaited.as_secs_f64() / blocking.as_secs_f64());

        reset(&mut conn)?;
        let jobs = build(sizes.bulk_jobs)?;
        let started = Instant::now();
        insert(&mut conn, &jobs)?;
        copy_rates.push(jobs.len() as f64 / started.elapsed().as_secs_f64());
        reset(&mut conn)?;
        let jobs = build(sizes.bulk_jobs)?;
        let started = Instant::now();
        runtime.block_on(async {
            for chunk in jobs.chunks(BULK_CHUNK) {
                jobqueue_core::enqueue_many_async(&mut aconn, chunk).await?;
            }
            Ok::<_, ToolError>(())
        })?;
        insert_rates.push(jobs.len() as f64 / started.elapsed().as_secs_f64());
    }
    Ok(vec![
        Row::new("enqueue latency, blocking", "µs", sync_us)
            .note("one job per transaction, one connection"),
        Row::new("enqueue latency, diesel-async", "µs", async_us)
            .note("the same, AsyncPgConnection on tokio"),
        Row::new("diesel-async / blocking enqueue latency", "ratio", ratios)
            .note(format!("target ≤ {LATENCY_RATIO_TARGET}")),
        Row::new(
            format!("bulk enqueue, diesel-async, {} jobs", sizes.bulk_jobs),
            "jobs/s",
            insert_rates,
        )
        .note(format!(
            "multi-row INSERT, {BULK_CHUNK} per statement (beside COPY's below)"
        )),
        Row::new(
            format!("bulk enqueue, blocking, {} jobs", sizes.bulk_jobs),
            "jobs/s",
            copy_rates,
        )
        .note("COPY, the same server and run"),
    ])
}

/// Mean time of one `step`, called in a loop for `duration`.
fn per_job(
    duration: Duration,
    mut step: impl FnMut() -> Result<(), ToolError>,
) -> Result<Duration, ToolError> {
    let started = Instant::now();
    let mut done = 0u32;
    while started.elapsed() < duration {
        step()?;
        done += 1;
    }
    Ok(started.elapsed() / done.max(1))
}

/// `duration` in microseconds.
fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
