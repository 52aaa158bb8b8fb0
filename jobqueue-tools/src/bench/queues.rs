//! Queue control's costs. `limit`: burn-down of one queue with a global
//! limit far above what is held (the claim locks the queue's row and counts
//! its held jobs), and with a rate limit far above the burn-down's rate
//! (the claim locks the row, reads its window and adds to it), each
//! against the same queue without one, run after run.
//! `fair`: a queue with a backlog drained by an 8-worker runner while a
//! trickle of jobs arrives in another queue: the trickle's pickup latency
//! against the same runner's once the backlog is gone (idle), and the
//! backlog's drain rate against a runner that works the backlog's queue
//! only (the same trickle going on, unworked), and against the pickup floor
//! measured beside it (`pickup_floor`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection};
use jobqueue_core::{Job, JobOptions, NewJob};
use jobqueue_runner::{Runner, RunnerConfig, RunnerHandle};

use super::enqueue::insert;
use super::latency::latencies;
use super::noop::{self, BenchNoop};
use super::pickup_floor::PickupFloor;
use super::{Row, Sizes, checkpoint, db, quantile, reset};
use crate::ToolError;

pub(super) const WORKERS: usize = 8;
/// A global limit no burn-down comes near.
const LOOSE_LIMIT: u32 = 1_000_000;
/// A rate limit no burn-down comes near: starts per second.
const LOOSE_RATE: u32 = 1_000_000;
/// Between two jobs of the trickle.
const TRICKLE_EVERY: Duration = Duration::from_millis(10);
/// The pickup floor's queue, which the runner does not work.
const FLOOR_QUEUE: &str = "floor";

pub(super) fn backlog(n: usize, queue: &str) -> Result<Vec<NewJob>, ToolError> {
    (0..n)
        .map(|_| {
            NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new().queue(queue))
                .map_err(ToolError::from)
        })
        .collect()
}

/// Waits until `runner` has completed `n` jobs; returns how long it took
/// from `started`.
pub(crate) fn until_completed(
    runner: &RunnerHandle,
    n: usize,
    started: Instant,
    what: &str,
) -> Result<Duration, ToolError> {
    let deadline = started + Duration::from_secs(600);
    while (runner.stats().completed as usize) < n {
        if Instant::now() > deadline {
            return Err(ToolError::Usage(format!("{what} did not finish")));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(started.elapsed())
}

/// One burn-down of `n` jobs of the default queue, 8 workers: jobs/s.
pub(super) fn burn(url: &str, n: usize) -> Result<f64, ToolError> {
    let runner = Runner::new(
        RunnerConfig::new(url).concurrency(WORKERS),
        super::registry(),
    )
    .start()?;
    let took = until_completed(&runner, n, Instant::now(), "burn-down")?;
    runner.shutdown();
    Ok(n as f64 / took.as_secs_f64())
}

pub(crate) fn limit_cost(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.burn_jobs;
    let rate = jobqueue_core::RateLimit::new(LOOSE_RATE, Duration::from_secs(1))?;
    let (mut limited, mut ratios) = (Vec::new(), Vec::new());
    let (mut rated, mut rate_ratios) = (Vec::new(), Vec::new());
    let result = (|| {
        for _ in 0..runs {
            let mut rates = [0.0; 3];
            let loose = jobqueue_core::GlobalLimit::new(LOOSE_LIMIT)?;
            let settings = [(None, None), (Some(loose), None), (None, Some(rate))];
            for (i, (limit, rate)) in settings.into_iter().enumerate() {
                reset(&mut conn)?;
                insert(&mut conn, &backlog(n, "default")?)?;
                jobqueue_core::set_queue_limit(&mut conn, "default", limit)?;
                jobqueue_core::set_queue_rate_limit(&mut conn, "default", rate)?;
                checkpoint(&mut conn)?;
                rates[i] = burn(url, n)?;
            }
            limited.push(rates[1]);
            ratios.push(rates[1] / rates[0]);
            rated.push(rates[2]);
            rate_ratios.push(rates[2] / rates[0]);
        }
        Ok::<_, ToolError>(())
    })();
    jobqueue_core::set_queue_limit(&mut conn, "default", None)?;
    jobqueue_core::set_queue_rate_limit(&mut conn, "default", None)?;
    result?;
    Ok(vec![
        Row::new(
            format!("burn-down, {WORKERS} workers, {n} jobs, rate limit {LOOSE_RATE}/1s"),
            "jobs/s",
            rated,
        ),
        Row::new(
            "burn-down, rate limit not binding / no limit",
            "ratio",
            rate_ratios,
        )
        .note("same run, alternated; target ≥ 0.95"),
        Row::new(
            format!("burn-down, {WORKERS} workers, {n} jobs, global limit {LOOSE_LIMIT}"),
            "jobs/s",
            limited,
        ),
        Row::new(
            "burn-down, global limit not binding / no limit",
            "ratio",
            ratios,
        )
        .note("same run, alternated; target ≥ 0.90"),
    ])
}

/// Enqueues a job into `queue` every `every` until `stop`; returns each
/// job's commit instant by `seq`; `sent` counts them as they go.
pub(super) fn trickle(
    url: &str,
    queue: &str,
    every: Duration,
    stop: &AtomicBool,
    sent: &AtomicU64,
) -> Result<HashMap<u64, Instant>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let mut commits = HashMap::new();
    let mut seq = 1;
    while !stop.load(Ordering::Relaxed) {
        BenchNoop { seq }
            .options()
            .queue(queue)
            .enqueue(&mut conn)?;
        commits.insert(seq, Instant::now());
        sent.fetch_add(1, Ordering::SeqCst);
        seq += 1;
        std::thread::sleep(every);
    }
    Ok(commits)
}

/// One run: the backlog's drain rate, and the trickle's latencies while it
/// drains and once the runner is idle.
struct FairRun {
    rate: f64,
    busy: Vec<f64>,
    idle: Vec<f64>,
    /// The pickup floor's latencies while the backlog drains.
    floor: Vec<f64>,
}

/// `serve_b`: the runner works queue `b` too (else only `a`, with the same
/// trickle into `b` going on: the baseline).
fn fair_run(url: &str, n: usize, serve_b: bool) -> Result<FairRun, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    reset(&mut conn)?;
    insert(&mut conn, &backlog(n, "a")?)?;
    noop::record_starts();
    let queues: &[&str] = if serve_b { &["a", "b"] } else { &["a"] };
    let runner = Runner::new(
        RunnerConfig::new(url)
            .concurrency(WORKERS)
            .queues(queues.iter().copied()),
        super::registry(),
    )
    .start()?;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let producer = {
        let (url, stop, sent) = (url.to_owned(), Arc::clone(&stop), Arc::clone(&sent));
        std::thread::spawn(move || trickle(&url, "b", TRICKLE_EVERY, &stop, &sent))
    };
    // In both runs, so the drain rates compared bear the same load.
    let floor = PickupFloor::start(url, FLOOR_QUEUE, TRICKLE_EVERY)?;
    // The runner's completions count the trickle's too when it works `b`,
    // of which at most `sent` are done: once completions exceed `sent` by
    // `n`, the backlog is drained.
    let deadline = started + Duration::from_secs(600);
    let drained = |completed: u64| {
        let trickle = if serve_b {
            sent.load(Ordering::SeqCst)
        } else {
            0
        };
        completed >= n as u64 + trickle
    };
    while !drained(runner.stats().completed) {
        if Instant::now() > deadline {
            stop.store(true, Ordering::Relaxed);
            floor.finish()?;
            runner.shutdown();
            return Err(ToolError::Usage("the backlog did not drain".into()));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    let drained_at = Instant::now();
    // The same trickle against the now idle runner.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let commits = producer
        .join()
        .map_err(|_| ToolError::Usage("the trickle thread panicked".into()))??;
    let floor = {
        let (commits, claims) = floor.finish()?;
        let during: HashMap<u64, Instant> = commits
            .into_iter()
            .filter(|(_, at)| *at < drained_at)
            .collect();
        latencies(&during, &claims)
    };
    std::thread::sleep(Duration::from_millis(100));
    runner.shutdown();
    let starts = noop::take_starts();
    let (during, after): (HashMap<u64, Instant>, HashMap<u64, Instant>) =
        commits.into_iter().partition(|(_, at)| *at < drained_at);
    Ok(FairRun {
        rate,
        busy: latencies(&during, &starts),
        idle: latencies(&after, &starts),
        floor,
    })
}

pub(crate) fn fair_share(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let n = sizes.fair_backlog;
    let (mut p50, mut p95, mut idle50, mut idle95, mut ratio95, mut drain) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let (mut floor50, mut floor95, mut over_floor95) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let alone = fair_run(url, n, false)?;
        let shared = fair_run(url, n, true)?;
        if shared.busy.is_empty() || shared.idle.is_empty() || shared.floor.is_empty() {
            return Err(ToolError::Usage(
                "fair: no trickle job started (or no floor job was claimed) while the backlog \
                 drained, or after"
                    .into(),
            ));
        }
        p50.push(quantile(&shared.busy, 0.50));
        p95.push(quantile(&shared.busy, 0.95));
        idle50.push(quantile(&shared.idle, 0.50));
        idle95.push(quantile(&shared.idle, 0.95));
        ratio95.push(quantile(&shared.busy, 0.95) / quantile(&shared.idle, 0.95));
        drain.push(shared.rate / alone.rate);
        floor50.push(quantile(&shared.floor, 0.50));
        floor95.push(quantile(&shared.floor, 0.95));
        over_floor95.push(quantile(&shared.busy, 0.95) / quantile(&shared.floor, 0.95));
    }
    let busy = |p| format!("queue b pickup p{p} while {n} drain in queue a");
    Ok(vec![
        Row::new(busy(50), "ms", p50).note("a job every 10 ms into b; enqueue commit -> start"),
        Row::new(busy(95), "ms", p95),
        Row::new("queue b pickup p50, same runner idle", "ms", idle50),
        Row::new("queue b pickup p95, same runner idle", "ms", idle95),
        Row::new("queue b pickup p95, draining a / idle", "ratio", ratio95),
        Row::new(
            format!("pickup floor p50 while {n} drain in queue a"),
            "ms",
            floor50,
        )
        .note(
            "a job every 10 ms into a queue no runner works, claimed by a bare thread on its \
             notification; enqueue commit -> claim returned",
        ),
        Row::new(
            format!("pickup floor p95 while {n} drain in queue a"),
            "ms",
            floor95,
        ),
        Row::new(
            "queue b pickup p95 / pickup floor p95, draining a",
            "ratio",
            over_floor95,
        ),
        Row::new("queue a drain rate, serving b too / a only", "ratio", drain)
            .note("the same trickle into b in both; target ≥ 0.90"),
    ])
}
