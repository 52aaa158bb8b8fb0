//! Burn-down: a backlog of no-op jobs worked by the runner at several worker
//! counts, and the floor: the same claim and completion statements (the
//! row deleted, as the runner does by default) run in a tight loop, no
//! runner.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection};
use jobqueue_core::engine::{Claim, GlobalLimits, QueueSession};

use super::enqueue::{build, insert};
use super::{Row, Sizes, db, reset};
use jobqueue_runner::{Runner, RunnerConfig};

use crate::ToolError;

/// Jobs for one burn-down run at `workers` workers: the full size, but no
/// more than 25,000 per worker (a single worker would take minutes).
pub(crate) fn jobs_for(sizes: &Sizes, workers: usize) -> usize {
    sizes.burn_jobs.min(workers * 25_000)
}

/// One burn-down of `n` fresh no-op jobs by a runner configured as
/// `config`; returns jobs/s.
pub(crate) fn burn_once(
    conn: &mut PgConnection,
    config: RunnerConfig,
    n: usize,
) -> Result<f64, ToolError> {
    burn_with(conn, config, super::registry(), n)
}

/// [`burn_once`] with the handlers (and middleware) of `registry`.
pub(crate) fn burn_with(
    conn: &mut PgConnection,
    config: RunnerConfig,
    registry: jobqueue_runner::Registry,
    n: usize,
) -> Result<f64, ToolError> {
    burn_jobs(conn, config, registry, &build(n)?)
}

/// What [`alternated`] measured: side a's figures, side b's, and each
/// run's ratio b / a.
pub(crate) type Alternated = (Vec<f64>, Vec<f64>, Vec<f64>);

/// `runs` runs of two burn-downs in the order a, b, b, a (so that the one
/// that comes second, on the first one's dead rows and warmed cache, is
/// as often one as the other): each side's figures, and each run's ratio
/// b / a of the sums, which carries no order.
pub(crate) fn alternated(
    runs: usize,
    mut a: impl FnMut() -> Result<f64, ToolError>,
    mut b: impl FnMut() -> Result<f64, ToolError>,
) -> Result<Alternated, ToolError> {
    let (mut first, mut second, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let a1 = a()?;
        let b1 = b()?;
        let b2 = b()?;
        let a2 = a()?;
        first.extend([a1, a2]);
        second.extend([b1, b2]);
        ratios.push((b1 + b2) / (a1 + a2));
    }
    Ok((first, second, ratios))
}

/// One burn-down of `jobs` by a runner configured as `config` with the
/// handlers of `registry`; returns jobs/s.
pub(crate) fn burn_jobs(
    conn: &mut PgConnection,
    config: RunnerConfig,
    registry: jobqueue_runner::Registry,
    jobs: &[jobqueue_core::NewJob],
) -> Result<f64, ToolError> {
    reset(conn)?;
    insert(conn, jobs)?;
    let n = jobs.len();
    let workers = config.concurrency;
    let started = Instant::now();
    let runner = Runner::new(config, registry).start()?;
    let deadline = started + Duration::from_secs(600);
    while (runner.stats().completed as usize) < n {
        if Instant::now() > deadline {
            runner.shutdown();
            return Err(ToolError::Usage(format!(
                "burn-down at {workers} workers did not finish"
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    runner.shutdown();
    Ok(rate)
}

pub(crate) fn burn_down(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let mut rows = Vec::new();
    for &workers in sizes.burn_workers {
        let n = jobs_for(sizes, workers);
        let mut rates = Vec::new();
        for _ in 0..runs {
            let config = RunnerConfig::new(url).concurrency(workers);
            rates.push(burn_once(&mut conn, config, n)?);
        }
        rows.push(Row::new(
            format!("burn-down, {workers} workers, {n} jobs"),
            "jobs/s",
            rates,
        ));
    }
    Ok(rows)
}

/// Workers of the metrics-cost burn-down: the busiest count of the
/// burn-down rows short of the largest, where per-job overhead shows most.
const METRICS_WORKERS: usize = 32;

/// Burn-down with metrics kept (and served) against the same without, run
/// in alternating order so neither side gets the warmer cache.
pub(crate) fn metrics_cost(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = jobs_for(sizes, METRICS_WORKERS);
    let (mut off, mut on, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let plain = RunnerConfig::new(url).concurrency(METRICS_WORKERS);
        let mut kept = plain.clone();
        // Served on a port the system picks, so a scraper could read it.
        kept.metrics = jobqueue_runner::MetricsMode::Serve(([127, 0, 0, 1], 0).into());
        let (a, b) = if run % 2 == 0 {
            let a = burn_once(&mut conn, plain, n)?;
            (a, burn_once(&mut conn, kept, n)?)
        } else {
            let b = burn_once(&mut conn, kept, n)?;
            (burn_once(&mut conn, plain, n)?, b)
        };
        off.push(a);
        on.push(b);
        ratios.push(b / a);
    }
    Ok(vec![
        Row::new(
            format!("burn-down, {METRICS_WORKERS} workers, metrics off"),
            "jobs/s",
            off,
        ),
        Row::new(
            format!("burn-down, {METRICS_WORKERS} workers, metrics on"),
            "jobs/s",
            on,
        )
        .note("counters, histograms and queue gauges kept and served"),
        Row::new("burn-down with metrics / without", "ratio", ratios).note("target ≥ 0.97"),
    ])
}

/// Runs `threads` loops at once, each on a connection of its own: each
/// thread makes its connection with `connect` (given the thread's index),
/// all wait until every one is made (or failed: none is left waiting),
/// then each runs `work` on its connection. Returns the time from that
/// start until the last thread ended, or the first error.
pub(crate) fn at_once<S: 'static>(
    threads: usize,
    connect: impl Fn(usize) -> Result<S, ToolError> + Send + Sync + 'static,
    work: impl Fn(S) -> Result<(), ToolError> + Send + Sync + 'static,
) -> Result<Duration, ToolError> {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let (connect, work) = (Arc::new(connect), Arc::new(work));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (barrier, connect, work) = (
                Arc::clone(&barrier),
                Arc::clone(&connect),
                Arc::clone(&work),
            );
            std::thread::spawn(move || {
                let connected = connect(t);
                barrier.wait();
                work(connected?)
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    for handle in handles {
        handle
            .join()
            .map_err(|_| ToolError::Usage("a bench thread panicked".into()))??;
    }
    Ok(started.elapsed())
}

pub(crate) fn floor(url: &str, sizes: &Sizes, runs: usize) -> Result<Row, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.burn_jobs;
    let batch = sizes.floor_batch;
    let mut rates = Vec::new();
    for _ in 0..runs {
        reset(&mut conn)?;
        insert(&mut conn, &build(n)?)?;
        let url = url.to_owned();
        let took = at_once(
            sizes.floor_threads,
            move |t| {
                // As a runner of every queue claims while no queue has a
                // limit.
                let claim = Claim::new(format!("floor-{t}"))
                    .limit(batch)
                    .global_limits(GlobalLimits::Skip);
                Ok((QueueSession::establish(&url)?, claim))
            },
            |(mut session, claim)| loop {
                let rows = session.claim(&claim)?;
                if rows.is_empty() {
                    return Ok(());
                }
                let leases: Vec<_> = rows.iter().map(|row| row.lease()).collect();
                // As the runner completes by default: the row deleted.
                session.complete_and_delete_many(&leases)?;
            },
        )?;
        rates.push(n as f64 / took.as_secs_f64());
    }
    Ok(Row::new(
        format!(
            "bare-SQL floor, {} conns, batches of {}",
            sizes.floor_threads, sizes.floor_batch
        ),
        "jobs/s",
        rates,
    )
    .note("the runner's claim and complete-and-delete statements, no runner"))
}
