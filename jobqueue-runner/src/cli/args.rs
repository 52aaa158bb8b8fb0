//! Command-line arguments.

use clap::{Parser, Subcommand};

/// The arguments of the `jobqueue` command.
#[derive(Debug, Parser)]
#[command(
    name = "jobqueue",
    version,
    about = "PostgreSQL-backed background jobs: run workers and manage the queue"
)]
pub struct Args {
    /// PostgreSQL URL (libpq syntax). Required by every command but `demo`
    /// and `bench`, which default to the local server at 127.0.0.1:5432 if
    /// it answers, else a private cluster started from the PostgreSQL
    /// binaries.
    #[arg(long, env = "DATABASE_URL", global = true)]
    pub database_url: Option<String>,
    /// Log at info level (RUST_LOG overrides).
    #[arg(long, short, global = true)]
    pub verbose: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or update the schema.
    Migrate,
    /// Run a worker until SIGINT/SIGTERM (a second signal exits at once).
    Work(WorkArgs),
    /// Enqueue one job.
    Enqueue(EnqueueArgs),
    /// List jobs, newest first.
    List(ListArgs),
    /// Show one job in full.
    Show {
        /// The job's id.
        id: String,
    },
    /// Counts by queue and status, and by job type.
    Stats,
    /// Put failed (or cancelled) jobs back to pending.
    Retry(RetryArgs),
    /// Cancel a job: at once if pending, by request if running.
    Cancel {
        /// The job's id.
        id: String,
    },
    /// Delete finished jobs past their retention.
    Prune(PruneArgs),
    /// Enqueue a realistic mix of jobs, work them, and report.
    Demo(DemoArgs),
    /// Measure throughput and latency (in a database of its own).
    Bench(BenchArgs),
    /// A worker for the bench's own job type (started by `bench`).
    #[command(hide = true)]
    BenchWorker(WorkArgs),
}

/// `jobqueue work`.
#[derive(Debug, clap::Args)]
pub struct WorkArgs {
    /// Worker threads.
    #[arg(long, short = 'c', env = "JOBQUEUE_CONCURRENCY", default_value_t = 8)]
    pub concurrency: usize,
    /// Queues to work, comma-separated (default: all).
    #[arg(long, short = 'q', env = "JOBQUEUE_QUEUES", value_delimiter = ',')]
    pub queues: Vec<String>,
    /// Most jobs claimed per statement.
    #[arg(long, env = "JOBQUEUE_BATCH_SIZE", default_value_t = crate::RunnerConfig::DEFAULT_BATCH_SIZE)]
    pub batch_size: usize,
    /// Fallback poll interval in milliseconds.
    #[arg(long, env = "JOBQUEUE_POLL_INTERVAL_MS", default_value_t = 1000)]
    pub poll_interval_ms: u64,
    /// Lease in seconds (heartbeats every third of it).
    #[arg(long, env = "JOBQUEUE_LEASE_SECS", default_value_t = 30.0)]
    pub lease_secs: f64,
    /// Grace period for in-flight jobs at shutdown, in seconds.
    #[arg(long, env = "JOBQUEUE_GRACE_SECS", default_value_t = 30.0)]
    pub grace_secs: f64,
    /// Backoff after a first failed attempt, in milliseconds (doubles per attempt).
    #[arg(long, env = "JOBQUEUE_RETRY_BASE_MS", default_value_t = 2000)]
    pub retry_base_ms: u64,
    /// Longest backoff between attempts, in seconds.
    #[arg(long, env = "JOBQUEUE_RETRY_MAX_SECS", default_value_t = 3600.0)]
    pub retry_max_secs: f64,
    /// Stale-job recovery interval in seconds.
    #[arg(long, env = "JOBQUEUE_RESCUE_SECS", default_value_t = 5.0)]
    pub rescue_secs: f64,
    /// Keep completed jobs this many hours.
    #[arg(long, env = "JOBQUEUE_RETAIN_COMPLETED_HOURS", default_value_t = 24.0)]
    pub retain_completed_hours: f64,
    /// Keep failed jobs this many hours.
    #[arg(long, env = "JOBQUEUE_RETAIN_FAILED_HOURS", default_value_t = 720.0)]
    pub retain_failed_hours: f64,
    /// Keep cancelled jobs this many hours.
    #[arg(long, env = "JOBQUEUE_RETAIN_CANCELLED_HOURS", default_value_t = 168.0)]
    pub retain_cancelled_hours: f64,
    /// Worker id stored on claimed rows (default: host-pid-random).
    #[arg(long, env = "JOBQUEUE_WORKER_ID")]
    pub worker_id: Option<String>,
}

/// `jobqueue enqueue`.
#[derive(Debug, clap::Args)]
pub struct EnqueueArgs {
    /// Job type, e.g. email.send.
    pub job_type: String,
    /// Payload as JSON, e.g. '{"to": "a@example.com"}'.
    pub payload: String,
    /// Priority, 0 to 1000 (higher first; default 100).
    #[arg(long)]
    pub priority: Option<i32>,
    /// Queue (default: default).
    #[arg(long)]
    pub queue: Option<String>,
    /// Not before this time (RFC 3339, e.g. 2026-11-22T10:00:00Z).
    #[arg(long, conflicts_with = "delay_secs")]
    pub run_at: Option<String>,
    /// Not before this many seconds from now.
    #[arg(long)]
    pub delay_secs: Option<f64>,
    /// Attempts before failed, 1 to 1000 (default 3).
    #[arg(long)]
    pub max_attempts: Option<i32>,
    /// At most one live job per key.
    #[arg(long)]
    pub unique_key: Option<String>,
}

/// `jobqueue list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only this status (pending, claimed, running, completed, failed, cancelled).
    #[arg(long)]
    pub status: Option<String>,
    /// Only this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only this job type.
    #[arg(long = "type")]
    pub job_type: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
}

/// `jobqueue retry`.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct RetryArgs {
    /// The job to retry.
    pub id: Option<String>,
    /// Retry every failed job.
    #[arg(long)]
    pub failed: bool,
}

/// `jobqueue prune`.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// Delete completed jobs finished more than this many hours ago.
    #[arg(long, default_value_t = 24.0)]
    pub completed_hours: f64,
    /// Delete failed jobs finished more than this many hours ago.
    #[arg(long, default_value_t = 720.0)]
    pub failed_hours: f64,
    /// Delete cancelled jobs finished more than this many hours ago.
    #[arg(long, default_value_t = 168.0)]
    pub cancelled_hours: f64,
}

/// `jobqueue demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Jobs to enqueue.
    #[arg(long, default_value_t = 10_000)]
    pub jobs: usize,
    /// Worker threads.
    #[arg(long, short = 'c', default_value_t = 16)]
    pub concurrency: usize,
    /// Database to create for the demo (recreated on each run; a database of
    /// that name the demo did not create is refused, never dropped).
    #[arg(long, default_value = "jobqueue_demo")]
    pub database: String,
}

/// `jobqueue bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Runs per measurement.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Small sizes, for a smoke test (figures not comparable).
    #[arg(long)]
    pub quick: bool,
    /// Only these measurements, comma-separated: bulk, txn, burn, floor,
    /// drain, pickup, history, isolation, steady, footprint.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Database to create for the bench (dropped at the end; a database of
    /// that name the bench did not create is refused, never dropped).
    #[arg(long, default_value = "jobqueue_bench")]
    pub database: String,
    /// Use the bench's own database even if an earlier run left jobs in it
    /// (they are deleted).
    #[arg(long)]
    pub force: bool,
    /// Producer rate of the steady-state run, jobs/s.
    #[arg(long, default_value_t = 5000)]
    pub steady_rate: u32,
    /// Length of each steady-state run, seconds.
    #[arg(long, default_value_t = 60)]
    pub steady_secs: u64,
}
