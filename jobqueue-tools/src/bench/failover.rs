//! Failover: what a crash of the primary costs. A primary and a streaming
//! standby of the bench's own (throwaway clusters made from the machine's
//! PostgreSQL binaries, at their defaults), four runner processes (this
//! binary's `work`, 16 workers each) and a producer (20 no-op jobs every
//! 10 ms, about 2,000 jobs/s), all reaching the servers through one libpq
//! multi-host URL with `target_session_attrs=read-write`. Once 8,000 jobs
//! are done, the primary is stopped in immediate mode and the standby
//! promoted; the load goes on for 10 s, then every job left is worked.
//!
//! Checked job by job on the new primary, with synchronous replication and
//! with asynchronous: of the jobs whose enqueue the producer saw commit,
//! those missing or never completed (lost), and those claimed more than
//! once (a claim or completion that went down with the old primary: the
//! job ran again); how soon all four runners listen on the new primary;
//! and how many seconds after the promotion pickup p95 is back within
//! normal (1.5 times its p95 before the crash, plus 5 ms). A run lost with
//! the old primary's unstreamed WAL leaves no trace on the new one, so
//! "claimed again" counts only the re-runs the new primary can see:
//! `tests/fault_failover.rs` also counts each execution of exactly-once
//! and at-least-once handlers, and fences and freezes the primary.
//!
//! Only run when named (`--only failover`): it needs the PostgreSQL server
//! binaries, as `--own-cluster` does.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use diesel::sql_types::{Array, BigInt, Double, Text};
use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{JobId, JobOptions, NewJob};

use super::{BenchNoop, Row, count, db};
use crate::ToolError;
use crate::postgres::{StopMode, ThrowawayCluster};

const RUNNERS: usize = 4;
/// The producer's batches: `BATCH` jobs every `TICK`.
const BATCH: usize = 20;
const TICK: Duration = Duration::from_millis(10);
/// Jobs done under the load before the crash.
const DONE_BEFORE: i64 = 8_000;
/// How long the load goes on after the promotion.
const AFTER: Duration = Duration::from_secs(10);
const DATABASE: &str = "jobqueue_failover";
const STANDBY: &str = "standby1";
/// Longest wait for any one step (replication, listeners, the last jobs).
const STEP: Duration = Duration::from_secs(120);

/// One scenario's figures.
struct Figures {
    acked: f64,
    lost: f64,
    claimed_again: f64,
    before_p95_ms: f64,
    listeners_back_secs: f64,
    seconds_to_normal: f64,
}

/// Sync and async, `runs` times each.
pub(crate) fn measure(runs: usize) -> Result<Vec<Row>, ToolError> {
    let exe = std::env::current_exe()?;
    let mut rows = Vec::new();
    for (sync, name) in [(true, "synchronous"), (false, "asynchronous")] {
        let figures = (0..runs)
            .map(|_| scenario(&exe, sync))
            .collect::<Result<Vec<_>, _>>()?;
        let of = |f: fn(&Figures) -> f64| figures.iter().map(f).collect::<Vec<_>>();
        let row = |what: &str, unit: &'static str, f: fn(&Figures) -> f64| {
            Row::new(format!("failover {name}: {what}"), unit, of(f))
        };
        rows.push(
            row("acknowledged jobs", "jobs", |f| f.acked).note("enqueues the producer saw commit"),
        );
        rows.push(
            row("lost", "jobs", |f| f.lost).note("acknowledged, then missing or never completed"),
        );
        rows.push(
            row("claimed again", "jobs", |f| f.claimed_again)
                .note("ran again: a claim or completion went down with the old primary"),
        );
        rows.push(
            row("listeners back", "s", |f| f.listeners_back_secs)
                .note("from the promotion until all 4 runners listen on the new primary"),
        );
        rows.push(
            row("pickup p95 before the crash", "ms", |f| f.before_p95_ms)
                .note("the baseline of the next row"),
        );
        rows.push(
            row("seconds to normal pickup", "s", |f| f.seconds_to_normal)
                .note("after the promotion, until pickup p95 stays within 1.5 × before + 5 ms"),
        );
    }
    Ok(rows)
}

/// The runner processes, killed when dropped (on an error midway too).
struct Runners(Vec<Child>);

impl Drop for Runners {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn execute(conn: &mut PgConnection, sql: &str) -> Result<(), ToolError> {
    diesel::sql_query(sql).execute(conn).map_err(db)?;
    Ok(())
}

#[derive(diesel::QueryableByName)]
struct Figure {
    #[diesel(sql_type = Double)]
    value: f64,
}

fn figure(conn: &mut PgConnection, sql: &str) -> Result<f64, ToolError> {
    Ok(diesel::sql_query(sql)
        .get_result::<Figure>(conn)
        .map_err(db)?
        .value)
}

/// Polls `condition` every 50 ms until it holds; an error naming `what`
/// after [`STEP`].
fn wait(
    what: &str,
    mut condition: impl FnMut() -> Result<bool, ToolError>,
) -> Result<(), ToolError> {
    let deadline = Instant::now() + STEP;
    while !condition()? {
        if Instant::now() > deadline {
            return Err(ToolError::Usage(format!(
                "failover: {what} did not happen within {} s",
                STEP.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Whether the primary lists the standby with `condition` true.
fn replication(primary: &mut PgConnection, condition: &str) -> Result<bool, ToolError> {
    let sql = format!(
        "SELECT count(*)::float8 AS value FROM pg_stat_replication
         WHERE application_name = '{STANDBY}' AND {condition}"
    );
    Ok(figure(primary, &sql)? == 1.0)
}

/// Runner connections waiting on `LISTEN`.
fn listening(conn: &mut PgConnection) -> Result<usize, ToolError> {
    let sql = "SELECT count(*)::float8 AS value FROM pg_stat_activity
               WHERE datname = current_database() AND query LIKE 'LISTEN %'";
    Ok(figure(conn, sql)? as usize)
}

/// Ids of the jobs whose enqueue committed.
type Acked = Vec<JobId>;

/// Enqueues `BATCH` no-op jobs every `TICK` through `url` until `stop`,
/// reconnecting after any error; returns the ids of the batches that
/// committed (a batch whose commit failed is of unknown outcome, and left
/// out).
fn produce(url: &str, stop: &AtomicBool) -> Acked {
    let mut acked = Vec::new();
    let mut conn: Option<PgConnection> = None;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        next += TICK;
        match next.checked_duration_since(Instant::now()) {
            Some(pause) => std::thread::sleep(pause),
            None => next = Instant::now(),
        }
        let batch: Vec<NewJob> = (0..BATCH)
            .filter_map(|_| NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new()).ok())
            .collect();
        if conn.is_none() {
            conn = PgConnection::establish(url).ok();
        }
        let Some(c) = conn.as_mut() else { continue };
        match jobqueue_core::enqueue_many(c, &batch) {
            Ok(_) => acked.extend(batch.iter().map(NewJob::id)),
            Err(_) => conn = None,
        }
    }
    acked
}

/// Pickup p95 (ms) of the jobs created from `from` seconds after epoch
/// second `at` on (first claims only).
fn pickup_p95_from(conn: &mut PgConnection, at: f64, from: i64) -> Result<f64, ToolError> {
    figure(
        conn,
        &format!(
            "SELECT coalesce(percentile_cont(0.95) WITHIN GROUP (
                        ORDER BY EXTRACT(EPOCH FROM claimed_at - created_at) * 1000), 0)::float8
                    AS value
             FROM jobqueue_jobs
             WHERE EXTRACT(EPOCH FROM created_at) >= {at} + {from} AND attempts = 1"
        ),
    )
}

/// Of the `acked` jobs, those missing or not completed, and those claimed
/// more than once, on `conn`.
fn check(conn: &mut PgConnection, acked: &[JobId]) -> Result<(i64, i64), ToolError> {
    #[derive(diesel::QueryableByName)]
    struct Check {
        #[diesel(sql_type = BigInt)]
        lost: i64,
        #[diesel(sql_type = BigInt)]
        again: i64,
    }
    let ids: Vec<String> = acked.iter().map(ToString::to_string).collect();
    let check = diesel::sql_query(
        "SELECT count(*) FILTER (WHERE j.id IS NULL OR j.status <> 'completed') AS lost,
                count(*) FILTER (WHERE j.claim_count > 1) AS again
         FROM unnest($1::text[]) AS a(id)
         LEFT JOIN jobqueue_jobs AS j ON j.id = a.id::uuid",
    )
    .bind::<Array<Text>, _>(&ids)
    .get_result::<Check>(conn)
    .map_err(db)?;
    Ok((check.lost, check.again))
}

fn scenario(exe: &Path, sync: bool) -> Result<Figures, ToolError> {
    let primary = ThrowawayCluster::start("bench-primary", &[])?;
    let mut admin = PgConnection::establish(&primary.url("postgres")).map_err(db)?;
    execute(&mut admin, &format!("CREATE DATABASE {DATABASE}"))?;
    let mut conn = PgConnection::establish(&primary.url(DATABASE)).map_err(db)?;
    jobqueue_core::run_migrations(&mut conn)?;
    let standby = ThrowawayCluster::new("bench-standby", &[])?;
    standby
        .cluster()
        .clone_as_standby(primary.cluster(), STANDBY)?;
    standby.cluster().start()?;
    standby.cluster().wait_ready(STEP)?;
    wait("streaming to the standby", || {
        replication(&mut admin, "state = 'streaming'")
    })?;
    if sync {
        execute(
            &mut admin,
            &format!("ALTER SYSTEM SET synchronous_standby_names = '{STANDBY}'"),
        )?;
        execute(&mut admin, "SELECT pg_reload_conf()")?;
        wait("synchronous replication", || {
            replication(&mut admin, "sync_state = 'sync'")
        })?;
    }
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{DATABASE}\
         ?target_session_attrs=read-write&connect_timeout=2",
        primary.cluster().port(),
        standby.cluster().port()
    );
    let mut runners = Runners(Vec::new());
    for i in 0..RUNNERS {
        let child = Command::new(exe)
            .args(["--database-url", &url, "work", "--concurrency", "16"])
            .args(["--db-timeout-secs", "2", "--retain-completed-hours", "1"])
            .args(["--worker-id", &format!("failover-{i}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        runners.0.push(child);
    }
    wait("all runners listening", || {
        Ok(listening(&mut conn)? == RUNNERS)
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (url, stop) = (url.clone(), Arc::clone(&stop));
        std::thread::spawn(move || produce(&url, &stop))
    };
    wait("the load before the crash", || {
        Ok(count(&mut conn, "status = 'completed'")? >= DONE_BEFORE)
    })?;
    let before_p95_ms = figure(
        &mut conn,
        "SELECT coalesce(percentile_cont(0.95) WITHIN GROUP (
                    ORDER BY EXTRACT(EPOCH FROM claimed_at - created_at) * 1000), 0)::float8
                AS value
         FROM jobqueue_jobs
         WHERE created_at BETWEEN now() - interval '3 s' AND now() - interval '0.5 s'
           AND attempts = 1",
    )?;
    drop((conn, admin));

    primary.cluster().stop(StopMode::Immediate)?;
    standby.cluster().promote()?;
    let promoted = Instant::now();
    let mut new = PgConnection::establish(&standby.url(DATABASE)).map_err(db)?;
    let promoted_at = figure(
        &mut new,
        "SELECT EXTRACT(EPOCH FROM now())::float8 AS value",
    )?;
    wait("all runners listening on the new primary", || {
        Ok(listening(&mut new)? == RUNNERS)
    })?;
    let listeners_back_secs = promoted.elapsed().as_secs_f64();
    std::thread::sleep(AFTER.saturating_sub(promoted.elapsed()));
    stop.store(true, Ordering::Relaxed);
    let acked = producer
        .join()
        .map_err(|_| ToolError::Usage("failover: the producer panicked".into()))?;
    wait("every job worked on the new primary", || {
        Ok(count(
            &mut new,
            "status IN ('scheduled', 'pending', 'claimed', 'running')",
        )? == 0)
    })?;
    for child in &mut runners.0 {
        if let Some(status) = child.try_wait()? {
            return Err(ToolError::Usage(format!(
                "failover: a runner exited during the scenario ({status})"
            )));
        }
    }
    drop(runners);

    let (lost, again) = check(&mut new, &acked)?;
    let normal = before_p95_ms * 1.5 + 5.0;
    let last = AFTER.as_secs() as i64;
    let mut seconds_to_normal = f64::INFINITY;
    for from in 0..last {
        if pickup_p95_from(&mut new, promoted_at, from)? <= normal {
            seconds_to_normal = from as f64;
            break;
        }
    }
    Ok(Figures {
        acked: acked.len() as f64,
        lost: lost as f64,
        claimed_again: again as f64,
        before_p95_ms,
        listeners_back_secs,
        seconds_to_normal,
    })
}
