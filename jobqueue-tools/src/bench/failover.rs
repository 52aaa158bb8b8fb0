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

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{JobId, JobOptions, NewJob};

use super::{BenchNoop, Row, count, db};
use crate::ToolError;
use crate::failover::{AFTER, Acked, BATCH, DONE_BEFORE, RUNNERS, TICK};
use crate::postgres::{StopMode, ThrowawayCluster};

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
    worst_second_ms: f64,
}

/// The rows of each scenario: what, unit, the figure, a note.
type RowOf = (
    &'static str,
    &'static str,
    fn(&Figures) -> f64,
    &'static str,
);
const ROWS: [RowOf; 7] = [
    (
        "acknowledged jobs",
        "jobs",
        |f| f.acked,
        "enqueues the producer saw commit",
    ),
    (
        "lost",
        "jobs",
        |f| f.lost,
        "acknowledged, then missing or never completed",
    ),
    (
        "claimed again",
        "jobs",
        |f| f.claimed_again,
        "ran again: a claim or completion went down with the old primary",
    ),
    (
        "listeners back",
        "s",
        |f| f.listeners_back_secs,
        "from the promotion until all 4 runners listen on the new primary",
    ),
    (
        "pickup p95 before the crash",
        "ms",
        |f| f.before_p95_ms,
        "the baseline of the next rows",
    ),
    (
        "seconds to normal pickup",
        "s",
        |f| f.seconds_to_normal,
        "after the promotion, until pickup p95 stays within 1.5 × before + 5 ms",
    ),
    (
        "worst second's pickup p95 after",
        "ms",
        |f| f.worst_second_ms,
        "of the jobs created in one second after the promotion",
    ),
];

/// Sync and async, `runs` times each.
pub(crate) fn measure(runs: usize) -> Result<Vec<Row>, ToolError> {
    let exe = std::env::current_exe()?;
    let mut rows = Vec::new();
    for (sync, name) in [(true, "synchronous"), (false, "asynchronous")] {
        let figures = (0..runs)
            .map(|_| scenario(&exe, sync))
            .collect::<Result<Vec<_>, _>>()?;
        for (what, unit, figure, note) in ROWS {
            let values = figures.iter().map(figure).collect();
            rows.push(Row::new(format!("failover {name}: {what}"), unit, values).note(note));
        }
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

fn listening(conn: &mut PgConnection) -> Result<usize, ToolError> {
    crate::failover::listening(conn).map_err(db)
}

/// Enqueues `BATCH` no-op jobs every `TICK` through `url` until `stop`,
/// reconnecting after any error; returns the ids of the batches that
/// committed (a batch whose commit failed is of unknown outcome, and left
/// out).
fn produce(url: &str, stop: &AtomicBool) -> Vec<JobId> {
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

fn scenario(exe: &Path, sync: bool) -> Result<Figures, ToolError> {
    let primary = ThrowawayCluster::start("bench-primary", &[])?;
    let mut admin = PgConnection::establish(&primary.url("postgres")).map_err(db)?;
    diesel::sql_query(format!("CREATE DATABASE {DATABASE}"))
        .execute(&mut admin)
        .map_err(db)?;
    drop(admin);
    let mut conn = PgConnection::establish(&primary.url(DATABASE)).map_err(db)?;
    jobqueue_core::run_migrations(&mut conn)?;
    let standby = ThrowawayCluster::standby_of(primary.cluster(), "bench-standby", STANDBY)?;
    if sync {
        primary.cluster().require_sync(STANDBY)?;
    }
    let url = crate::failover::url(primary.cluster(), standby.cluster(), DATABASE, 2);
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
    let before_p95_ms = crate::failover::pickup_p95_lately(&mut conn).map_err(db)?;
    drop(conn);

    primary.cluster().stop(StopMode::Immediate)?;
    standby.cluster().promote()?;
    let promoted = Instant::now();
    let mut new = PgConnection::establish(&standby.url(DATABASE)).map_err(db)?;
    let promoted_at = crate::failover::server_now(&mut new).map_err(db)?;
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

    let outcome = Acked::of(&mut new, &acked).map_err(db)?;
    let seconds = crate::failover::pickup_by_second(&mut new, promoted_at).map_err(db)?;
    let worst_second_ms = seconds.iter().map(|s| s.p95_ms).fold(0.0, f64::max);
    let seconds = seconds.iter().map(|s| s.second);
    let seconds_to_normal =
        crate::failover::seconds_to_normal(&mut new, promoted_at, before_p95_ms, seconds)
            .map_err(db)?
            .map_or(f64::INFINITY, |s| s as f64);
    Ok(Figures {
        acked: acked.len() as f64,
        lost: outcome.lost() as f64,
        claimed_again: outcome.claimed_again as f64,
        before_p95_ms,
        listeners_back_secs,
        seconds_to_normal,
        worst_second_ms,
    })
}
