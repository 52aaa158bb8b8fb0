//! Repeated drains from a truncated table: the state a queue table is in
//! after a bulk load, with statistics that describe some earlier table. Each
//! run truncates, bulk-enqueues the backlog in calls of 1,000, starts a
//! runner at 8 workers, times it until the backlog is drained, then sends 50
//! single enqueues through the idle runner before it stops. The worst run
//! against the median shows whether any table state makes the runner
//! collapse; WAL bytes per job show what the drain writes.

use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{Job, JobOptions, NewJob};

use super::noop::BenchNoop;
use super::{Row, Sizes, db, median, reset};
use jobqueue_runner::{Runner, RunnerConfig};

use crate::ToolError;

/// Jobs per `enqueue_many` call.
const CHUNK: usize = 1_000;
/// Worker threads of the draining runner.
const WORKERS: usize = 8;
/// Single enqueues sent through the idle runner after each drain.
const SINGLES: usize = 50;

#[derive(diesel::QueryableByName)]
struct Lsn {
    #[diesel(sql_type = diesel::sql_types::Double)]
    bytes: f64,
}

/// Bytes of WAL the server has written so far.
fn wal_position(conn: &mut PgConnection) -> Result<f64, ToolError> {
    Ok(
        diesel::sql_query("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::float8 AS bytes")
            .get_result::<Lsn>(conn)
            .map_err(db)?
            .bytes,
    )
}

pub(crate) fn drains(url: &str, sizes: &Sizes) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    reset(&mut conn)?;
    let n = sizes.drain_jobs;
    let runner = Runner::new(
        RunnerConfig::new(url).concurrency(WORKERS),
        super::registry(),
    )
    .start()?;
    let measured = measure(&mut conn, &runner, n, sizes.drain_runs);
    runner.shutdown();
    let (rates, wal_per_job) = measured?;
    let median_rate = median(&rates);
    let worst = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let name = format!("drain from truncated table, {WORKERS} workers, {n} jobs");
    Ok(vec![
        Row::new(name.clone(), "jobs/s", rates.clone()).note(format!(
            "{} runs; first enqueue to last completion",
            sizes.drain_runs
        )),
        Row::new(
            format!("{name}: worst / median"),
            "ratio",
            vec![worst / median_rate],
        )
        .note("target ≥ 0.7"),
        Row::new(format!("{name}: WAL per job"), "bytes", wal_per_job)
            .note("enqueue, claim and completion; pg_current_wal_lsn"),
    ])
}

/// `runs` drains through the running `runner`; returns each run's rate and
/// WAL bytes per job.
fn measure(
    conn: &mut PgConnection,
    runner: &jobqueue_runner::RunnerHandle,
    n: usize,
    runs: usize,
) -> Result<(Vec<f64>, Vec<f64>), ToolError> {
    let mut rates = Vec::with_capacity(runs);
    let mut wal_per_job = Vec::with_capacity(runs);
    for _ in 0..runs {
        reset(conn)?;
        let jobs: Vec<NewJob> = (0..n)
            .map(|_| NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new()))
            .collect::<Result<_, _>>()?;
        let done_before = runner.stats().completed;
        let wal_before = wal_position(conn)?;
        let started = Instant::now();
        for chunk in jobs.chunks(CHUNK) {
            jobqueue_core::enqueue_many(conn, chunk)?;
        }
        let deadline = started + Duration::from_secs(600);
        wait_until(runner, done_before + n as u64, deadline)?;
        rates.push(n as f64 / started.elapsed().as_secs_f64());
        wal_per_job.push((wal_position(conn)? - wal_before) / n as f64);
        for i in 0..SINGLES {
            BenchNoop { seq: 0 }.enqueue(conn)?;
            wait_until(runner, done_before + (n + i + 1) as u64, deadline)?;
        }
    }
    Ok((rates, wal_per_job))
}

/// Waits until `runner` has completed `completed` jobs in all.
fn wait_until(
    runner: &jobqueue_runner::RunnerHandle,
    completed: u64,
    deadline: Instant,
) -> Result<(), ToolError> {
    while runner.stats().completed < completed {
        if Instant::now() > deadline {
            return Err(ToolError::Usage(format!(
                "the drain did not finish in 10 minutes ({} of {completed} jobs completed)",
                runner.stats().completed
            )));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}
