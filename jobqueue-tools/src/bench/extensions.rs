//! What an application's work middleware and lifecycle handlers cost the
//! runner: a burn-down with a stack of them against the same without, run
//! in alternating order so neither side gets the warmer cache.

use diesel::{Connection, PgConnection};
use jobqueue_runner::{JobContext, JobError, Lifecycle, Middleware, Next, RunnerConfig};

use super::burn::{burn_with, jobs_for};
use super::{Row, Sizes, db};
use crate::ToolError;

/// Workers of the burn-down, as in its main row.
const WORKERS: usize = 8;

/// Middleware in the stack.
const DEPTH: usize = 3;

/// Passes every attempt on, as a middleware that only looks does.
struct PassOn;

impl Middleware for PassOn {
    fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError> {
        std::hint::black_box(ctx.job_id());
        next.run(ctx)
    }
}

/// Registered, never called: no bench job fails, panics or overruns.
struct Listens;

impl Lifecycle for Listens {}

/// Burn-down of no-op jobs without middleware, and with `DEPTH` of them
/// and a lifecycle handler.
pub(crate) fn middleware_cost(
    url: &str,
    sizes: &Sizes,
    runs: usize,
) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = jobs_for(sizes, WORKERS);
    let stacked = || {
        (0..DEPTH)
            .fold(super::registry(), |registry, _| registry.middleware(PassOn))
            .lifecycle(Listens)
    };
    let (mut without, mut with, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let config = || RunnerConfig::new(url).concurrency(WORKERS);
        let (a, b) = if run % 2 == 0 {
            let a = burn_with(&mut conn, config(), super::registry(), n)?;
            (a, burn_with(&mut conn, config(), stacked(), n)?)
        } else {
            let b = burn_with(&mut conn, config(), stacked(), n)?;
            (burn_with(&mut conn, config(), super::registry(), n)?, b)
        };
        without.push(a);
        with.push(b);
        ratios.push(b / a);
    }
    Ok(vec![
        Row::new(
            format!("burn-down, {WORKERS} workers, no middleware"),
            "jobs/s",
            without,
        ),
        Row::new(
            format!("burn-down, {WORKERS} workers, {DEPTH} middleware and a lifecycle handler"),
            "jobs/s",
            with,
        ),
        Row::new("burn-down with middleware / without", "ratio", ratios)
            .note("no-op middleware around every attempt; target ≥ 0.98"),
    ])
}
