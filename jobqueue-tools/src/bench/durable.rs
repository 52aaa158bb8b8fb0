//! What a durable step costs: a burn-down of jobs of [`STEPS`] no-op
//! steps each against one of [`STEPS`] times as many plain no-op jobs, a
//! step standing for a job. A step is a transaction on the handler's
//! connection that records its output on the job's row; a job is its
//! share of a claim and of a completion. Run in alternating order so
//! neither side gets the warmer cache.

use diesel::{Connection, PgConnection};
use jobqueue_core::{Job, JobOptions, NewJob};
use jobqueue_runner::{JobContext, JobError, Perform, RunnerConfig};
use serde::{Deserialize, Serialize};

use super::burn::{alternated, burn_jobs, burn_with};
use super::{Row, Sizes, db};
use crate::ToolError;

/// Steps of each durable job.
const STEPS: u32 = 10;

/// Workers of both burn-downs.
const WORKERS: usize = 8;

/// A job of `steps` durable steps that do nothing.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "bench.stepped")]
struct BenchStepped {
    steps: u32,
}

impl Perform for BenchStepped {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        for i in 0..self.steps {
            let _: u32 = ctx.step(&format!("step-{i}"), |_conn| Ok(i))?;
        }
        Ok(())
    }
}

pub(crate) fn step_cost(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.stepped_jobs;
    let stepped = || -> Result<Vec<NewJob>, ToolError> {
        (0..n)
            .map(|_| {
                NewJob::from_job(&BenchStepped { steps: STEPS }, JobOptions::new())
                    .map_err(ToolError::from)
            })
            .collect()
    };
    let registry = || super::registry().register::<BenchStepped>();
    let config = || RunnerConfig::new(url).concurrency(WORKERS);
    let units = n * STEPS as usize;
    let conn = std::cell::RefCell::new(&mut conn);
    let (plain, steps, ratios) = alternated(
        runs,
        || burn_with(&mut conn.borrow_mut(), config(), registry(), units),
        || {
            let jobs = stepped()?;
            Ok(burn_jobs(&mut conn.borrow_mut(), config(), registry(), &jobs)? * f64::from(STEPS))
        },
    )?;
    Ok(vec![
        Row::new(
            format!("plain no-op jobs, {WORKERS} workers, {units} jobs"),
            "jobs/s",
            plain,
        ),
        Row::new(
            format!("durable steps, {STEPS} a job, {WORKERS} workers, {n} jobs"),
            "steps/s",
            steps,
        ),
        Row::new("a durable step / a plain job", "ratio", ratios)
            .note("steps/s over jobs/s; runs in ABBA order"),
    ])
}
