//! Repeated drains from a truncated table: the state a queue table is in
//! after a bulk load, with statistics that describe some earlier table. Each
//! run truncates, bulk-enqueues the backlog in calls of 1,000, starts a
//! runner at 8 workers, times it until the backlog is drained, then sends 50
//! single enqueues through the idle runner before it stops. The worst run
//! against the median shows whether any table state makes the runner
//! collapse; WAL bytes per job show what the drain writes (completed rows
//! deleted as they complete, the default). A few more drains by a runner
//! that keeps completed jobs a day show what rewriting their rows as
//! `completed` costs in WAL, and a
//! few with a payload of [`PAYLOAD_BYTES`] how often the payload is
//! written: once by the insert, and again by every claim or completion
//! whose new row version does not stay on its page.

use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{Job, JobOptions, NewJob, Retention};

use super::noop::{BenchNoop, BenchPayload};
use super::{Row, Sizes, db, median, reset};
use jobqueue_runner::{Runner, RunnerConfig};

use crate::ToolError;

/// Jobs per `enqueue_many` call.
pub(crate) const CHUNK: usize = 1_000;
/// Worker threads of the draining runner.
pub(crate) const WORKERS: usize = 8;
/// Single enqueues sent through the idle runner after each drain.
const SINGLES: usize = 50;
/// Characters of filler in the payload of the drains with a payload.
const PAYLOAD_BYTES: usize = 300;

#[derive(diesel::QueryableByName)]
struct Lsn {
    #[diesel(sql_type = diesel::sql_types::Double)]
    bytes: f64,
}

/// Bytes of WAL the server has inserted so far.
pub(crate) fn wal_position(conn: &mut PgConnection) -> Result<f64, ToolError> {
    Ok(
        diesel::sql_query("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::float8 AS bytes")
            .get_result::<Lsn>(conn)
            .map_err(db)?
            .bytes,
    )
}

pub(crate) fn drains(url: &str, sizes: &Sizes) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    reset(&mut conn)?;
    let n = sizes.drain_jobs;
    let noop = || NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new());
    let (rates, wal_per_job) = drain_with(
        url,
        &mut conn,
        Retention::default(),
        (n, sizes.drain_runs),
        noop,
    )?;
    let median_rate = median(&rates);
    let worst = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let name = format!("drain from truncated table, {WORKERS} workers, {n} jobs");
    // The same drains with completed jobs kept a day: the completion writes
    // a `completed` version of the row instead of deleting it.
    let keeping = Retention::default().completed(Some(Duration::from_secs(24 * 3600)));
    let runs = sizes.drain_runs.min(5);
    let (kept_rates, kept_wal) = drain_with(url, &mut conn, keeping, (n, runs), noop)?;
    let kept = format!("drain, completed rows kept a day, {n} jobs");
    // And with a payload: the WAL beyond the no-op drain's, per byte of
    // payload, is how many times each job's payload was written.
    let payload = BenchPayload {
        text: "x".repeat(PAYLOAD_BYTES),
    };
    let payload_len = serde_json::to_string(&payload)
        .map_err(|e| ToolError::Usage(format!("the bench payload does not serialize: {e}")))?
        .len();
    let with_payload = || NewJob::from_job(&payload, JobOptions::new());
    let (_, payload_wal) = drain_with(
        url,
        &mut conn,
        Retention::default(),
        (n, runs),
        with_payload,
    )?;
    let payload_name = format!("drain, {payload_len}-byte payload, {n} jobs: WAL per job");
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
        Row::new(format!("{name}: WAL per job"), "bytes", wal_per_job.clone()).note(
            "enqueue, claim, the completion's delete and its count; pg_current_wal_insert_lsn; \
             target ≤ 800",
        ),
        Row::new(kept.clone(), "jobs/s", kept_rates).note(format!("{runs} runs")),
        Row::new(format!("{kept}: WAL per job"), "bytes", kept_wal.clone())
            .note("enqueue, claim, the completion's `completed` version and its count"),
        Row::new(
            "WAL per job, completed rows kept / deleted (the default)",
            "ratio",
            vec![median(&kept_wal) / median(&wal_per_job)],
        ),
        Row::new(payload_name, "bytes", payload_wal.clone()).note(format!("{runs} runs")),
        Row::new(
            "WAL per byte of payload (payload drain - no-op drain) / payload",
            "ratio",
            vec![(median(&payload_wal) - median(&wal_per_job)) / payload_len as f64],
        )
        .note("1: the insert alone writes the payload; 3: claim and completion too"),
    ])
}

/// `runs` drains of `n` jobs made by `job`, by a runner of [`WORKERS`] that
/// keeps finished jobs as `retention` says; each run's rate and WAL bytes
/// per job.
fn drain_with(
    url: &str,
    conn: &mut PgConnection,
    retention: Retention,
    (n, runs): (usize, usize),
    job: impl Fn() -> jobqueue_core::Result<NewJob>,
) -> Result<(Vec<f64>, Vec<f64>), ToolError> {
    let mut config = RunnerConfig::new(url).concurrency(WORKERS);
    config.retention = retention;
    let runner = Runner::new(config, super::registry()).start()?;
    let measured = measure(conn, &runner, (n, runs), job);
    runner.shutdown();
    measured
}

/// `runs` drains through the running `runner`; returns each run's rate and
/// WAL bytes per job.
fn measure(
    conn: &mut PgConnection,
    runner: &jobqueue_runner::RunnerHandle,
    (n, runs): (usize, usize),
    job: impl Fn() -> jobqueue_core::Result<NewJob>,
) -> Result<(Vec<f64>, Vec<f64>), ToolError> {
    let mut rates = Vec::with_capacity(runs);
    let mut wal_per_job = Vec::with_capacity(runs);
    for _ in 0..runs {
        reset(conn)?;
        let jobs: Vec<NewJob> = (0..n).map(|_| job()).collect::<Result<_, _>>()?;
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
pub(crate) fn wait_until(
    runner: &jobqueue_runner::RunnerHandle,
    completed: u64,
    deadline: Instant,
) -> Result<(), ToolError> {
    wait_polling(runner, completed, deadline, Duration::from_micros(200))
}

/// Waits until `runner` has completed `completed` jobs in all, looking
/// every `poll`.
pub(crate) fn wait_polling(
    runner: &jobqueue_runner::RunnerHandle,
    completed: u64,
    deadline: Instant,
    poll: Duration,
) -> Result<(), ToolError> {
    while runner.stats().completed < completed {
        if Instant::now() > deadline {
            return Err(ToolError::Usage(format!(
                "the drain did not finish in 10 minutes ({} of {completed} jobs completed)",
                runner.stats().completed
            )));
        }
        std::thread::sleep(poll);
    }
    Ok(())
}
