//! What async handlers ([`jobqueue_runner::AsyncPerform`]) cost and what
//! they save, against thread handlers in the same run:
//!
//! - a burn-down of no-op jobs with async handlers against thread
//!   handlers, at the same concurrency, in alternating order;
//! - jobs that each await a 100 ms timer, 1,000 at once: thread handlers
//!   need a thread per job (1,000 workers), async handlers a few threads
//!   and a runtime. Jobs/s, the process's peak threads and its peak
//!   resident memory above where it started, sampled every 5 ms.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use diesel::{Connection, PgConnection};
use jobqueue_core::{Job, JobOptions, NewJob};
use jobqueue_runner::{AsyncPerform, JobContext, JobError, Registry, RunnerConfig};
use serde::{Deserialize, Serialize};

use super::burn::{alternated, burn_jobs, burn_with, jobs_for};
use super::noop::{BenchNoop, BenchWork};
use super::{Row, Sizes, db};
use crate::ToolError;

/// Workers of the no-op burn-down, as in the burn-down's main row.
const WORKERS: usize = 8;

/// Jobs waiting at once in the timer rows.
const AT_ONCE: usize = 1_000;

/// How long each job of the timer rows awaits.
const WAIT: Duration = Duration::from_millis(100);

/// The bench's no-op job, worked by an async handler.
#[derive(Debug, Serialize, Deserialize)]
struct AsyncNoop {
    seq: u64,
}

impl Job for AsyncNoop {
    const JOB_TYPE: &'static str = BenchNoop::JOB_TYPE;
}

impl AsyncPerform for AsyncNoop {
    async fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        std::hint::black_box(self.seq);
        Ok(())
    }
}

/// The bench's working job, its wait awaited on a timer.
#[derive(Debug, Serialize, Deserialize)]
struct AsyncWork {
    seq: u64,
    micros: u64,
}

impl Job for AsyncWork {
    const JOB_TYPE: &'static str = BenchWork::JOB_TYPE;
}

impl AsyncPerform for AsyncWork {
    async fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        tokio::time::sleep(Duration::from_micros(self.micros)).await;
        Ok(())
    }
}

fn async_registry() -> Registry {
    Registry::new()
        .register_async::<AsyncNoop>()
        .register_async::<AsyncWork>()
}

pub(crate) fn measure(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = jobs_for(sizes, WORKERS);
    let thread = || RunnerConfig::new(url).concurrency(WORKERS);
    let tasks = || thread().threads(2);
    let cell = std::cell::RefCell::new(&mut conn);
    let (threads, asyncs, ratios) = alternated(
        runs,
        || burn_with(&mut cell.borrow_mut(), thread(), super::registry(), n),
        || burn_with(&mut cell.borrow_mut(), tasks(), async_registry(), n),
    )?;
    let mut rows = vec![
        Row::new(
            format!("burn-down, {WORKERS} workers, thread handlers"),
            "jobs/s",
            threads,
        ),
        Row::new(
            format!("burn-down, {WORKERS} at once, async handlers (2 worker threads)"),
            "jobs/s",
            asyncs,
        ),
        Row::new(
            "burn-down async handlers / thread handlers",
            "ratio",
            ratios,
        )
        .note("no-op jobs, runs in ABBA order; target ≥ 0.8"),
    ];
    rows.extend(timers(&mut conn, url, sizes, runs)?);
    Ok(rows)
}

/// The timer rows: `AT_ONCE` jobs awaiting `WAIT` at once, thread
/// handlers against async ones.
fn timers(
    conn: &mut PgConnection,
    url: &str,
    sizes: &Sizes,
    runs: usize,
) -> Result<Vec<Row>, ToolError> {
    // Five rounds of the thousand.
    let n = (sizes.burn_jobs / 2).clamp(AT_ONCE, 5 * AT_ONCE);
    let micros = WAIT.as_micros() as u64;
    let jobs: Vec<NewJob> = (0..n)
        .map(|_| NewJob::from_job(&BenchWork { seq: 0, micros }, JobOptions::new()))
        .collect::<Result<_, _>>()
        .map_err(|e| ToolError::Usage(e.to_string()))?;
    let thread = || RunnerConfig::new(url).concurrency(AT_ONCE);
    let tasks = || thread().threads(2);
    let mut side = |config: RunnerConfig, registry: Registry| -> Result<Sampled, ToolError> {
        let sampler = Sampler::start();
        let rate = burn_jobs(conn, config, registry, &jobs)?;
        let (threads, rss) = sampler.stop();
        Ok(Sampled {
            rate,
            threads,
            rss_mib: rss,
        })
    };
    let (mut by_thread, mut by_task) = (Vec::new(), Vec::new());
    for run in 0..runs {
        if run % 2 == 0 {
            by_thread.push(side(thread(), super::registry())?);
            by_task.push(side(tasks(), async_registry())?);
        } else {
            by_task.push(side(tasks(), async_registry())?);
            by_thread.push(side(thread(), super::registry())?);
        }
    }
    let ratios = by_task
        .iter()
        .zip(&by_thread)
        .map(|(task, thread)| task.rate / thread.rate)
        .collect();
    let mut rows = Vec::new();
    for (label, sampled) in [
        ("thread handlers (1,000 workers)", &by_thread),
        (
            "async handlers (2 worker threads, 2 runtime threads)",
            &by_task,
        ),
    ] {
        let at_once = format!("{n} jobs awaiting 100 ms, {AT_ONCE} at once, {label}");
        rows.push(Row::new(
            at_once.clone(),
            "jobs/s",
            sampled.iter().map(|s| s.rate).collect(),
        ));
        rows.push(Row::new(
            format!("  peak threads, {label}"),
            "threads",
            sampled.iter().map(|s| s.threads).collect(),
        ));
        rows.push(Row::new(
            format!("  peak memory above the start, {label}"),
            "MiB",
            sampled.iter().map(|s| s.rss_mib).collect(),
        ));
    }
    rows.push(
        Row::new("awaiting jobs async / thread handlers", "ratio", ratios)
            .note("jobs/s; the threads and memory rows show what each side held"),
    );
    Ok(rows)
}

/// One side's run of the timer rows.
struct Sampled {
    rate: f64,
    threads: f64,
    rss_mib: f64,
}

/// Samples the process's thread count and resident memory until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(u64, u64)>,
    rss_before: u64,
}

impl Sampler {
    fn start() -> Self {
        let rss_before = status().1;
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let (mut threads, mut rss) = (0, 0);
            while !done.load(Ordering::Relaxed) {
                let (t, r) = status();
                threads = threads.max(t);
                rss = rss.max(r);
                std::thread::sleep(Duration::from_millis(5));
            }
            (threads, rss)
        });
        Sampler {
            stop,
            thread,
            rss_before,
        }
    }

    /// Peak threads, and peak resident memory above the start (MiB).
    fn stop(self) -> (f64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        let (threads, rss) = self.thread.join().unwrap_or((0, 0));
        let above = rss.saturating_sub(self.rss_before) as f64 / 1024.0;
        (threads as f64, above)
    }
}

/// The process's threads and resident memory (KiB), from
/// `/proc/self/status` (zeros where it cannot be read).
fn status() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("Threads:"), field("VmRSS:"))
}
