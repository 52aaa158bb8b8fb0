//! Burn-down: a backlog of no-op jobs worked by the runner at several worker
//! counts, and the floor: the same claim and completion statements run as
//! bare SQL in a tight loop, no runner.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection};
use jobqueue_core::{Claim, QueueSession};

use super::enqueue::{build, insert};
use super::{Row, Sizes, db, reset};
use jobqueue_runner::{Runner, RunnerConfig};

use crate::ToolError;

/// Jobs for one burn-down run at `workers` workers: the full size, but no
/// more than 25,000 per worker (a single worker would take minutes).
fn jobs_for(sizes: &Sizes, workers: usize) -> usize {
    sizes.burn_jobs.min(workers * 25_000)
}

pub(crate) fn burn_down(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let mut rows = Vec::new();
    for &workers in sizes.burn_workers {
        let n = jobs_for(sizes, workers);
        let mut rates = Vec::new();
        for _ in 0..runs {
            reset(&mut conn)?;
            insert(&mut conn, &build(n)?)?;
            let config = RunnerConfig::new(url).concurrency(workers);
            let started = Instant::now();
            let runner = Runner::new(config, super::registry()).start()?;
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
            rates.push(n as f64 / started.elapsed().as_secs_f64());
            runner.shutdown();
        }
        rows.push(Row::new(
            format!("burn-down, {workers} workers, {n} jobs"),
            "jobs/s",
            rates,
        ));
    }
    Ok(rows)
}

pub(crate) fn floor(url: &str, sizes: &Sizes, runs: usize) -> Result<Row, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.burn_jobs;
    let mut rates = Vec::new();
    for _ in 0..runs {
        reset(&mut conn)?;
        insert(&mut conn, &build(n)?)?;
        let barrier = Arc::new(Barrier::new(sizes.floor_threads + 1));
        let handles: Vec<_> = (0..sizes.floor_threads)
            .map(|t| {
                let (url, barrier, batch) =
                    (url.to_owned(), Arc::clone(&barrier), sizes.floor_batch);
                std::thread::spawn(move || -> Result<(), ToolError> {
                    let mut session = QueueSession::establish(&url)?;
                    let claim = Claim::new(format!("floor-{t}")).limit(batch);
                    barrier.wait();
                    loop {
                        let rows = session.claim(&claim)?;
                        if rows.is_empty() {
                            return Ok(());
                        }
                        let leases: Vec<_> = rows.iter().map(|row| row.lease()).collect();
                        session.complete_many(&leases)?;
                    }
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        for handle in handles {
            handle
                .join()
                .map_err(|_| ToolError::Usage("a floor thread panicked".into()))??;
        }
        rates.push(n as f64 / started.elapsed().as_secs_f64());
    }
    Ok(Row::new(
        format!(
            "bare-SQL floor, {} conns, batches of {}",
            sizes.floor_threads, sizes.floor_batch
        ),
        "jobs/s",
        rates,
    )
    .note("same claim and complete statements, no runner"))
}
