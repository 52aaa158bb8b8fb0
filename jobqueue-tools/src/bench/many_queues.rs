//! Many queues: the same due jobs spread over 1, 100, 1,000 and 5,000
//! queues (per-tenant queues), drained by one runner of every queue at
//! [`WORKERS`] workers. Each spread's rate against the one-queue rate of the
//! same run shows what a claim pays per queue that has due jobs.

use std::time::Instant;

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{JobOptions, NewJob};
use jobqueue_runner::{Runner, RunnerConfig};

use super::enqueue::insert;
use super::noop::BenchNoop;
use super::queues::until_completed;
use super::{Row, Sizes, db, reset};
use crate::ToolError;

/// Worker threads of the draining runner.
const WORKERS: usize = 8;
/// The spreads measured, in queues; the first is the baseline.
const SPREADS: [usize; 4] = [1, 100, 1_000, 5_000];
/// What each spread's rate must reach, as a share of the one-queue rate.
const TARGETS: [&str; 4] = ["", "", "target ≥ 0.85", "target ≥ 0.7"];

/// One drain of `n` due jobs spread round-robin over `queues` queues: jobs
/// per second from the runner's start to its last completion.
fn drain(url: &str, conn: &mut PgConnection, n: usize, queues: usize) -> Result<f64, ToolError> {
    reset(conn)?;
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            let queue = format!("tenant-{:05}", i % queues);
            NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new().queue(queue))
        })
        .collect::<Result<_, _>>()?;
    insert(conn, &jobs)?;
    diesel::sql_query("VACUUM (ANALYZE) jobqueue_jobs")
        .execute(conn)
        .map_err(db)?;
    let config = RunnerConfig::new(url).concurrency(WORKERS);
    let started = Instant::now();
    let runner = Runner::new(config, super::registry()).start()?;
    let took = until_completed(&runner, n, started, "a many-queue drain");
    runner.shutdown();
    Ok(n as f64 / took?.as_secs_f64())
}

pub(crate) fn many_queues(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.spread_jobs;
    let mut rates = vec![Vec::new(); SPREADS.len()];
    for _ in 0..runs {
        for (i, queues) in SPREADS.iter().enumerate() {
            rates[i].push(drain(url, &mut conn, n, *queues)?);
        }
    }
    reset(&mut conn)?;
    let mut rows = Vec::new();
    for (i, queues) in SPREADS.iter().enumerate() {
        let name = format!("drain {n} jobs over {queues} queues, {WORKERS} workers");
        rows.push(Row::new(name, "jobs/s", rates[i].clone()).note("one runner of every queue"));
        if i > 0 {
            let ratios = rates[i].iter().zip(&rates[0]).map(|(r, one)| r / one);
            rows.push(
                Row::new(
                    format!("{queues} queues / 1 queue"),
                    "ratio",
                    ratios.collect(),
                )
                .note(TARGETS[i]),
            );
        }
    }
    Ok(rows)
}
