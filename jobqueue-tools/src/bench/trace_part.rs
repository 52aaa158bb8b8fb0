//! One run of the `trace` measurement, in a process of its own (`jobqueue
//! bench --trace-part VARIANT`, started by [`super::trace`]): a global
//! subscriber cannot be taken down once installed, and the build without
//! the `tracing` feature is another binary. The run measures the enqueue
//! latency (one job per transaction on one connection) and the drain rate
//! (a bulk of no-op jobs drained by a runner of [`WORKERS`], as the `drain`
//! rows do), each with the CPU time the process spent on it (the figure
//! the feature's own work shows in, where the wall-clock one is mostly the
//! server's commits and the machine's other work), and prints its figures
//! as one line of JSON on stdout.

use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection};
use jobqueue_core::{Job, JobOptions, NewJob};
use jobqueue_runner::{Runner, RunnerConfig};
use serde::{Deserialize, Serialize};

use super::drain::{CHUNK, WORKERS, wait_polling};
use super::noop::BenchNoop;
use super::{Sizes, db, median, reset};
use crate::ToolError;

#[cfg(feature = "tracing")]
use super::trace_memory::Memory;

/// What a run has installed: the names `--trace-part` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceVariant {
    /// The build without the `tracing` feature (no subscriber either).
    Plain,
    /// The feature built in, no subscriber.
    Off,
    /// The feature built in, a subscriber exporting to memory.
    Memory,
}

impl TraceVariant {
    /// The name `--trace-part` takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TraceVariant::Plain => "plain",
            TraceVariant::Off => "off",
            TraceVariant::Memory => "memory",
        }
    }
}

/// The figures of one run, printed as one line of JSON.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PartReport {
    /// The variant run.
    pub(crate) variant: String,
    /// Whether this binary was built with the `tracing` feature.
    pub(crate) tracing_built: bool,
    /// Time of one enqueue (its transaction included), µs: the median of
    /// its blocks' means.
    pub(crate) enqueue_us: f64,
    /// CPU time of the process per enqueue, µs: the median of its blocks'.
    pub(crate) enqueue_cpu_us: f64,
    /// Each drain's rate, jobs/s.
    pub(crate) drain_rates: Vec<f64>,
    /// Each drain's CPU time of the process per job, µs.
    pub(crate) drain_cpu_us: Vec<f64>,
    /// Jobs drained in all.
    pub(crate) jobs_drained: u64,
    /// `attempt` spans exported (the memory variant; 0 for the others).
    pub(crate) attempt_spans: u64,
    /// Of those, the ones whose parent is the context stored with the job.
    pub(crate) attempts_in_trace: u64,
}

/// Single enqueues made, untimed, before the timed ones: the connection's
/// statements prepared, the table's pages in the cache.
const WARMUP: usize = 50;
/// Blocks the timed enqueues are split into.
pub(crate) const ENQUEUE_BLOCKS: usize = 10;
/// How often the drain looks whether the runner is done: seldom enough
/// that the looking costs little of the process's CPU time.
const POLL: Duration = Duration::from_millis(1);

/// CPU time of this process so far (all its threads, the ended ones too),
/// µs.
fn cpu_us() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 * 1e6 + t.tv_nsec as f64 / 1e3
}

/// Without the feature there is no subscriber to install: the memory
/// variant is refused before anything is measured.
#[cfg(not(feature = "tracing"))]
enum Memory {}

#[cfg(not(feature = "tracing"))]
impl Memory {
    fn install() -> Result<Self, ToolError> {
        Err(ToolError::Usage(
            "--trace-part memory: this binary was built without the `tracing` feature; \
             build it with `--features tracing`"
                .into(),
        ))
    }

    fn in_request<T>(&self, _f: impl FnOnce() -> T) -> T {
        match *self {}
    }

    fn flush(&self) -> Result<(), ToolError> {
        match *self {}
    }

    fn tally(&self) -> Result<(), ToolError> {
        match *self {}
    }

    fn totals(&self) -> (u64, u64) {
        match *self {}
    }
}

/// Runs `f`, inside a `request` span when `memory` is installed.
fn in_request<T>(memory: Option<&Memory>, f: impl FnOnce() -> T) -> T {
    match memory {
        Some(memory) => memory.in_request(f),
        None => f(),
    }
}

/// One run of `variant` on the bench's database at `url`; prints its
/// [`PartReport`].
pub(crate) fn run(url: &str, variant: TraceVariant, sizes: &Sizes) -> Result<(), ToolError> {
    let built = cfg!(feature = "tracing");
    if variant != TraceVariant::Plain && !built {
        return Err(ToolError::Usage(format!(
            "--trace-part {}: this binary was built without the `tracing` feature",
            variant.name()
        )));
    }
    let memory = match variant {
        TraceVariant::Memory => Some(Memory::install()?),
        TraceVariant::Plain | TraceVariant::Off => None,
    };
    let memory = memory.as_ref();
    let mut conn = PgConnection::establish(url).map_err(db)?;
    reset(&mut conn)?;
    let (enqueue_us, enqueue_cpu_us) = enqueue_latency(&mut conn, memory, sizes.trace_enqueues)?;
    let (drain_rates, drain_cpu_us, jobs_drained) = drains(url, &mut conn, memory, sizes)?;
    let (attempt_spans, attempts_in_trace) = match memory {
        Some(memory) => memory.totals(),
        None => (0, 0),
    };
    if memory.is_some() && attempts_in_trace == 0 {
        return Err(ToolError::Usage(format!(
            "--trace-part memory: {attempt_spans} attempt spans exported, none a child of the \
             context stored with its job: the subscriber measured nothing of the queue's trace"
        )));
    }
    let report = PartReport {
        variant: variant.name().to_owned(),
        tracing_built: built,
        enqueue_us,
        enqueue_cpu_us,
        drain_rates,
        drain_cpu_us,
        jobs_drained,
        attempt_spans,
        attempts_in_trace,
    };
    let line = serde_json::to_string(&report)
        .map_err(|e| ToolError::Usage(format!("the trace report does not serialize: {e}")))?;
    crate::out!("{line}");
    Ok(())
}

/// Time of one enqueue, one job per transaction (each in a `request` span
/// of its own when `memory` is installed), and the process's CPU time per
/// enqueue, µs: the medians over [`ENQUEUE_BLOCKS`] blocks of
/// `n / ENQUEUE_BLOCKS` of each block's mean, so that a burst of the
/// machine's other work moves one block, not the figure. With `memory`,
/// each block runs to its last span exported.
fn enqueue_latency(
    conn: &mut PgConnection,
    memory: Option<&Memory>,
    n: usize,
) -> Result<(f64, f64), ToolError> {
    let one = |conn: &mut PgConnection| {
        in_request(memory, || {
            conn.transaction(|conn| BenchNoop { seq: 0 }.enqueue(conn))
        })
    };
    let flush = || memory.map_or(Ok(()), Memory::flush);
    for _ in 0..WARMUP {
        one(conn)?;
    }
    flush()?;
    let block = (n / ENQUEUE_BLOCKS).max(1);
    let mut means = Vec::with_capacity(ENQUEUE_BLOCKS);
    let mut cpu_means = Vec::with_capacity(ENQUEUE_BLOCKS);
    for _ in 0..ENQUEUE_BLOCKS {
        let (started, cpu) = (Instant::now(), cpu_us());
        for _ in 0..block {
            one(conn)?;
        }
        flush()?;
        means.push(started.elapsed().as_secs_f64() * 1e6 / block as f64);
        cpu_means.push((cpu_us() - cpu) / block as f64);
    }
    if let Some(memory) = memory {
        memory.tally()?;
    }
    reset(conn)?;
    Ok((median(&means), median(&cpu_means)))
}

/// `sizes.trace_drains` drains of `sizes.trace_drain_jobs` no-op jobs,
/// enqueued in calls of [`CHUNK`] (all in one `request` span when `memory`
/// is installed, so that every job carries a trace context), by one runner;
/// each drain's rate, from its first enqueue to its last completion and,
/// with `memory`, the last span exported, and the process's CPU time per
/// job over the same stretch. Returns the rates, the CPU times and the
/// jobs drained.
fn drains(
    url: &str,
    conn: &mut PgConnection,
    memory: Option<&Memory>,
    sizes: &Sizes,
) -> Result<(Vec<f64>, Vec<f64>, u64), ToolError> {
    let n = sizes.trace_drain_jobs;
    let runner = Runner::new(
        RunnerConfig::new(url).concurrency(WORKERS),
        super::registry(),
    )
    .start()?;
    let mut rates = Vec::with_capacity(sizes.trace_drains);
    let mut cpu_per_job = Vec::with_capacity(sizes.trace_drains);
    let mut drained = 0u64;
    let mut measured = || -> Result<(), ToolError> {
        for _ in 0..sizes.trace_drains {
            reset(conn)?;
            let jobs: Vec<NewJob> = (0..n)
                .map(|_| NewJob::from_job(&BenchNoop { seq: 0 }, JobOptions::new()))
                .collect::<Result<_, _>>()?;
            let done_before = runner.stats().completed;
            let (started, cpu) = (Instant::now(), cpu_us());
            in_request(memory, || {
                jobs.chunks(CHUNK)
                    .try_for_each(|chunk| jobqueue_core::enqueue_many(conn, chunk).map(drop))
            })?;
            let deadline = started + Duration::from_secs(600);
            wait_polling(&runner, done_before + n as u64, deadline, POLL)?;
            if let Some(memory) = memory {
                memory.flush()?;
            }
            rates.push(n as f64 / started.elapsed().as_secs_f64());
            cpu_per_job.push((cpu_us() - cpu) / n as f64);
            drained += n as u64;
            if let Some(memory) = memory {
                memory.tally()?;
            }
        }
        Ok(())
    };
    let result = measured();
    runner.shutdown();
    result?;
    Ok((rates, cpu_per_job, drained))
}

/// The median of a run's drain rates.
pub(crate) fn drain_rate(report: &PartReport) -> f64 {
    median(&report.drain_rates)
}

/// The median of a run's drain CPU times per job.
pub(crate) fn drain_cpu(report: &PartReport) -> f64 {
    median(&report.drain_cpu_us)
}
