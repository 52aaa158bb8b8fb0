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
    for _ in 0..runs {
        reset(&mut conn)?;
        let runner = Runner::new(RunnerConfig::new(url), super::registry()).start()?;
        std::thread::sleep(Duration::from_millis(500));
        noop::record_starts();
        let mut commits = HashMap::new();
        for seq in 1..=sizes.pickup_jobs as u64 {
            BenchNoop { seq }.enqueue(&mut conn)?;
            commits.insert(seq, Instant::now());
            std::thread::sleep(sizes.pickup_pause);
        }
        wait_started(&commits, Duration::from_secs(10));
        let lat = latencies(&commits, &noop::take_starts());
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
/// `tick`, for `duration`.
struct Producer {
    tick: Duration,
    per_tick: usize,
    duration: Duration,
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
            conn.transaction(|conn| jobqueue_core::enqueue_many(conn, &batch))?;
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
        }
        .run(&mut conn, &mut seq, &mut commits, |seq| {
            NewJob::from_job(&BenchWork { seq, micros }, JobOptions::new())
        })?;
        wait_started(&commits, Duration::from_secs(30));
        let lat = latencies(&commits, &noop::take_starts());
        for runner in runners {
            runner.shutdown();
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
    ])
}
