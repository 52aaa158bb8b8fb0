//! What a durable step and a durable cursor's advance cost: a burn-down
//! of jobs of [`STEPS`] no-op steps each (or of [`STEPS`] advances of
//! their cursor) against one of [`STEPS`] times as many plain no-op jobs,
//! a step or an advance standing for a job. Each is a transaction on the
//! handler's connection that records on the job's row; a job is its share
//! of a claim and of a completion. Run in alternating order so neither
//! side gets the warmer cache.

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

/// A job of `steps` durable steps that do nothing, or, with `cursor`, a
/// loop of `steps` items that does nothing but advance its durable
/// cursor past each.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "bench.stepped")]
struct BenchStepped {
    steps: u32,
    cursor: bool,
}

impl Perform for BenchStepped {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if self.cursor {
            let mut next: u32 = ctx.cursor()?.unwrap_or(0);
            while next < self.steps {
                next += 1;
                ctx.advance(&next)?;
            }
            return Ok(());
        }
        for i in 0..self.steps {
            let _: u32 = ctx.step(&format!("step-{i}"), |_conn| Ok(i))?;
        }
        Ok(())
    }
}

pub(crate) fn step_cost(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.stepped_jobs;
    let stepped = |cursor: bool| -> Result<Vec<NewJob>, ToolError> {
        (0..n)
            .map(|_| {
                NewJob::from_job(
                    &BenchStepped {
                        steps: STEPS,
                        cursor,
                    },
                    JobOptions::new(),
                )
                .map_err(ToolError::from)
            })
            .collect()
    };
    let registry = || super::registry().register::<BenchStepped>();
    let config = || RunnerConfig::new(url).concurrency(WORKERS);
    let units = n * STEPS as usize;
    let conn = std::cell::RefCell::new(&mut conn);
    let against_plain = |cursor: bool| {
        alternated(
            runs,
            || burn_with(&mut conn.borrow_mut(), config(), registry(), units),
            || {
                let jobs = stepped(cursor)?;
                Ok(
                    burn_jobs(&mut conn.borrow_mut(), config(), registry(), &jobs)?
                        * f64::from(STEPS),
                )
            },
        )
    };
    let (plain, steps, ratios) = against_plain(false)?;
    let (plain_again, advances, advance_ratios) = against_plain(true)?;
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
        Row::new(
            format!("plain no-op jobs, {WORKERS} workers, {units} jobs (beside cursors)"),
            "jobs/s",
            plain_again,
        ),
        Row::new(
            format!("durable cursor advances, {STEPS} a job, {WORKERS} workers, {n} jobs"),
            "advances/s",
            advances,
        ),
        Row::new(
            "a durable cursor advance / a plain job",
            "ratio",
            advance_ratios,
        )
        .note("advances/s over jobs/s; runs in ABBA order"),
    ])
}
