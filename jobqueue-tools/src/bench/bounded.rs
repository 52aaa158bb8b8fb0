//! Work bounded by what changed, not by what is live (`bounded`).
//!
//! Maintenance: one pass of each service that reads live rows (promotion,
//! key admission with its sweep, workflow ends, reclaim, rescue, prune),
//! timed on a database holding a workflow of `bounded_rows` live steps and
//! `bounded_rows` keyed jobs waiting behind busy keys, against the same
//! passes on empty tables, alternated run after run.
//!
//! Claims: a runner of every queue drains the same jobs spread over 1,000
//! per-tenant queues, each with a rate limit that does not bind, against
//! the same queues without limits; then a limit that binds, and the most
//! claims of one queue in any window of its period, from `claimed_at`.

use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection};
use jobqueue_core::{JobOptions, NewJob, RateLimit};
use jobqueue_runner::maintenance::{
    AdmitKeys, Promote, Prune, Reclaim, Rescue, Service, ServiceContext, WorkflowEnds,
};
use jobqueue_runner::{Runner, RunnerConfig, RunnerHandle};

use super::enqueue::insert;
use super::noop::BenchNoop;
use super::queues::until_completed;
use super::{Row, Sizes, db, median};
use crate::ToolError;

/// Passes of each service per measurement (their median is the figure).
const PASSES: usize = 5;
/// Per-tenant queues of the claim measurement.
const TENANTS: usize = 1_000;
/// Worker threads of the draining runner.
const WORKERS: usize = 8;
/// Starts per second of the rate limit that does not bind.
const LOOSE_RATE: u32 = 1_000_000;
/// Starts per second of the rate limit that binds, and jobs per tenant.
const TIGHT_RATE: u32 = 5;
const TIGHT_JOBS: usize = 15;

/// Empties the tables the measurements fill.
fn empty(conn: &mut PgConnection) -> Result<(), ToolError> {
    conn.batch_execute(
        "TRUNCATE jobqueue_jobs, jobqueue_workflows, jobqueue_workflow_steps,
                  jobqueue_workflow_edges;
         DELETE FROM jobqueue_queues WHERE name LIKE 'bounded-%' OR name LIKE 'tenant-%';",
    )
    .map_err(db)?;
    analyze(conn)
}

/// Vacuums and analyzes the tables the measurements fill (a statement of
/// its own: VACUUM runs outside a transaction).
fn analyze(conn: &mut PgConnection) -> Result<(), ToolError> {
    use diesel::RunQueryDsl;
    diesel::sql_query("VACUUM (ANALYZE) jobqueue_jobs, jobqueue_workflow_steps, jobqueue_queues")
        .execute(conn)
        .map_err(db)?;
    Ok(())
}

/// A workflow of `n` live steps (blocked jobs), and `n` keyed jobs waiting
/// behind `n / 100` keys whose holder is scheduled an hour ahead (an
/// admission looked at them: they wait for their holder to finish).
fn fill(conn: &mut PgConnection, n: usize) -> Result<(), ToolError> {
    let keys = (n / 100).max(1);
    conn.batch_execute(&format!(
        "INSERT INTO jobqueue_workflows (id, name) VALUES (gen_random_uuid(), 'bounded-wide');
         INSERT INTO jobqueue_jobs (id, job_type, queue, status, workflow_id)
         SELECT gen_random_uuid(), 'bench.noop', 'bounded-wide', 'blocked', w.id
         FROM jobqueue_workflows AS w, generate_series(1, {n});
         INSERT INTO jobqueue_workflow_steps (job_id, workflow_id, name, job_type, parents_left)
         SELECT j.id, j.workflow_id, 'step-' || row_number() OVER (), j.job_type, 1
         FROM jobqueue_jobs AS j WHERE j.queue = 'bounded-wide';
         INSERT INTO jobqueue_queues (name, key_limit) VALUES ('bounded-keyed', 1);
         INSERT INTO jobqueue_jobs (id, job_type, queue, status, concurrency_key, run_at)
         SELECT gen_random_uuid(), 'bench.noop', 'bounded-keyed', 'scheduled', 'key-' || k,
                now() + interval '1 hour'
         FROM generate_series(1, {keys}) AS k;
         INSERT INTO jobqueue_jobs
             (id, job_type, queue, status, concurrency_key, key_checked, run_at)
         SELECT gen_random_uuid(), 'bench.noop', 'bounded-keyed', 'waiting',
                'key-' || (1 + i % {keys}), true, now() - interval '1 minute'
         FROM generate_series(1, {n}) AS i;"
    ))
    .map_err(db)?;
    analyze(conn)
}

/// One pass of `service`: how long it took.
fn timed<S: Service>(mut service: S, cx: &mut ServiceContext) -> Result<Duration, ToolError> {
    let started = Instant::now();
    service.run_once(cx)?;
    Ok(started.elapsed())
}

/// A first pass of each service (fresh, as a runner's first: the key
/// sweep and the workflow sweep are due), one after another: the time of
/// them all, median of [`PASSES`].
fn maintenance_pass(url: &str) -> Result<f64, ToolError> {
    let config = RunnerConfig::new(url);
    let mut cx = ServiceContext::new(config.clone(), super::registry())?;
    let mut passes = Vec::new();
    for _ in 0..PASSES {
        let took = timed(Promote::new(&config), &mut cx)?
            + timed(AdmitKeys::new(&config), &mut cx)?
            + timed(WorkflowEnds::new(&config), &mut cx)?
            + timed(Reclaim::new(&config), &mut cx)?
            + timed(Rescue::new(&config), &mut cx)?
            + timed(Prune::new(&config), &mut cx)?;
        passes.push(took.as_secs_f64() * 1000.0);
    }
    Ok(median(&passes))
}

/// `per_tenant` jobs of each of the [`TENANTS`] queues, each queue with
/// `rate` (or none), drained by a runner of every queue: jobs per second.
fn drain_tenants(
    url: &str,
    conn: &mut PgConnection,
    per_tenant: usize,
    rate: Option<RateLimit>,
) -> Result<f64, ToolError> {
    let n = tenants_backlog(conn, per_tenant, rate)?;
    let started = Instant::now();
    let runner = tenants_runner(url)?;
    let took = until_completed(&runner, n, started, "a drain of the tenants");
    runner.shutdown();
    Ok(n as f64 / took?.as_secs_f64())
}

/// The share of `per_tenant` jobs of each of the [`TENANTS`] queues, each
/// with `rate`, that a runner of every queue completed within `within`.
fn drained_within(
    url: &str,
    conn: &mut PgConnection,
    per_tenant: usize,
    rate: RateLimit,
    within: Duration,
) -> Result<f64, ToolError> {
    let n = tenants_backlog(conn, per_tenant, Some(rate))?;
    let started = Instant::now();
    let runner = tenants_runner(url)?;
    while (runner.stats().completed as usize) < n && started.elapsed() < within {
        std::thread::sleep(Duration::from_millis(20));
    }
    let completed = runner.stats().completed as f64;
    runner.shutdown();
    Ok(completed / n as f64)
}

/// A runner of every queue, [`WORKERS`] workers, started.
fn tenants_runner(url: &str) -> Result<RunnerHandle, ToolError> {
    Ok(Runner::new(
        RunnerConfig::new(url).concurrency(WORKERS),
        super::registry(),
    )
    .start()?)
}

/// Fills the [`TENANTS`] queues with `per_tenant` jobs each and gives each
/// `rate` (or none); returns how many jobs.
fn tenants_backlog(
    conn: &mut PgConnection,
    per_tenant: usize,
    rate: Option<RateLimit>,
) -> Result<usize, ToolError> {
    empty(conn)?;
    let jobs: Vec<NewJob> = (0..per_tenant * TENANTS)
        .map(|i| {
            let queue = format!("tenant-{:05}", i % TENANTS);
            NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new().queue(queue))
        })
        .collect::<Result<_, _>>()?;
    insert(conn, &jobs)?;
    for tenant in 0..TENANTS {
        jobqueue_core::set_queue_rate_limit(conn, &format!("tenant-{tenant:05}"), rate)?;
    }
    analyze(conn)?;
    Ok(jobs.len())
}

#[derive(diesel::QueryableByName)]
struct Most {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Logs every claim (its queue and `claimed_at`) in `bounded_claims`, by a
/// trigger: the database's own record, whatever the runner does with the
/// job after (completed jobs are deleted).
fn log_claims(conn: &mut PgConnection) -> Result<(), ToolError> {
    conn.batch_execute(
        "CREATE TABLE IF NOT EXISTS bounded_claims (queue text NOT NULL, at timestamptz NOT NULL);
         TRUNCATE bounded_claims;
         CREATE OR REPLACE FUNCTION bounded_log_claim() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             INSERT INTO bounded_claims VALUES (NEW.queue, NEW.claimed_at);
             RETURN NULL;
         END $$;
         CREATE OR REPLACE TRIGGER bounded_log_claim AFTER UPDATE OF status ON jobqueue_jobs
             FOR EACH ROW WHEN (NEW.status = 'claimed') EXECUTE FUNCTION bounded_log_claim();",
    )
    .map_err(db)
}

/// Drops what [`log_claims`] made.
fn unlog_claims(conn: &mut PgConnection) -> Result<(), ToolError> {
    conn.batch_execute(
        "DROP TRIGGER IF EXISTS bounded_log_claim ON jobqueue_jobs;
         DROP FUNCTION IF EXISTS bounded_log_claim();
         DROP TABLE IF EXISTS bounded_claims;",
    )
    .map_err(db)
}

/// The most logged claims of one queue in any window of `period` (from
/// each claim, the claims of its queue within the period after it).
fn most_in_window(conn: &mut PgConnection, period: Duration) -> Result<i64, ToolError> {
    use diesel::RunQueryDsl;
    Ok(diesel::sql_query(format!(
        "SELECT coalesce(max(n), 0)::int8 AS n FROM (
             SELECT count(*) OVER (PARTITION BY queue ORDER BY at
                                   RANGE BETWEEN CURRENT ROW
                                   AND interval '{} microseconds' FOLLOWING) AS n
             FROM bounded_claims) AS w",
        period.as_micros().saturating_sub(1)
    ))
    .get_result::<Most>(conn)
    .map_err(db)?
    .n)
}

pub(crate) fn measure(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.bounded_rows;
    let (mut empty_ms, mut full_ms, mut pass_ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut plain, mut rated, mut claim_ratios, mut held, mut drained) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let loose = RateLimit::new(LOOSE_RATE, Duration::from_secs(1))?;
    let tight = RateLimit::new(TIGHT_RATE, Duration::from_secs(1))?;
    let per_tenant = (sizes.spread_jobs / TENANTS).max(2);
    let result = (|| {
        for _ in 0..runs {
            empty(&mut conn)?;
            let idle = maintenance_pass(url)?;
            fill(&mut conn, n)?;
            let busy = maintenance_pass(url)?;
            empty_ms.push(idle);
            full_ms.push(busy);
            pass_ratios.push(busy / idle);

            let unlimited = drain_tenants(url, &mut conn, per_tenant, None)?;
            let limited = drain_tenants(url, &mut conn, per_tenant, Some(loose))?;
            plain.push(unlimited);
            rated.push(limited);
            claim_ratios.push(limited / unlimited);
            log_claims(&mut conn)?;
            drained.push(drained_within(
                url,
                &mut conn,
                TIGHT_JOBS,
                tight,
                sizes.bounded_within,
            )?);
            held.push(most_in_window(&mut conn, Duration::from_secs(1))? as f64);
            unlog_claims(&mut conn)?;
        }
        Ok::<_, ToolError>(())
    })();
    unlog_claims(&mut conn)?;
    empty(&mut conn)?;
    result?;
    Ok(vec![
        Row::new("maintenance pass, empty tables", "ms", empty_ms)
            .note("promote, admit keys, workflow ends, reclaim, rescue, prune"),
        Row::new(
            format!("maintenance pass, {n} live steps + {n} waiting keyed jobs"),
            "ms",
            full_ms,
        ),
        Row::new("maintenance pass, full / empty", "ratio", pass_ratios)
            .note("same run; target ≤ 2"),
        Row::new(
            format!("drain {TENANTS} queues × {per_tenant} jobs, no limits, {WORKERS} workers"),
            "jobs/s",
            plain,
        ),
        Row::new(
            format!("drain {TENANTS} rate-limited queues × {per_tenant} jobs"),
            "jobs/s",
            rated,
        )
        .note(format!("{LOOSE_RATE}/1s each, not binding")),
        Row::new(
            "drain, rate-limited / unlimited queues",
            "ratio",
            claim_ratios,
        )
        .note("same run; target ≥ 0.7"),
        Row::new(
            format!("most claims of a queue in 1s, {TENANTS} queues limited to {TIGHT_RATE}/1s"),
            "claims",
            held,
        )
        .note(format!("{TIGHT_JOBS} jobs each; must be ≤ {TIGHT_RATE}")),
        Row::new(
            format!(
                "share of those jobs done within {}s",
                sizes.bounded_within.as_secs()
            ),
            "ratio",
            drained,
        )
        .note(format!(
            "{} s at the limit; 1.00 when the limit is the only brake",
            TIGHT_JOBS as u32 / TIGHT_RATE
        )),
    ])
}
