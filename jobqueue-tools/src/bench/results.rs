//! What awaited results cost, and how soon a waiter hears of one:
//!
//! - an idle runner's pickup latency (enqueue commit to handler start) and,
//!   for the same jobs, the wait's (the handler's return to the waiter's
//!   `wait_result` returning: the completer's flush, its commit and
//!   notification, and the waiter's wake-up), p95 each and their ratio
//!   (target ≤ 1). Each handler works 20 ms, so its waiter listens before
//!   it ends;
//! - WAL per job of a burn-down whose handlers record a result against one
//!   whose handlers record none, in the order a, b, b, a; and the bytes a
//!   kept result takes in `jobqueue_results` (table and index).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::{Job, JobOptions, JobResult, NewJob};
use jobqueue_runner::{JobContext, JobError, Perform, Registry, Runner, RunnerConfig};
use serde::{Deserialize, Serialize};

use super::burn::burn_jobs;
use super::drain::wal_position;
use super::{Row, Sizes, db, quantile, reset};
use crate::{ToolError, lock};

/// Workers of the burn-downs.
const WORKERS: usize = 8;

/// How long each job of the latency measurement works.
const WORK: Duration = Duration::from_millis(20);

/// Handler starts and ends by `seq`, while the latency is measured.
static TIMES: Mutex<Option<HashMap<u64, (Instant, Instant)>>> = Mutex::new(None);

/// A job that records a result (or, with `plain`, none); `work_ms` it
/// works first; `seq` (not 0) notes when its handler started and ended.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "bench.quote")]
struct BenchQuote {
    seq: u64,
    work_ms: u64,
    plain: bool,
}

impl Perform for BenchQuote {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(self.work_ms));
        if !self.plain {
            ctx.set_result(&serde_json::json!({ "seq": self.seq, "cents": self.seq * 3 }))?;
        }
        if self.seq > 0
            && let Some(times) = lock(&TIMES).as_mut()
        {
            times.insert(self.seq, (started, Instant::now()));
        }
        Ok(())
    }
}

fn registry() -> Registry {
    Registry::new().register::<BenchQuote>()
}

pub(crate) fn measure(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut rows = latency(url, sizes, runs)?;
    rows.extend(footprint(url, sizes, runs)?);
    Ok(rows)
}

/// The pickup and result-wait latencies of an idle runner.
fn latency(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let mut waiter = PgConnection::establish(url).map_err(db)?;
    let (mut pickup, mut heard, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    let (mut from_start, mut same_commits) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        reset(&mut conn)?;
        let runner = Runner::new(RunnerConfig::new(url), registry()).start()?;
        std::thread::sleep(Duration::from_millis(500));
        *lock(&TIMES) = Some(HashMap::new());
        let (mut to_start, mut to_waiter, mut whole) = (Vec::new(), Vec::new(), Vec::new());
        for seq in 1..=sizes.pickup_jobs as u64 {
            let job = BenchQuote {
                seq,
                work_ms: WORK.as_millis() as u64,
                plain: false,
            };
            let begun = Instant::now();
            let id = job.enqueue(&mut conn)?.id();
            let committed = Instant::now();
            let got = jobqueue_core::wait_result::<serde_json::Value>(
                &mut waiter,
                id,
                Duration::from_secs(10),
            )?;
            let returned = Instant::now();
            if !matches!(got, JobResult::Completed(Some(_))) {
                runner.shutdown();
                return Err(ToolError::Usage(format!(
                    "results: job {seq} came to {got:?}, not its result"
                )));
            }
            let (started, ended) = lock(&TIMES)
                .as_ref()
                .and_then(|times| times.get(&seq).copied())
                .ok_or_else(|| ToolError::Usage(format!("results: job {seq} left no times")))?;
            to_start.push(millis(started.saturating_duration_since(committed)));
            whole.push(millis(started.saturating_duration_since(begun)));
            to_waiter.push(millis(returned.saturating_duration_since(ended)));
        }
        *lock(&TIMES) = None;
        runner.shutdown();
        to_start.sort_by(f64::total_cmp);
        to_waiter.sort_by(f64::total_cmp);
        whole.sort_by(f64::total_cmp);
        let (p, h) = (quantile(&to_start, 0.95), quantile(&to_waiter, 0.95));
        let w = quantile(&whole, 0.95);
        pickup.push(p);
        heard.push(h);
        ratio.push(h / p);
        from_start.push(w);
        same_commits.push(h / w);
    }
    let n = sizes.pickup_jobs;
    Ok(vec![
        Row::new(
            format!("pickup latency p95, idle runner, {n} jobs of 20 ms with results"),
            "ms",
            pickup,
        )
        .note("enqueue commit -> handler start"),
        Row::new(format!("result wait p95, {n} jobs"), "ms", heard)
            .note("the handler's return -> wait_result returns"),
        Row::new(
            format!("pickup latency p95 from enqueue start, {n} jobs of 20 ms with results"),
            "ms",
            from_start,
        )
        .note("the insert and its commit included"),
        Row::new("result wait p95 / pickup latency p95", "ratio", ratio)
            .note("target ≤ 1; only the wait includes a commit (the completion's)"),
        Row::new(
            "result wait p95 / pickup latency p95 from enqueue start",
            "ratio",
            same_commits,
        )
        .note("each includes one commit and its WAL flush"),
    ])
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[derive(diesel::QueryableByName)]
struct Bytes {
    #[diesel(sql_type = diesel::sql_types::Double)]
    bytes: f64,
}

/// WAL per job with results kept against without, and each kept result's
/// bytes.
fn footprint(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.stepped_jobs * 10;
    let jobs = |plain: bool| -> Result<Vec<NewJob>, ToolError> {
        (0..n)
            .map(|_| {
                NewJob::from_job(
                    &BenchQuote {
                        seq: 0,
                        work_ms: 0,
                        plain,
                    },
                    JobOptions::new(),
                )
            })
            .collect::<Result<_, _>>()
            .map_err(db)
    };
    let (plain, kept) = (jobs(true)?, jobs(false)?);
    let wal = |conn: &mut PgConnection, batch: &[NewJob]| -> Result<f64, ToolError> {
        diesel::sql_query("TRUNCATE jobqueue_results")
            .execute(conn)
            .map_err(db)?;
        super::checkpoint(conn)?;
        let before = wal_position(conn)?;
        burn_jobs(
            conn,
            RunnerConfig::new(url).concurrency(WORKERS),
            registry(),
            batch,
        )?;
        Ok((wal_position(conn)? - before) / batch.len() as f64)
    };
    let (mut without, mut with, mut ratios, mut sizes_kept) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let a1 = wal(&mut conn, &plain)?;
        let b1 = wal(&mut conn, &kept)?;
        let b2 = wal(&mut conn, &kept)?;
        sizes_kept.push(
            diesel::sql_query(
                "SELECT pg_total_relation_size('jobqueue_results')::float8
                        / greatest(count(*), 1) AS bytes
                 FROM jobqueue_results",
            )
            .get_result::<Bytes>(&mut conn)
            .map_err(db)?
            .bytes,
        );
        let a2 = wal(&mut conn, &plain)?;
        without.extend([a1, a2]);
        with.extend([b1, b2]);
        ratios.push((b1 + b2) / (a1 + a2));
    }
    reset(&mut conn)?;
    Ok(vec![
        Row::new(
            format!("WAL per job, {n} jobs, no result"),
            "bytes",
            without,
        )
        .note("enqueue, claim, the completion's delete; 8 workers"),
        Row::new(
            format!("WAL per job, {n} jobs, each result kept"),
            "bytes",
            with,
        )
        .note("the same, and the result's row and index entry"),
        Row::new("WAL per job, result kept / none", "ratio", ratios),
        Row::new("bytes per kept result", "bytes", sizes_kept)
            .note("jobqueue_results with its indexes / rows; a 25-byte result"),
    ])
}
