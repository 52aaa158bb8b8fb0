//! What an application's work middleware and lifecycle handlers cost the
//! runner: a burn-down with a stack of them against the same without, run
//! in alternating order so neither side gets the warmer cache.

use diesel::{Connection, PgConnection};
use jobqueue_runner::{JobContext, JobError, Lifecycle, Middleware, Next, RunnerConfig};

use super::burn::{alternated, burn_with, jobs_for};
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
/// and a lifecycle handler. Each run burns down four times, without, with,
/// with, without: a burn-down that comes second (on the first one's dead
/// rows, with the cache the first one warmed) is as often one as the
/// other, so the run's ratio, of the sums, carries no order.
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
    let config = || RunnerConfig::new(url).concurrency(WORKERS);
    let conn = std::cell::RefCell::new(&mut conn);
    let (without, with, ratios) = alternated(
        runs,
        || burn_with(&mut conn.borrow_mut(), config(), super::registry(), n),
        || burn_with(&mut conn.borrow_mut(), config(), stacked(), n),
    )?;
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
            .note("no-op middleware around every attempt, runs in ABBA order; target ≥ 0.98"),
    ])
}
