//! A backlog of a type nobody handles, in a queue that is worked: due jobs
//! of type `bench.unknown` in queue `mail`, older than the `bench.noop`
//! jobs beside them (producers deployed a new type ahead of the workers).
//! One runner of every queue drains the handled jobs; the row compares its
//! claim statement's average round trip (its `claim_duration` histogram)
//! with the same drain without the backlog, and times how long the runner
//! takes to set the whole backlog aside as `unhandled`.

use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{JobOptions, NewJob};
use jobqueue_runner::{MetricsMode, Runner, RunnerConfig, RunnerHandle};

use super::enqueue::insert;
use super::noop::BenchNoop;
use super::{Row, Sizes, count, db, reset};
use crate::ToolError;

/// Worker threads of the draining runner.
const WORKERS: usize = 8;
/// The queue of both kinds of jobs.
const QUEUE: &str = "mail";
/// The longest a drain may take, with its backlog set aside.
const SET_ASIDE_WITHIN: Duration = Duration::from_secs(600);
/// How often the bench counts the unhandled type's due jobs.
const COUNT_EVERY: Duration = Duration::from_millis(500);

/// The average round trip of the runner's claims so far, in milliseconds,
/// from its metrics.
fn average_claim_ms(runner: &RunnerHandle) -> Result<f64, ToolError> {
    let text = runner
        .metrics_text()
        .ok_or_else(|| ToolError::Usage("the bench runner keeps no metrics".into()))?;
    let value = |suffix: &str| {
        text.lines()
            .find_map(|line| {
                let rest = line.strip_prefix("jobqueue_claim_duration_seconds_")?;
                rest.strip_prefix(suffix)?.trim().parse::<f64>().ok()
            })
            .ok_or_else(|| ToolError::Usage(format!("no claim_duration {suffix} in the metrics")))
    };
    Ok(value("sum ")? / value("count ")?.max(1.0) * 1000.0)
}

/// What one drain showed.
struct Drain {
    /// Handled jobs per second, from the runner's start.
    rate: f64,
    /// The claim statement's average round trip, ms.
    claim_ms: f64,
    /// Seconds from the runner's start until no job of the unknown type
    /// was due (0 without a backlog).
    set_aside_secs: f64,
}

/// Drains `n` handled jobs from queue `mail` with `unknown` due jobs of an
/// unhandled type ahead of them.
fn drain(url: &str, conn: &mut PgConnection, n: usize, unknown: usize) -> Result<Drain, ToolError> {
    reset(conn)?;
    diesel::sql_query(
        "INSERT INTO jobqueue_jobs (id, job_type, queue, status, priority, run_at, payload)
         SELECT gen_random_uuid(), 'bench.unknown', $1, 'pending', 100,
                now() - interval '1 hour' + g * interval '1 microsecond', '{\"seq\":0}'
         FROM generate_series(1, $2) AS g",
    )
    .bind::<diesel::sql_types::Text, _>(QUEUE)
    .bind::<diesel::sql_types::Integer, _>(unknown as i32)
    .execute(conn)
    .map_err(db)?;
    let jobs: Vec<NewJob> = (0..n)
        .map(|_| NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new().queue(QUEUE)))
        .collect::<Result<_, _>>()?;
    insert(conn, &jobs)?;
    diesel::sql_query("VACUUM (ANALYZE) jobqueue_jobs")
        .execute(conn)
        .map_err(db)?;
    let mut config = RunnerConfig::new(url).concurrency(WORKERS);
    config.metrics = MetricsMode::Keep;
    let started = Instant::now();
    let runner = Runner::new(config, super::registry()).start()?;
    let unhandled_due = "job_type = 'bench.unknown' AND status = 'pending'";
    let (mut drained, mut set_aside) = (None, (unknown == 0).then_some(Duration::ZERO));
    let mut looked_at = Instant::now();
    while drained.is_none() || set_aside.is_none() {
        let now = started.elapsed();
        if now > SET_ASIDE_WITHIN {
            return Err(ToolError::Usage(format!(
                "the drain beside a backlog did not finish in {SET_ASIDE_WITHIN:?}"
            )));
        }
        if drained.is_none() && runner.stats().completed as usize >= n {
            drained = Some(now);
        }
        // A count reads the queue's due jobs: not more than twice a second.
        if set_aside.is_none() && looked_at.elapsed() >= COUNT_EVERY {
            looked_at = Instant::now();
            if count(conn, unhandled_due)? == 0 {
                set_aside = Some(started.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let claim_ms = average_claim_ms(&runner);
    runner.shutdown();
    Ok(Drain {
        rate: n as f64 / drained.unwrap_or(SET_ASIDE_WITHIN).as_secs_f64(),
        claim_ms: claim_ms?,
        set_aside_secs: set_aside.unwrap_or(SET_ASIDE_WITHIN).as_secs_f64(),
    })
}

pub(crate) fn measure(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let (n, unknown) = (sizes.backlog_jobs, sizes.backlog_unknown);
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        alone.push(drain(url, &mut conn, n, 0)?);
        beside.push(drain(url, &mut conn, n, unknown)?);
    }
    reset(&mut conn)?;
    let values = |drains: &[Drain], f: fn(&Drain) -> f64| drains.iter().map(f).collect::<Vec<_>>();
    let ratio = |f: fn(&Drain) -> f64| {
        alone
            .iter()
            .zip(&beside)
            .map(|(a, b)| f(b) / f(a))
            .collect::<Vec<_>>()
    };
    let what = format!("{n} jobs of `{QUEUE}`");
    let backlog = format!("{unknown} due of an unhandled type ahead");
    Ok(vec![
        Row::new(
            format!("claim round trip, {what} alone"),
            "ms",
            values(&alone, |d| d.claim_ms),
        )
        .note("average of the runner's claims (claim_duration)"),
        Row::new(
            format!("claim round trip, {backlog}"),
            "ms",
            values(&beside, |d| d.claim_ms),
        ),
        Row::new(
            "claim round trip, backlog / alone",
            "ratio",
            ratio(|d| d.claim_ms),
        )
        .note("target ≤ 1.5"),
        Row::new(
            format!("drain {what} alone, {WORKERS} workers"),
            "jobs/s",
            values(&alone, |d| d.rate),
        ),
        Row::new(
            "drain beside the backlog / alone",
            "ratio",
            ratio(|d| d.rate),
        ),
        Row::new(
            format!("{unknown} jobs of an unhandled type set aside"),
            "s",
            values(&beside, |d| d.set_aside_secs),
        )
        .note("from the runner's start; target ≤ 60"),
    ])
}
