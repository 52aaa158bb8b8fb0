//! Pickup latency (enqueue commit to handler start) of an idle runner, and a
//! steady-state run: a producer at a fixed rate against a runner.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{Job, JobOptions, NewJob};

use super::noop::{self, BenchNoop, BenchWork};
use super::{Row, Sizes, count, db, quantile, reset};
use jobqueue_runner::{Runner, RunnerConfig};

use crate::ToolError;

/// Latencies in ms from commit instants to recorded handler starts, sorted.
pub(crate) fn latencies(
    commits: &HashMap<u64, Instant>,
    starts: &HashMap<u64, Instant>,
) -> Vec<f64> {
    let mut out: Vec<f64> = commits
        .iter()
        .filter_map(|(seq, committed)| {
            let started = starts.get(seq)?;
            Some(started.saturating_duration_since(*committed).as_secs_f64() * 1000.0)
        })
        .collect();
    out.sort_by(f64::total_cmp);
    out
}

fn wait_started(commits: &HashMap<u64, Instant>, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline && commits.keys().any(|seq| noop::started(*seq).is_none()) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(crate) fn pickup(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let (mut p50, mut p95, mut p99) = (Vec::new(), Vec::new(), Vec::new());
    let mut from_start = Vec::new();
    for _ in 0..runs {
        reset(&mut conn)?;
        let runner = Runner::new(RunnerConfig::new(url), super::registry()).start()?;
        std::thread::sleep(Duration::from_millis(500));
        noop::record_starts();
        let (mut begun, mut commits) = (HashMap::new(), HashMap::new());
        for seq in 1..=sizes.pickup_jobs as u64 {
            begun.insert(seq, Instant::now());
            BenchNoop { seq }.enqueue(&mut conn)?;
            commits.insert(seq, Instant::now());
            std::thread::sleep(sizes.pickup_pause);
        }
        wait_started(&commits, Duration::from_secs(10));
        let starts = noop::take_starts();
        let lat = latencies(&commits, &starts);
        from_start.push(quantile(&latencies(&begun, &starts), 0.95));
        runner.shutdown();
        if lat.len() < commits.len() {
            return Err(ToolError::Usage(format!(
                "pickup: only {} of {} jobs started",
                lat.len(),
                commits.len()
            )));
        }
        p50.push(quantile(&lat, 0.50));
        p95.push(quantile(&lat, 0.95));
        p99.push(quantile(&lat, 0.99));
    }
    let name = |p| {
        format!(
            "pickup latency p{p}, idle runner, {} jobs",
            sizes.pickup_jobs
        )
    };
    Ok(vec![
        Row::new(name(50), "ms", p50).note("enqueue commit -> handler start"),
        Row::new(name(95), "ms", p95),
        Row::new(name(99), "ms", p99),
        Row::new(
            format!(
                "pickup latency p95 from enqueue start, idle runner, {} jobs",
                sizes.pickup_jobs
            ),
            "ms",
            from_start,
        )
        .note("the insert and its commit included; target ≤ 3.0 ms"),
    ])
}

#[derive(diesel::QueryableByName)]
struct Dead {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

fn dead_tuples(conn: &mut PgConnection) -> Result<i64, ToolError> {
    let _ = diesel::sql_query("SELECT pg_stat_force_next_flush()").execute(conn);
    Ok(diesel::sql_query(
        "SELECT coalesce(n_dead_tup, 0) AS n FROM pg_stat_user_tables WHERE relname = 'jobqueue_jobs'",
    )
    .get_result::<Dead>(conn)
    .map_err(db)?
    .n)
}

/// A producer at a steady rate: `per_tick` jobs in one transaction every
/// `tick`, for `duration`, each transaction held open after its insert for
/// `hold` on average (0 to twice that, uniform: the application's own work
/// in it).
struct Producer {
    tick: Duration,
    per_tick: usize,
    duration: Duration,
    hold: Duration,
}

impl Producer {
    /// Produces jobs made by `job` from the next sequence numbers after
    /// `seq`, noting each one's commit instant in `commits`; returns the
    /// rate produced, jobs/s.
    fn run(
        &self,
        conn: &mut PgConnection,
        seq: &mut u64,
        commits: &mut HashMap<u64, Instant>,
        job: impl Fn(u64) -> jobqueue_core::Result<NewJob>,
    ) -> Result<f64, ToolError> {
        let started = Instant::now();
        let mut next = started;
        let mut produced = 0usize;
        while started.elapsed() < self.duration {
            let first = *seq + 1;
            *seq += self.per_tick as u64;
            let batch: Vec<NewJob> = (first..=*seq).map(&job).collect::<Result<_, _>>()?;
            conn.transaction(|conn| {
                jobqueue_core::enqueue_many(conn, &batch)?;
                std::thread::sleep(self.hold);
                Ok::<_, jobqueue_core::Error>(())
            })?;
            let committed = Instant::now();
            for job_seq in first..=*seq {
                commits.insert(job_seq, committed);
            }
            produced += batch.len();
            next += self.tick;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        Ok(produced as f64 / started.elapsed().as_secs_f64())
    }
}

pub(crate) fn steady(
    url: &str,
    rate: u32,
    duration: Duration,
    runs: usize,
) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let (mut depths, mut p95s, mut deads, mut done_rates) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    const TICK: Duration = Duration::from_millis(10);
    let per_tick = (rate as usize / 100).max(1);
    for _ in 0..runs {
        reset(&mut conn)?;
        let runner =
            Runner::new(RunnerConfig::new(url).concurrency(32), super::registry()).start()?;
        std::thread::sleep(Duration::from_millis(300));
        noop::record_starts();
        // Sample the due backlog once a second from another connection.
        let max_depth = Arc::new(AtomicI64::new(0));
        let sampling = Arc::new(AtomicBool::new(true));
        let sampler = {
            let (url, max_depth, sampling) = (
                url.to_owned(),
                Arc::clone(&max_depth),
                Arc::clone(&sampling),
            );
            std::thread::spawn(move || -> Result<(), ToolError> {
                let mut conn = PgConnection::establish(&url).map_err(db)?;
                while sampling.load(Ordering::Relaxed) {
                    let depth = count(&mut conn, "status = 'pending'")?;
                    max_depth.fetch_max(depth, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_secs(1));
                }
                Ok(())
            })
        };
        let mut commits = HashMap::new();
        let mut seq = 0u64;
        let produced = Producer {
            tick: TICK,
            per_tick,
            duration,
            hold: Duration::ZERO,
        }
        .run(&mut conn, &mut seq, &mut commits, |seq| {
            NewJob::from_job(&BenchNoop { seq }, JobOptions::new())
        })?;
        wait_started(&commits, Duration::from_secs(30));
        sampling.store(false, Ordering::Relaxed);
        let _ = sampler.join();
        let lat = latencies(&commits, &noop::take_starts());
        runner.shutdown();
        depths.push(max_depth.load(Ordering::Relaxed) as f64);
        p95s.push(quantile(&lat, 0.95));
        deads.push(dead_tuples(&mut conn)? as f64);
        done_rates.push(produced);
    }
    let label = format!(
        "steady {rate} jobs/s for {} s, 32 workers",
        duration.as_secs()
    );
    Ok(vec![
        Row::new(format!("{label}: producer rate"), "jobs/s", done_rates),
        Row::new(format!("{label}: max due backlog"), "jobs", depths).note("sampled each second"),
        Row::new(format!("{label}: pickup p95"), "ms", p95s),
        Row::new(format!("{label}: dead tuples at end"), "tuples", deads)
            .note("pg_stat_user_tables, autovacuum on"),
    ])
}

/// The fleet's steady load: producer ticks, runners, workers per runner,
/// job length.
const FLEET_TICK: Duration = Duration::from_millis(25);
const FLEET_RUNNERS: usize = 2;
const FLEET_WORKERS: usize = 16;
const FLEET_JOB: Duration = Duration::from_millis(1);
/// The most jobs one producer transaction inserts.
const FLEET_MOST_PER_TICK: usize = 128;

/// Producers of the held-transactions case, and how long each keeps its
/// transaction open after its insert.
const HELD_PRODUCERS: usize = 4;
const HELD_FOR: Duration = Duration::from_millis(20);
const HELD_STAGGER: Duration = Duration::from_micros(1500);

/// `rate` jobs/s from `HELD_PRODUCERS` producers on connections of their
/// own, each a batch every `FLEET_TICK`, `HELD_STAGGER` after the one
/// before, each transaction held open `HELD_FOR` on average after its
/// insert; returns the commit instants by sequence number.
fn held_producers(
    url: &str,
    rate: u32,
    duration: Duration,
    micros: u64,
) -> Result<HashMap<u64, Instant>, ToolError> {
    let share = (rate as usize / HELD_PRODUCERS).max(1);
    let per_tick = ((share as f64 * FLEET_TICK.as_secs_f64()).round() as usize).max(1);
    let threads: Vec<_> = (0..HELD_PRODUCERS)
        .map(|i| {
            let url = url.to_owned();
            std::thread::spawn(move || -> Result<HashMap<u64, Instant>, ToolError> {
                let mut conn = PgConnection::establish(&url).map_err(db)?;
                // Each a little after the last: within its notification
                // debounce (see jobqueue_core::engine::NOTIFY_DEBOUNCE).
                std::thread::sleep(HELD_STAGGER * i as u32);
                let mut seq = 1_000_000_000 * (i as u64 + 1);
                let mut commits = HashMap::new();
                Producer {
                    tick: FLEET_TICK,
                    per_tick,
                    duration,
                    hold: HELD_FOR,
                }
                .run(&mut conn, &mut seq, &mut commits, |seq| {
                    NewJob::from_job(&BenchWork { seq, micros }, JobOptions::new())
                })?;
                Ok(commits)
            })
        })
        .collect();
    let mut all = HashMap::new();
    for thread in threads {
        let commits = thread
            .join()
            .map_err(|_| ToolError::Usage("a producer thread panicked".into()))??;
        all.extend(commits);
    }
    Ok(all)
}

/// Queue time at a steady, light load on a fleet: a producer inserting a
/// batch every 25 ms (one transaction each) at `rate` jobs/s, two runners
/// of 16 workers each, jobs of 1 ms. Reports commit → handler start
/// p50/p95/p99, against the idle pickup of the same runners measured in
/// the same run (one job at a time).
pub(crate) fn fleet(
    url: &str,
    rate: u32,
    duration: Duration,
    runs: usize,
) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let per_tick =
        ((rate as f64 * FLEET_TICK.as_secs_f64()).round() as usize).clamp(1, FLEET_MOST_PER_TICK);
    let mut rows: [Vec<f64>; 4] = Default::default();
    let mut held_rows: [Vec<f64>; 3] = Default::default();
    let mut idle_p99 = Vec::new();
    for _ in 0..runs {
        reset(&mut conn)?;
        let runners = (0..FLEET_RUNNERS)
            .map(|_| {
                let config = RunnerConfig::new(url).concurrency(FLEET_WORKERS);
                Runner::new(config, super::registry()).start()
            })
            .collect::<Result<Vec<_>, _>>()?;
        std::thread::sleep(Duration::from_millis(500));
        noop::record_starts();
        let micros = FLEET_JOB.as_micros() as u64;
        // Idle: one job at a time, each after the last started.
        let mut commits = HashMap::new();
        let mut seq = 0u64;
        for _ in 0..100 {
            seq += 1;
            BenchWork { seq, micros }.enqueue(&mut conn)?;
            commits.insert(seq, Instant::now());
            std::thread::sleep(Duration::from_millis(20));
        }
        wait_started(&commits, Duration::from_secs(10));
        idle_p99.push(quantile(&latencies(&commits, &noop::take_starts()), 0.99));
        noop::record_starts();
        let mut commits = HashMap::new();
        let produced = Producer {
            tick: FLEET_TICK,
            per_tick,
            duration,
            hold: Duration::ZERO,
        }
        .run(&mut conn, &mut seq, &mut commits, |seq| {
            NewJob::from_job(&BenchWork { seq, micros }, JobOptions::new())
        })?;
        wait_started(&commits, Duration::from_secs(30));
        let lat = latencies(&commits, &noop::take_starts());
        // The same rate from several producers whose transactions stay open
        // a while after their insert: their enqueues fall within each
        // other's notification debounce and commit later than the one that
        // notified.
        noop::record_starts();
        let held = held_producers(url, rate, duration, micros)?;
        wait_started(&held, Duration::from_secs(30));
        let held_lat = latencies(&held, &noop::take_starts());
        for runner in runners {
            runner.shutdown();
        }
        if held_lat.len() < held.len() {
            return Err(ToolError::Usage(format!(
                "fleet: only {} of {} jobs started",
                held_lat.len(),
                held.len()
            )));
        }
        for (i, p) in [0.50, 0.95, 0.99].into_iter().enumerate() {
            held_rows[i].push(quantile(&held_lat, p));
        }
        if lat.len() < commits.len() {
            return Err(ToolError::Usage(format!(
                "fleet: only {} of {} jobs started",
                lat.len(),
                commits.len()
            )));
        }
        rows[0].push(produced);
        rows[1].push(quantile(&lat, 0.50));
        rows[2].push(quantile(&lat, 0.95));
        rows[3].push(quantile(&lat, 0.99));
    }
    let label = format!("fleet {rate} jobs/s, {FLEET_RUNNERS}×{FLEET_WORKERS} workers, 1 ms jobs");
    let [rates, p50, p95, p99] = rows;
    let ratios = p99.iter().zip(&idle_p99).map(|(a, b)| a / b).collect();
    Ok(vec![
        Row::new(format!("{label}: produced"), "jobs/s", rates).note(format!(
            "{per_tick} per transaction every {} ms",
            FLEET_TICK.as_millis()
        )),
        Row::new(format!("{label}: queue time p50"), "ms", p50)
            .note("enqueue commit -> handler start"),
        Row::new(format!("{label}: queue time p95"), "ms", p95),
        Row::new(format!("{label}: queue time p99"), "ms", p99).note("target < 10 ms"),
        Row::new("fleet: idle pickup p99 (same runners)", "ms", idle_p99)
            .note("one job at a time, 20 ms apart"),
        Row::new("fleet: steady p99 / idle p99", "ratio", ratios),
        Row::new(
            format!("{label}, {HELD_PRODUCERS} producers holding transactions: p50"),
            "ms",
            std::mem::take(&mut held_rows[0]),
        )
        .note(format!(
            "each transaction open 0-{} ms after its insert",
            2 * HELD_FOR.as_millis()
        )),
        Row::new(
            format!("{label}, {HELD_PRODUCERS} producers holding transactions: p95"),
            "ms",
            std::mem::take(&mut held_rows[1]),
        ),
        Row::new(
            format!("{label}, {HELD_PRODUCERS} producers holding transactions: p99"),
            "ms",
            std::mem::take(&mut held_rows[2]),
        )
        .note("target < 10 ms"),
    ])
}

/// How late the commit of a debounced enqueue comes after the one that
/// notified, in the late-commit case.
const LATE_BY: Duration = Duration::from_millis(150);

/// Trials of the late-commit case per run.
const LATE_TRIALS: usize = 20;

/// Pickup of a job whose enqueue sent no notification (it came within the
/// debounce of one that did) and whose transaction commits `LATE_BY` after
/// the notifying one, with nothing else enqueued: what the runner's
/// re-polls after found work catch. Milliseconds from that commit to its
/// handler's start, sorted.
fn late_commit_pickups(url: &str) -> Result<Vec<f64>, ToolError> {
    let mut notifier = PgConnection::establish(url).map_err(db)?;
    let mut late = PgConnection::establish(url).map_err(db)?;
    let runner = Runner::new(RunnerConfig::new(url), super::registry()).start()?;
    std::thread::sleep(Duration::from_millis(500));
    noop::record_starts();
    let mut commits = HashMap::new();
    for trial in 0..LATE_TRIALS as u64 {
        let (first, second) = (2 * trial + 1, 2 * trial + 2);
        BenchNoop { seq: first }.enqueue(&mut notifier)?;
        late.transaction(|conn| {
            BenchNoop { seq: second }.enqueue(conn)?;
            std::thread::sleep(LATE_BY);
            Ok::<_, jobqueue_core::Error>(())
        })?;
        commits.insert(second, Instant::now());
        wait_started(&commits, Duration::from_secs(5));
        // Let the runner settle back to its slow poll before the next.
        std::thread::sleep(Duration::from_millis(300));
    }
    let lat = latencies(&commits, &noop::take_starts());
    runner.shutdown();
    if lat.len() < commits.len() {
        return Err(ToolError::Usage(format!(
            "late commits: only {} of {} jobs started",
            lat.len(),
            commits.len()
        )));
    }
    Ok(lat)
}

/// The late-commit case (see `late_commit_pickups`), p50 and p95 per run.
pub(crate) fn late_commits(url: &str, runs: usize) -> Result<Vec<Row>, ToolError> {
    let (mut p50, mut p95) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let lat = late_commit_pickups(url)?;
        p50.push(quantile(&lat, 0.50));
        p95.push(quantile(&lat, 0.95));
    }
    let label = format!(
        "pickup of a debounced enqueue committed {} ms after the notifying one",
        LATE_BY.as_millis()
    );
    Ok(vec![
        Row::new(format!("{label}, p50"), "ms", p50)
            .note("its commit -> handler start; no notification of its own"),
        Row::new(format!("{label}, p95"), "ms", p95),
    ])
}
