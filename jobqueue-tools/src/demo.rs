//! The demo: a realistic mix of jobs worked by an in-process runner, with a
//! progress bar and a summary (throughput, pickup latency, final statuses).
//!
//! Its handlers are also registered in the `jobqueue` binary, so `jobqueue
//! work` can work jobs the demo (or `jobqueue enqueue demo.email '{...}'`)
//! puts in the queue.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::Utc;
use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::browse::{JobQuery, browse_jobs};
use jobqueue_core::{Job, JobOptions, JobRow, JobStatus, NewJob, RetryPolicy};
use serde::{Deserialize, Serialize};

use crate::lock;
use jobqueue_runner::{JobContext, JobError, Perform, Registry, Runner, RunnerConfig};

use crate::ToolError;

/// Pickup latencies (due time to handler start, ms) seen by demo handlers.
static PICKUP_MS: Mutex<Vec<f64>> = Mutex::new(Vec::new());

fn record_pickup(ctx: &JobContext<'_>) {
    let due = ctx.due_at().max(ctx.enqueued_at());
    let ms = (Utc::now() - due).num_microseconds().unwrap_or(0) as f64 / 1000.0;
    lock(&PICKUP_MS).push(ms.max(0.0));
}

/// A welcome email (queue `mail`, priority 150).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "demo.email", priority = 150, queue = "mail", max_attempts = 5)]
pub struct DemoEmail {
    /// Recipient.
    pub to: String,
}

impl Perform for DemoEmail {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record_pickup(ctx);
        if !self.to.contains('@') {
            return Err(JobError::fail(format!(
                "`{}` is not an email address",
                self.to
            )));
        }
        Ok(())
    }
}

/// An image thumbnail (queue `media`): a little CPU work.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "demo.thumbnail", queue = "media")]
pub struct DemoThumbnail {
    /// Image id.
    pub image: u64,
    /// Target width.
    pub width: u32,
}

impl Perform for DemoThumbnail {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record_pickup(ctx);
        let mut acc = self.image;
        for i in 0..(self.width as u64 * 50) {
            acc = acc.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(acc);
        Ok(())
    }
}

/// A webhook call that fails now and then (`flaky`: first attempt fails;
/// `broken`: every attempt fails, so the job ends `failed`).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "demo.webhook", priority = 50, max_attempts = 3)]
pub struct DemoWebhook {
    /// Target URL (not called).
    pub url: String,
    /// Fails on the first attempt.
    pub flaky: bool,
    /// Fails on every attempt.
    pub broken: bool,
}

impl Perform for DemoWebhook {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record_pickup(ctx);
        if self.broken || (self.flaky && ctx.attempt() == 1) {
            return Err(JobError::retry(format!(
                "POST {} answered 503 Service Unavailable",
                self.url
            )));
        }
        Ok(())
    }
}

/// A digest email scheduled for later (queue `mail`).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "demo.digest", queue = "mail")]
pub struct DemoDigest {
    /// Recipient.
    pub to: String,
}

impl Perform for DemoDigest {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record_pickup(ctx);
        Ok(())
    }
}

/// A long report that reports its progress stage by stage.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "demo.report", queue = "reports", priority = 200)]
pub struct DemoReport {
    /// Stages to go through.
    pub stages: u8,
    /// Time per stage, in milliseconds.
    pub stage_ms: u64,
}

impl Perform for DemoReport {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record_pickup(ctx);
        let stages = self.stages.max(1);
        for stage in 1..=stages {
            if ctx.is_cancelled() {
                return Err(JobError::Cancelled);
            }
            std::thread::sleep(Duration::from_millis(self.stage_ms));
            let percent = (u32::from(stage) * 100 / u32::from(stages)) as u8;
            ctx.progress(percent, &format!("stage {stage} of {stages}"))?;
            ctx.events(1)?;
        }
        Ok(())
    }
}

/// The demo's handlers.
pub fn registry() -> Registry {
    Registry::new()
        .register::<DemoEmail>()
        .register::<DemoThumbnail>()
        .register::<DemoWebhook>()
        .register::<DemoDigest>()
        .register::<DemoReport>()
}

/// The demo's mix of `total` jobs (at least 200), in enqueue order.
fn mix(total: usize) -> Result<Vec<NewJob>, jobqueue_core::Error> {
    let total = total.max(200);
    let mut jobs = Vec::with_capacity(total);
    jobs.push(NewJob::from_job(
        &DemoReport {
            stages: 10,
            stage_ms: 300,
        },
        JobOptions::new(),
    )?);
    let scheduled = total / 100;
    for i in 0..scheduled {
        let digest = DemoDigest {
            to: format!("digest{i}@example.com"),
        };
        jobs.push(NewJob::from_job(
            &digest,
            JobOptions::new().delay(Duration::from_secs(3)),
        )?);
    }
    let mut i = 0usize;
    while jobs.len() < total {
        let job = match i % 10 {
            0..=4 => NewJob::from_job(
                &DemoEmail {
                    to: if i.is_multiple_of(997) {
                        format!("user{i} at example.com")
                    } else {
                        format!("user{i}@example.com")
                    },
                },
                JobOptions::new(),
            )?,
            5..=7 => NewJob::from_job(
                &DemoThumbnail {
                    image: i as u64,
                    width: 320,
                },
                JobOptions::new().priority(if i.is_multiple_of(7) { 500 } else { 100 }),
            )?,
            _ => NewJob::from_job(
                &DemoWebhook {
                    url: format!("https://hooks.example.com/{i}"),
                    flaky: i.is_multiple_of(5),
                    broken: i % 50 == 8,
                },
                JobOptions::new(),
            )?,
        };
        jobs.push(job);
        i += 1;
    }
    Ok(jobs)
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

fn finished(conn: &mut PgConnection) -> Result<i64, jobqueue_core::Error> {
    Ok(diesel::sql_query(
        "SELECT count(*) AS n FROM jobqueue_jobs WHERE status IN ('completed', 'failed', 'cancelled')",
    )
    .get_result::<Count>(conn)?
    .n)
}

#[derive(diesel::QueryableByName)]
struct Span {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
    #[diesel(sql_type = diesel::sql_types::Double)]
    secs: f64,
}

/// Emails and thumbnails (due at once, one attempt each): how many, and the
/// seconds from the first enqueue to the last completion (database clock).
fn immediate_rate(conn: &mut PgConnection) -> Result<(i64, f64), jobqueue_core::Error> {
    let span = diesel::sql_query(
        "SELECT count(*) AS n,
                coalesce(EXTRACT(EPOCH FROM max(finished_at) - min(created_at)), 0)::float8 AS secs
         FROM jobqueue_jobs WHERE job_type IN ('demo.email', 'demo.thumbnail')",
    )
    .get_result::<Span>(conn)?;
    Ok((span.n, span.secs))
}

/// The newest job matching `query`, searching window after window (the
/// demo's database holds only its own jobs).
fn newest(
    conn: &mut PgConnection,
    mut query: JobQuery,
) -> Result<Option<JobRow>, jobqueue_core::Error> {
    loop {
        let page = browse_jobs(conn, &query, 1)?;
        match (page.jobs.into_iter().next(), page.searched_to) {
            (None, Some(cursor)) => query.cursor = Some(cursor),
            (job, _) => return Ok(job),
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Runs the demo in database `database` (recreated if the demo created it;
/// refused if it exists and the demo did not create it) on the server at
/// `server_url`: enqueues `jobs` jobs while a runner with `concurrency`
/// workers works them, then prints a summary.
pub fn run(
    server_url: &str,
    database: &str,
    jobs: usize,
    concurrency: usize,
) -> Result<(), ToolError> {
    let url = crate::tool_db::recreate(server_url, database, "demo")?;
    let mut conn = PgConnection::establish(&url).map_err(jobqueue_core::Error::from)?;
    jobqueue_core::run_migrations(&mut conn)?;
    let mix = mix(jobs)?;
    let total = mix.len();
    crate::out!("demo database: {}", jobqueue_core::redact_url(&url));
    crate::out!(
        "working {total} jobs with {concurrency} workers: emails, thumbnails, webhooks (some flaky, some broken), scheduled digests, one long report"
    );

    // The report below reads each job's times from its row: completed jobs
    // are kept, whatever the default retention.
    let mut config = RunnerConfig::new(&url)
        .concurrency(concurrency)
        .keep_completed(Duration::from_secs(24 * 3600));
    config.retry = RetryPolicy {
        base: Duration::from_millis(250),
        max: Duration::from_secs(2),
        jitter: 0.2,
    };
    config.poll_interval = Duration::from_millis(250);
    lock(&PICKUP_MS).clear();
    let started = Instant::now();
    let runner = Runner::new(config, registry()).start()?;

    // Enqueue in waves, each its own transaction, while the runner works.
    for wave in mix.chunks(500) {
        conn.transaction(|conn| jobqueue_core::enqueue_many(conn, wave))?;
        std::thread::sleep(Duration::from_millis(20));
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} jobs finished, {per_sec}, {elapsed}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let done = finished(&mut conn)?;
        bar.set_position(done as u64);
        if done as usize >= total {
            break;
        }
        if Instant::now() > deadline {
            bar.abandon();
            let _ = runner.shutdown();
            return Err(ToolError::Usage(format!(
                "demo timed out with {done} of {total} jobs finished"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let elapsed = started.elapsed();
    bar.finish();
    let summary = runner.shutdown();

    let mut pickups = std::mem::take(&mut *lock(&PICKUP_MS));
    pickups.sort_by(f64::total_cmp);
    let mut finals = [
        (JobStatus::Completed, 0i64),
        (JobStatus::Failed, 0),
        (JobStatus::Cancelled, 0),
    ];
    for queue in jobqueue_core::list_queues(&mut conn, jobqueue_core::Counting::WithHistory)? {
        for (status, n) in &mut finals {
            *n += queue.count(*status);
        }
    }
    let report = newest(
        &mut conn,
        JobQuery {
            job_type: Some(DemoReport::JOB_TYPE.into()),
            ..JobQuery::default()
        },
    )?;
    let (immediate, immediate_secs) = immediate_rate(&mut conn)?;
    crate::out!();
    crate::out!(
        "finished {total} jobs in {:.2} s ({:.0} jobs/s overall; the last were scheduled 3 s ahead, \
         retried with backoff, or the 3 s report)",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    crate::out!(
        "emails and thumbnails, due at once: {immediate} in {immediate_secs:.2} s from first enqueue to last completion: {:.0} jobs/s",
        immediate as f64 / immediate_secs.max(1e-9)
    );
    crate::out!(
        "pickup latency (due -> handler start, {} attempts): p50 {:.1} ms, p95 {:.1} ms",
        pickups.len(),
        percentile(&pickups, 0.50),
        percentile(&pickups, 0.95)
    );
    crate::out!(
        "final status: {} completed, {} failed, {} cancelled; {} failed attempts retried",
        finals[0].1,
        finals[1].1,
        finals[2].1,
        summary.stats.retried
    );
    if let Some(job) = report {
        crate::out!(
            "long report job: {} at {}% ({}), {} progress events",
            job.status,
            job.progress,
            job.current_stage.as_deref().unwrap_or("-"),
            job.events_count
        );
    }
    let failed = newest(
        &mut conn,
        JobQuery {
            status: Some(JobStatus::Failed),
            ..JobQuery::default()
        },
    )?;
    if let Some(job) = failed {
        crate::out!(
            "a dead-lettered job: {} {} after {} attempts: {}",
            job.job_type,
            job.id,
            job.attempts,
            job.last_error.as_deref().unwrap_or("-")
        );
    }
    Ok(())
}
