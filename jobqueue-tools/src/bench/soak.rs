//! The soak: a day's load in an hour. A steady producer (one transaction
//! of `rate / 100` jobs every 10 ms) against one runner of 32 workers for
//! `secs`, with a `REPEATABLE READ` transaction pinning the xmin horizon
//! through the middle third (a long report, or a stuck client). Every 10 s
//! it prints a line of the curves: jobs completed per second, pickup p95
//! (creation to claim, noted by each job's handler) of the jobs worked in
//! the window, due backlog, dead row versions, and the sizes of the table
//! and of the claim's index, WAL written, and the checkpoints and vacuums of
//! the jobs table that began in the window, and what the server's
//! processes were found waiting on, sampled every 100 ms (`wait_sampler`):
//! what a window's latency blip usually lines up with.
//! The rows compare the last minute with the first (pickup p95 over all
//! the minute's pickups), say how long the dead versions took to come
//! back down after the pin, and give the claim index's size as the pin
//! began, as it ended, and at the end of the run, once the runner's index
//! upkeep (every [`INDEX_UPKEEP_EVERY`] here) has rebuilt what the pin grew.
//!
//! Only run when named (`--only soak`): it takes `--soak-secs` (600 by
//! default). The runner keeps completed jobs as a runner does by default
//! (it deletes them as they complete) unless `--soak-retain-completed-hours`
//! says otherwise, when the table grows with history; what must not grow
//! is the dead versions once the pin ends, and what must not slow is the
//! claim.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{JobOptions, NewJob};
use jobqueue_runner::{Runner, RunnerConfig};

use super::noop::{BenchPickup, take_pickups};
use super::wait_sampler::WaitSampler;
use super::{Row, db, quantile, reset};
use crate::ToolError;

/// How often the curves are sampled.
const SAMPLE: Duration = Duration::from_secs(10);
/// Producer ticks.
const TICK: Duration = Duration::from_millis(10);
/// How often the soak's runner looks whether an index of live jobs needs a
/// rebuild (the default is 10 minutes, longer than a short soak's last
/// third): a rebuild of the claim index the pin grew shows within the run.
const INDEX_UPKEEP_EVERY: Duration = Duration::from_secs(15);

/// One window of the curves.
#[derive(Debug, Clone)]
struct Sample {
    completed: u64,
    /// The pickups of the jobs worked in the window, sorted (ms).
    pickups: Vec<f64>,
    table: TableSample,
}

impl Sample {
    fn pickup_p95_ms(&self) -> f64 {
        p95_of(&self.pickups)
    }
}

/// The 95th percentile of sorted `pickups`, 0 if none.
fn p95_of(pickups: &[f64]) -> f64 {
    if pickups.is_empty() {
        0.0
    } else {
        quantile(pickups, 0.95)
    }
}

/// What the table looked like at the end of a window.
#[derive(diesel::QueryableByName, Debug, Clone, Copy)]
struct TableSample {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    due: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    dead: i64,
    #[diesel(sql_type = diesel::sql_types::Double)]
    table_mb: f64,
    #[diesel(sql_type = diesel::sql_types::Double)]
    claim_index_mb: f64,
    /// WAL position, bytes.
    #[diesel(sql_type = diesel::sql_types::Double)]
    wal: f64,
    /// Vacuums of the jobs table so far, automatic or not.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    vacuums: i64,
    /// Checkpoints begun so far.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    checkpoints: i64,
}

/// An expression counting the checkpoints begun so far: PostgreSQL 17
/// moved the counters to a view of their own.
fn checkpoints_expression(conn: &mut PgConnection) -> Result<&'static str, ToolError> {
    let own_view: bool = diesel::select(diesel::dsl::sql::<diesel::sql_types::Bool>(
        "to_regclass('pg_catalog.pg_stat_checkpointer') IS NOT NULL",
    ))
    .get_result(conn)
    .map_err(db)?;
    Ok(if own_view {
        "(SELECT num_timed + num_requested FROM pg_stat_checkpointer)"
    } else {
        "(SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)"
    })
}

/// The window ending now: the jobs `runner` completed since `completed`
/// (its count then), the pickups their handlers noted, and the table;
/// `checkpoints` counts the checkpoints begun.
fn sample(
    conn: &mut PgConnection,
    runner: &jobqueue_runner::RunnerHandle,
    completed: &mut u64,
    checkpoints: &str,
) -> Result<Sample, ToolError> {
    let now = runner.stats().completed;
    let in_window = now - *completed;
    *completed = now;
    let mut pickups = take_pickups();
    pickups.sort_by(f64::total_cmp);
    let table = diesel::sql_query(format!(
        "SELECT (SELECT count(*) FROM jobqueue_jobs WHERE status = 'pending') AS due,
                (SELECT coalesce(n_dead_tup, 0) FROM pg_stat_user_tables
                 WHERE relid = 'jobqueue_jobs'::regclass) AS dead,
                pg_total_relation_size('jobqueue_jobs') / 1048576.0::float8 AS table_mb,
                pg_relation_size('jobqueue_jobs_fetch_idx') / 1048576.0::float8 AS claim_index_mb,
                (pg_current_wal_insert_lsn() - '0/0')::float8 AS wal,
                (SELECT coalesce(vacuum_count + autovacuum_count, 0) FROM pg_stat_user_tables
                 WHERE relid = 'jobqueue_jobs'::regclass) AS vacuums,
                {checkpoints}::int8 AS checkpoints"
    ))
    .get_result(conn)
    .map_err(db)?;
    Ok(Sample {
        completed: in_window,
        pickups,
        table,
    })
}

/// Enqueues `per_tick` jobs in one transaction every [`TICK`] until `stop`;
/// returns the jobs enqueued. Not the latency bench's producer: that one
/// keeps every job's commit time, millions of entries over a soak, where
/// here each job's handler notes its pickup by the database's clock.
fn produce(url: &str, per_tick: usize, stop: &AtomicBool) -> Result<u64, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let mut next = Instant::now();
    let mut produced = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let batch: Vec<NewJob> = (0..per_tick)
            .map(|_| NewJob::from_job(&BenchPickup {}, JobOptions::new()))
            .collect::<Result<_, _>>()?;
        jobqueue_core::enqueue_many(&mut conn, &batch)?;
        produced += per_tick as u64;
        next += TICK;
        match next.checked_duration_since(Instant::now()) {
            Some(wait) => std::thread::sleep(wait),
            None => next = Instant::now(),
        }
    }
    Ok(produced)
}

/// Runs the soak: `rate` jobs/s for `secs` seconds, the horizon pinned from
/// a third to two thirds of it; completed jobs kept for `keep_completed`
/// (`None`: the runner's default).
pub(crate) fn soak(
    url: &str,
    rate: u32,
    secs: u64,
    keep_completed: Option<Duration>,
) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    reset(&mut conn)?;
    let mut config = RunnerConfig::new(url).concurrency(32);
    config.index_upkeep_interval = INDEX_UPKEEP_EVERY;
    if let Some(keep) = keep_completed {
        config = config.keep_completed(keep);
    }
    let kept = match config.retention.completed {
        None => "completed jobs kept".to_owned(),
        Some(keep) if keep.is_zero() => "completed jobs deleted as they complete".to_owned(),
        Some(keep) => format!("completed jobs kept {:.1} h", keep.as_secs_f64() / 3600.0),
    };
    let runner = Runner::new(config, super::registry()).start()?;
    let waits = WaitSampler::start(url)?;
    take_pickups();
    let mut completed = 0;
    let checkpoints = checkpoints_expression(&mut conn)?;
    let mut previous = sample(&mut conn, &runner, &mut completed, checkpoints)?.table;
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (url, stop) = (url.to_owned(), Arc::clone(&stop));
        let per_tick = (rate as usize / 100).max(1);
        std::thread::spawn(move || produce(&url, per_tick, &stop))
    };
    let length = Duration::from_secs(secs);
    let (pin_at, unpin_at) = (length / 3, length * 2 / 3);
    let started = Instant::now();
    let mut pin: Option<PgConnection> = None;
    let mut samples: Vec<(f64, &'static str, Sample)> = Vec::new();
    crate::out!(
        "soak: {rate} jobs/s for {secs} s, 32 workers, {kept}; horizon pinned from {} s to {} s; \
         index upkeep every {} s",
        pin_at.as_secs(),
        unpin_at.as_secs(),
        INDEX_UPKEEP_EVERY.as_secs()
    );
    crate::out!(
        "{:>6} {:>7} {:>10} {:>11} {:>8} {:>10} {:>9} {:>14} {:>7}  began | waited (processes \
         seen waiting, summed over samples every 100 ms)",
        "t (s)",
        "phase",
        "jobs/s",
        "pickup p95",
        "due",
        "dead",
        "table MB",
        "claim index MB",
        "WAL MB"
    );
    let mut next = started + SAMPLE;
    // A producer that stopped early failed: its error is reported below.
    while started.elapsed() < length && !producer.is_finished() {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += SAMPLE;
        let elapsed = started.elapsed();
        // The phase of the window just sampled; then the pin for the next.
        let phase = match (pin.is_some(), elapsed <= pin_at + SAMPLE / 2) {
            (true, _) => "pinned",
            (false, true) => "before",
            (false, false) => "after",
        };
        if pin.is_none() && elapsed + SAMPLE / 2 >= pin_at && elapsed < unpin_at {
            let mut holder = PgConnection::establish(url).map_err(db)?;
            diesel::sql_query("BEGIN ISOLATION LEVEL REPEATABLE READ")
                .execute(&mut holder)
                .map_err(db)?;
            diesel::sql_query("SELECT count(*) FROM jobqueue_queues")
                .execute(&mut holder)
                .map_err(db)?;
            pin = Some(holder);
        } else if elapsed + SAMPLE / 2 >= unpin_at
            && let Some(mut holder) = pin.take()
        {
            diesel::sql_query("COMMIT")
                .execute(&mut holder)
                .map_err(db)?;
        }
        let s = sample(&mut conn, &runner, &mut completed, checkpoints)?;
        let waited = waits.take().to_string();
        crate::out!(
            "{:>6.0} {:>7} {:>10.0} {:>8.1} ms {:>8} {:>10} {:>9.0} {:>14.1} {:>7.0}  {}{}{}",
            elapsed.as_secs_f64(),
            phase,
            s.completed as f64 / SAMPLE.as_secs_f64(),
            s.pickup_p95_ms(),
            s.table.due,
            s.table.dead,
            s.table.table_mb,
            s.table.claim_index_mb,
            (s.table.wal - previous.wal) / 1048576.0,
            began(&previous, &s.table),
            if waited.is_empty() { "" } else { " | " },
            waited
        );
        previous = s.table;
        samples.push((elapsed.as_secs_f64(), phase, s));
    }
    stop.store(true, Ordering::Relaxed);
    let produced = producer
        .join()
        .map_err(|_| ToolError::Usage("the soak's producer panicked".into()))??;
    drop(waits);
    runner.shutdown();
    Ok(rows(
        &samples,
        produced as f64 / started.elapsed().as_secs_f64(),
    ))
}

/// The checkpoints and vacuums of the jobs table that began between two
/// samples, as a window's line shows them.
fn began(before: &TableSample, after: &TableSample) -> String {
    let mut events = Vec::new();
    for (n, what) in [
        (after.checkpoints - before.checkpoints, "checkpoint"),
        (after.vacuums - before.vacuums, "vacuum"),
    ] {
        match n {
            0 => {}
            1 => events.push(what.to_owned()),
            n => events.push(format!("{n} × {what}")),
        }
    }
    events.join(", ")
}

/// The summary rows of the sampled curves.
fn rows(samples: &[(f64, &'static str, Sample)], produced_rate: f64) -> Vec<Row> {
    let minute = (60.0 / SAMPLE.as_secs_f64()).round() as usize;
    let first = &samples[..minute.min(samples.len())];
    let last = &samples[samples.len().saturating_sub(minute)..];
    let mean = |window: &[(f64, &str, Sample)], f: &dyn Fn(&Sample) -> f64| {
        window.iter().map(|(_, _, s)| f(s)).sum::<f64>() / window.len().max(1) as f64
    };
    let rate = |s: &Sample| s.completed as f64 / SAMPLE.as_secs_f64();
    let p95 = |s: &Sample| s.pickup_p95_ms();
    // Over every pickup of the minute, not the mean of its windows' p95.
    let minute_p95 = |window: &[(f64, &str, Sample)]| {
        let mut all: Vec<f64> = window
            .iter()
            .flat_map(|(_, _, s)| s.pickups.iter().copied())
            .collect();
        all.sort_by(f64::total_cmp);
        p95_of(&all)
    };
    let in_phase = |phase: &'static str| samples.iter().filter(move |(_, p, _)| *p == phase);
    let most_dead = |phase| {
        in_phase(phase)
            .map(|(_, _, s)| s.table.dead)
            .max()
            .unwrap_or(0)
    };
    let (dead_before, dead_pinned) = (most_dead("before"), most_dead("pinned"));
    let unpinned_at = in_phase("after").next().map(|(t, _, _)| *t);
    let back_at = in_phase("after")
        .find(|(_, _, s)| s.table.dead <= dead_before.max(1))
        .map(|(t, _, _)| *t);
    let back_secs = match (unpinned_at, back_at) {
        (Some(from), Some(to)) => to - from + SAMPLE.as_secs_f64(),
        _ => f64::NAN,
    };
    let last_of = |phase, f: &dyn Fn(&TableSample) -> f64| {
        in_phase(phase)
            .next_back()
            .map_or(f64::NAN, |(_, _, s)| f(&s.table))
    };
    let size_at = |phase| last_of(phase, &|t| t.table_mb);
    let claim_index_at = |phase| last_of(phase, &|t| t.claim_index_mb);
    let (first_rate, last_rate) = (mean(first, &rate), mean(last, &rate));
    let (first_p95, last_p95) = (minute_p95(first), minute_p95(last));
    // The worst 10-s window of the pin, each way.
    let slowest_pinned = in_phase("pinned")
        .map(|(_, _, s)| rate(s))
        .fold(f64::NAN, f64::min);
    let worst_pinned_p95 = in_phase("pinned")
        .map(|(_, _, s)| p95(s))
        .fold(f64::NAN, f64::max);
    vec![
        Row::new("soak: producer rate", "jobs/s", vec![produced_rate]),
        Row::new("soak: completed, first minute", "jobs/s", vec![first_rate]),
        Row::new("soak: completed, last minute", "jobs/s", vec![last_rate]),
        Row::new(
            "soak: completed, last / first minute",
            "ratio",
            vec![last_rate / first_rate],
        )
        .note("target ≥ 0.9"),
        Row::new("soak: pickup p95, first minute", "ms", vec![first_p95]),
        Row::new("soak: pickup p95, last minute", "ms", vec![last_p95]),
        Row::new(
            "soak: pickup p95, last / first minute",
            "ratio",
            vec![last_p95 / first_p95],
        )
        .note("target ≤ 1.1"),
        Row::new(
            "soak: completed while pinned, slowest 10 s / first minute",
            "ratio",
            vec![slowest_pinned / first_rate],
        ),
        Row::new(
            "soak: pickup p95 while pinned, worst 10 s",
            "ms",
            vec![worst_pinned_p95],
        ),
        Row::new(
            "soak: dead row versions, most before pin",
            "tuples",
            vec![dead_before as f64],
        ),
        Row::new(
            "soak: dead row versions, most while pinned",
            "tuples",
            vec![dead_pinned as f64],
        ),
        Row::new("soak: back to the pre-pin most after", "s", vec![back_secs])
            .note("from the pin's end, sampled every 10 s"),
        Row::new(
            "soak: table + indexes as the pin began",
            "MB",
            vec![size_at("before")],
        ),
        Row::new(
            "soak: table + indexes as it ended",
            "MB",
            vec![size_at("pinned")],
        ),
        Row::new(
            "soak: table + indexes at the end",
            "MB",
            vec![size_at("after")],
        )
        .note("completed jobs kept as the soak's first line says"),
        Row::new(
            "soak: claim index as the pin began",
            "MB",
            vec![claim_index_at("before")],
        ),
        Row::new(
            "soak: claim index as the pin ended",
            "MB",
            vec![claim_index_at("pinned")],
        ),
        Row::new(
            "soak: claim index at the end",
            "MB",
            vec![claim_index_at("after")],
        )
        .note("after the runner's index upkeep rebuilt it"),
    ]
}
