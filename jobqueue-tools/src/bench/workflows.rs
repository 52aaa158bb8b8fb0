//! Workflows' cost (`workflows`): a fan-out of no-op jobs with one fan-in
//! job after all of them, against the same number of plain no-op jobs,
//! each burnt down by a runner of 8 workers from a backlog inserted
//! beforehand, alternated within each run. A workflow job's completion
//! releases the steps after it in the completion's own statement: the
//! transactions the server committed per job during each burn-down show
//! that no statement per parent is added.

use std::time::Instant;

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::Workflow;
use jobqueue_runner::{Runner, RunnerConfig};

use super::noop::BenchNoop;
use super::queues::{WORKERS, backlog, until_completed};
use super::{Row, Sizes, db, reset};
use crate::ToolError;

#[derive(diesel::QueryableByName)]
struct Commits {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Transactions committed in the current database so far (the statistics
/// as of now: the snapshot is cleared first).
fn commits(conn: &mut PgConnection) -> Result<i64, ToolError> {
    diesel::sql_query("SELECT pg_stat_clear_snapshot()")
        .execute(conn)
        .map_err(db)?;
    Ok(diesel::sql_query(
        "SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()",
    )
    .get_result::<Commits>(conn)
    .map_err(db)?
    .n)
}

/// Empties the workflow tables and the jobs table between runs.
fn reset_workflows(conn: &mut PgConnection) -> Result<(), ToolError> {
    diesel::sql_query("TRUNCATE jobqueue_workflows CASCADE")
        .execute(conn)
        .map_err(db)?;
    diesel::sql_query("TRUNCATE jobqueue_workflow_steps, jobqueue_workflow_edges")
        .execute(conn)
        .map_err(db)?;
    reset(conn)
}

/// A burn-down of the `n` jobs already inserted: seconds, and the
/// transactions committed per job meanwhile.
fn burn_timed(url: &str, conn: &mut PgConnection, n: usize) -> Result<(f64, f64), ToolError> {
    let before = commits(conn)?;
    let runner = Runner::new(
        RunnerConfig::new(url).concurrency(WORKERS),
        super::registry(),
    )
    .start()?;
    let took = until_completed(&runner, n, Instant::now(), "workflow burn-down")?;
    runner.shutdown();
    let after = commits(conn)?;
    Ok((took.as_secs_f64(), (after - before) as f64 / n as f64))
}

/// `children` no-op jobs, and one more after all of them.
fn fan_out(conn: &mut PgConnection, children: usize) -> Result<(), ToolError> {
    let mut flow = Workflow::new("bench fan-out")?;
    let steps = (0..children)
        .map(|i| flow.add(format!("child-{i}"), &BenchNoop { seq: 0 }))
        .collect::<Result<Vec<_>, _>>()?;
    let fan_in = flow.add("fan-in", &BenchNoop { seq: 0 })?;
    flow.after(fan_in, steps)?;
    flow.enqueue(conn)?;
    Ok(())
}

/// The fan-out and its plain twin, alternated `runs` times.
pub(crate) fn measure(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let children = sizes.workflow_children;
    let n = children + 1;
    let (mut plain, mut flow, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut plain_commits, mut flow_commits) = (Vec::new(), Vec::new());
    let result = (|| {
        for _ in 0..runs {
            reset_workflows(&mut conn)?;
            super::enqueue::insert(&mut conn, &backlog(n, "default")?)?;
            let (plain_secs, plain_per_job) = burn_timed(url, &mut conn, n)?;
            reset_workflows(&mut conn)?;
            fan_out(&mut conn, children)?;
            let (flow_secs, flow_per_job) = burn_timed(url, &mut conn, n)?;
            plain.push(n as f64 / plain_secs);
            flow.push(n as f64 / flow_secs);
            ratios.push(flow_secs / plain_secs);
            plain_commits.push(plain_per_job);
            flow_commits.push(flow_per_job);
        }
        Ok::<_, ToolError>(())
    })();
    reset_workflows(&mut conn)?;
    result?;
    Ok(vec![
        Row::new(
            format!("burn-down, {WORKERS} workers, {n} plain jobs"),
            "jobs/s",
            plain,
        ),
        Row::new(
            format!("burn-down, {children}-child fan-out and one fan-in"),
            "jobs/s",
            flow,
        ),
        Row::new(
            "burn-down time, fan-out and fan-in / plain",
            "ratio",
            ratios,
        )
        .note("same run, alternated; target ≤ 2"),
        Row::new(
            "transactions per job, plain burn-down",
            "xacts",
            plain_commits,
        ),
        Row::new(
            "transactions per job, fan-out and fan-in",
            "xacts",
            flow_commits,
        )
        .note("the release is in the completion's statement: no transaction per parent"),
    ])
}
