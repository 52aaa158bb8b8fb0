//! What a claim costs the server per call (`plan`): a burn-down by a
//! runner of 8 workers, then the claim statements' planning and execution
//! time per call, and how often they were planned, as
//! `pg_stat_statements` counted them (`track_planning` on). Needs the
//! module loaded (`shared_preload_libraries`), which `--own-cluster` does
//! where the server has it.

use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Double, Text};
use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_runner::RunnerConfig;

use super::burn::burn_once;
use super::{Row, Sizes, db};
use crate::ToolError;

/// Workers of the runner whose claims are counted.
const WORKERS: usize = 8;

#[derive(diesel::QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    value: String,
}

#[derive(diesel::QueryableByName)]
struct ClaimCost {
    #[diesel(sql_type = BigInt)]
    calls: i64,
    #[diesel(sql_type = BigInt)]
    plans: i64,
    #[diesel(sql_type = Double)]
    plan_ms: f64,
    #[diesel(sql_type = Double)]
    exec_ms: f64,
}

/// Whether the server at `conn` has `pg_stat_statements` loaded, with
/// planning tracked.
fn available(conn: &mut PgConnection) -> Result<bool, ToolError> {
    let setting = |conn: &mut PgConnection, name: &str| -> Result<String, ToolError> {
        Ok(diesel::sql_query(format!(
            "SELECT coalesce(current_setting('{name}', true), '') AS value"
        ))
        .get_result::<Setting>(conn)
        .map_err(db)?
        .value)
    };
    Ok(setting(conn, "shared_preload_libraries")?
        .split(',')
        .any(|library| library.trim() == "pg_stat_statements")
        && setting(conn, "pg_stat_statements.track_planning")? == "on")
}

/// The claims of one burn-down of `sizes.burn_jobs` jobs: their calls,
/// plans, planning and execution time, summed over the claim statements
/// (those with the `claimed` update: pg_stat_statements keeps a statement's
/// text with its constants replaced by parameters).
fn claim_costs(url: &str, conn: &mut PgConnection, n: usize) -> Result<ClaimCost, ToolError> {
    conn.batch_execute(
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
         SELECT pg_stat_statements_reset();",
    )
    .map_err(db)?;
    burn_once(conn, RunnerConfig::new(url).concurrency(WORKERS), n)?;
    diesel::sql_query(
        "SELECT coalesce(sum(calls), 0)::int8 AS calls, coalesce(sum(plans), 0)::int8 AS plans,
                coalesce(sum(total_plan_time), 0)::float8 AS plan_ms,
                coalesce(sum(total_exec_time), 0)::float8 AS exec_ms
         FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND query LIKE '%claimed AS (%' AND query LIKE '%UPDATE jobqueue_jobs%'",
    )
    .get_result(conn)
    .map_err(db)
}

/// The rows, where the server has `pg_stat_statements` loaded; where it
/// has not, an error when `named` (`--only plan`), else no row (a run of
/// every measurement).
pub(crate) fn measure(
    url: &str,
    sizes: &Sizes,
    runs: usize,
    named: bool,
) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    if !available(&mut conn)? {
        if !named {
            return Ok(Vec::new());
        }
        return Err(ToolError::Usage(
            "--only plan reads pg_stat_statements, which this server has not loaded \
             (shared_preload_libraries, with pg_stat_statements.track_planning = on): \
             run it with --own-cluster, which loads it"
                .into(),
        ));
    }
    let n = sizes.burn_jobs;
    let (mut plan, mut exec, mut planned, mut per_claim) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let cost = claim_costs(url, &mut conn, n)?;
        if cost.calls == 0 {
            return Err(ToolError::Usage(
                "plan: pg_stat_statements counted no claim".into(),
            ));
        }
        let calls = cost.calls as f64;
        plan.push(cost.plan_ms / calls);
        exec.push(cost.exec_ms / calls);
        planned.push(cost.plans as f64 / calls);
        per_claim.push(n as f64 / calls);
    }
    let label = format!("claims of a burn-down, {WORKERS} workers, {n} jobs");
    Ok(vec![
        Row::new(format!("{label}: planning per call"), "ms", plan)
            .note("pg_stat_statements, track_planning on"),
        Row::new(format!("{label}: execution per call"), "ms", exec),
        Row::new(format!("{label}: plans per call"), "ratio", planned)
            .note("0: a cached generic plan; 1: planned at every call"),
        Row::new(format!("{label}: jobs per call"), "jobs", per_claim),
    ])
}
