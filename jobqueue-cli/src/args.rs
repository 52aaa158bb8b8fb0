//! Command-line arguments.

use clap::{Parser, Subcommand};

/// The arguments of the `jobqueue` command.
#[derive(Debug, Parser)]
#[command(
    name = "jobqueue",
    version,
    about = "PostgreSQL-backed background jobs: run workers and manage the queue"
)]
pub(crate) struct Args {
    /// PostgreSQL URL (libpq syntax). Required: a worker or an admin
    /// command never guesses its database.
    #[arg(long, env = "DATABASE_URL", global = true)]
    pub(crate) database_url: Option<String>,
    /// Log at info level (RUST_LOG overrides).
    #[arg(long, short, global = true)]
    pub(crate) verbose: bool,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
        /// Print the job as one JSON document (fields in the guide).
        #[arg(long)]
        json: bool,
    },
    /// Counts by queue and status, and by job type, and the jobs completed
    /// in the last hour and day. Live and failed jobs only: counting the
    /// completed and cancelled rows kept reads the whole table (`--history`
    /// does).
    Stats {
        /// Also count the completed and cancelled rows kept (a scan of the
        /// table; completed rows are kept only by runners started with
        /// `--retain-completed-hours`).
        #[arg(long)]
        history: bool,
        /// Print one JSON document (fields in the guide).
        #[arg(long)]
        json: bool,
    },
    /// Put failed (or cancelled) jobs back to pending.
    Retry(RetryArgs),
    /// Cancel a job: at once if waiting, by request if running; cancelling
    /// a cancelled job again succeeds and changes nothing.
    Cancel {
        /// The job's id.
        id: String,
    },
    /// Delete one finished (completed, failed or cancelled) job; a live one
    /// is refused (cancel it first).
    Delete {
        /// The job's id.
        id: String,
    },
    /// Delete finished jobs past their retention.
    Prune(PruneArgs),
    /// Pause, resume, limit and list queues (stored in the database: every
    /// runner follows within a claim, across restarts).
    #[command(subcommand)]
    Queue(QueueCommand),
    /// The runners registered in the database: live ones, and gone ones
    /// (not seen for three leases: they died).
    Runners {
        /// Print one JSON document (fields in the guide).
        #[arg(long)]
        json: bool,
    },
    /// List, pause, resume and run periodic jobs (the schedules worker
    /// binaries declare).
    #[command(subcommand)]
    Cron(CronCommand),
    /// Look at workflows and batches: each step's state, the steps it
    /// comes after, its result.
    #[command(subcommand)]
    Workflow(WorkflowCommand),
    /// Check the database for what hurts a queue: ok, warn or fail per check.
    ///
    /// What holds back vacuum (transactions, replication slots, prepared
    /// transactions), dead rows, the fetch index and the claim's plan,
    /// leases nobody recovers, jobs and queues no live runner works, the
    /// NOTIFY queue, connections: one line per check, with the evidence and
    /// what to do. Exits 0 when no check fails (warnings alone included), 1
    /// when one does.
    Doctor(crate::doctor::DoctorArgs),
    /// Serve the web dashboard: queues, jobs, failures and schedules, and
    /// the actions on them (127.0.0.1:8080 unless --addr; until SIGINT or
    /// SIGTERM).
    Dashboard(crate::dashboard::DashboardArgs),
    /// Print the shell completion script of this binary, e.g.
    /// `source <(BIN completions bash)` in ~/.bashrc, or
    /// `BIN completions fish > ~/.config/fish/completions/BIN.fish`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print this binary's man page (roff), e.g. `BIN man | man -l -`; with
    /// --dir, write one page per command there instead.
    Man {
        /// Write `BIN.1`, `BIN-list.1`, `BIN-queue-list.1`, ... into this
        /// directory (created if missing), e.g. /usr/local/share/man/man1.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

/// `jobqueue cron ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum CronCommand {
    /// Every schedule: expression, time zone, last and next slot, paused,
    /// orphaned (no runner declares it any more).
    List {
        /// Print one JSON document (fields in the guide).
        #[arg(long)]
        json: bool,
    },
    /// Stop a schedule firing, durably (across every runner's restarts).
    Pause {
        /// The schedule.
        name: String,
    },
    /// Let a paused schedule fire again, from its next slot on (the slots
    /// that passed while it was paused do not fire).
    Resume {
        /// The schedule.
        name: String,
    },
    /// Enqueue one job of a schedule now, outside its slots.
    Run {
        /// The schedule.
        name: String,
    },
}

/// `jobqueue workflow ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum WorkflowCommand {
    /// The newest workflows and batches: state (running, completed,
    /// failed, cancelled), steps by state, name, when enqueued.
    List {
        /// Only workflows with a step not ended yet.
        #[arg(long)]
        unfinished: bool,
        /// At most this many (1 to 100000).
        #[arg(long, default_value_t = 50, allow_negative_numbers = true)]
        limit: i64,
        /// Print one JSON object per workflow, one per line (fields in the
        /// guide).
        #[arg(long)]
        json: bool,
    },
    /// A workflow's steps: each one's state (live, completed, failed,
    /// cancelled), its job's status, the steps it comes after and its
    /// result.
    Show {
        /// The workflow's id, or the job id of one of its steps.
        id: String,
        /// Print the workflow as one JSON document (fields in the guide).
        #[arg(long)]
        json: bool,
    },
}

/// `jobqueue queue ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum QueueCommand {
    /// Every queue with settings or live jobs: paused, backing off or
    /// active, due, scheduled, unhandled and held jobs, oldest due age,
    /// global limit, rate limit and the starts in its window, key limit,
    /// keys held and the jobs waiting on their key.
    List {
        /// Print one JSON document (fields in the guide).
        #[arg(long)]
        json: bool,
    },
    /// Stop every runner claiming from a queue (its jobs stay pending,
    /// running ones finish, enqueues go on). A queue no job names yet may
    /// be paused: the pause waits for its first jobs.
    Pause {
        /// The queue.
        name: String,
    },
    /// Let runners claim from a paused queue again.
    Resume {
        /// The queue.
        name: String,
    },
    /// Cap the jobs of a queue held at once by all runners together.
    Limit(LimitArgs),
    /// Cap how many jobs of a queue start per period, by all runners
    /// together (a sliding window: no window of the period holds more).
    Rate(RateArgs),
    /// Cap how many jobs of one concurrency key run at once, by all
    /// runners together, or run each key's jobs one at a time in enqueue
    /// order (`ordered`); keyed jobs beyond it are `waiting`.
    Keys(KeysArgs),
}

/// `jobqueue queue keys`.
#[derive(Debug, clap::Args)]
pub(crate) struct KeysArgs {
    /// The queue (one that has jobs, settings, a schedule or a runner).
    pub(crate) name: String,
    /// Most jobs of one key at once, 1 to 10000 (`5`, `5 per key`), or
    /// `ordered`: one at a time in enqueue order.
    #[arg(
        value_parser = crate::keys::parse_key_limit,
        allow_hyphen_values = true,
        required_unless_present = "none"
    )]
    pub(crate) limit: Option<jobqueue_core::KeyLimit>,
    /// Remove the key limit.
    #[arg(long, conflicts_with = "limit")]
    pub(crate) none: bool,
}

/// `jobqueue queue rate`.
#[derive(Debug, clap::Args)]
pub(crate) struct RateArgs {
    /// The queue (one that has jobs, settings, a schedule or a runner).
    pub(crate) name: String,
    /// Most starts per period, as STARTS/PERIOD: 50/1s, 100/1m, 10/250ms.
    #[arg(
        value_parser = crate::rate::parse_rate,
        allow_hyphen_values = true,
        required_unless_present = "none"
    )]
    pub(crate) rate: Option<jobqueue_core::RateLimit>,
    /// Remove the rate limit.
    #[arg(long, conflicts_with = "rate")]
    pub(crate) none: bool,
}

/// `jobqueue queue limit`.
#[derive(Debug, clap::Args)]
pub(crate) struct LimitArgs {
    /// The queue.
    pub(crate) name: String,
    /// Most jobs held at once, 1 or more.
    #[arg(allow_negative_numbers = true, required_unless_present = "none")]
    pub(crate) limit: Option<i64>,
    /// Remove the limit.
    #[arg(long, conflicts_with = "limit")]
    pub(crate) none: bool,
}

/// `jobqueue work`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkArgs {
    /// Jobs worked at once: the worker threads (unless --threads says
    /// fewer).
    #[arg(
        long,
        allow_negative_numbers = true,
        short = 'c',
        env = "JOBQUEUE_CONCURRENCY",
        default_value_t = 8
    )]
    pub(crate) concurrency: usize,
    /// Worker threads, when fewer than --concurrency: async handlers hold
    /// none, so a worker of async handlers needs few (default: the
    /// concurrency).
    #[cfg(feature = "async")]
    #[arg(long, allow_negative_numbers = true, env = "JOBQUEUE_THREADS")]
    pub(crate) threads: Option<usize>,
    /// Threads of the runtime async handlers run on.
    #[cfg(feature = "async")]
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_ASYNC_THREADS",
        default_value_t = 2
    )]
    pub(crate) async_threads: usize,
    /// Queues to work, comma-separated (default: all); `name=N` also caps
    /// this runner's jobs of that queue at N at once, e.g. mail=4,media=2,default.
    #[arg(long, short = 'q', env = "JOBQUEUE_QUEUES", value_delimiter = ',')]
    pub(crate) queues: Vec<String>,
    /// Snoozes allowed per job before it fails instead.
    #[arg(long, allow_negative_numbers = true, env = "JOBQUEUE_MAX_SNOOZES", default_value_t = jobqueue_core::engine::DEFAULT_MAX_SNOOZES)]
    pub(crate) max_snoozes: i32,
    /// Most jobs claimed per statement.
    #[arg(long, allow_negative_numbers = true, env = "JOBQUEUE_BATCH_SIZE", default_value_t = jobqueue_runner::RunnerConfig::DEFAULT_BATCH_SIZE)]
    pub(crate) batch_size: usize,
    /// Fallback poll interval, and how often due scheduled jobs are moved to
    /// pending, in milliseconds.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_POLL_INTERVAL_MS",
        default_value_t = 1000
    )]
    pub(crate) poll_interval_ms: u64,
    /// Lease in seconds (heartbeats every third of it).
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_LEASE_SECS",
        default_value_t = 30.0
    )]
    pub(crate) lease_secs: f64,
    /// Grace period for in-flight jobs at shutdown, in seconds.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_GRACE_SECS",
        default_value_t = 30.0
    )]
    pub(crate) grace_secs: f64,
    /// Backoff after a first failed attempt, in milliseconds (doubles per attempt).
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_RETRY_BASE_MS",
        default_value_t = 2000
    )]
    pub(crate) retry_base_ms: u64,
    /// Longest backoff between attempts, in seconds.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_RETRY_MAX_SECS",
        default_value_t = 3600.0
    )]
    pub(crate) retry_max_secs: f64,
    /// Stale-job recovery interval in seconds.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_RESCUE_SECS",
        default_value_t = 5.0
    )]
    pub(crate) rescue_secs: f64,
    /// How often the indexes of live jobs are checked, and one a long
    /// transaction left several times its packed size rebuilt
    /// (`REINDEX INDEX CONCURRENTLY`, one runner at a time), in seconds.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_INDEX_UPKEEP_SECS",
        default_value_t = 600.0
    )]
    pub(crate) index_upkeep_secs: f64,
    /// Keep completed jobs this many hours. 0 (the default): the completion
    /// deletes the job's row, the least WAL per job; completions are still
    /// counted per minute (`stats`, the dashboard's chart), but `show` and
    /// the list of completed jobs find none. More: the completion rewrites
    /// the row as `completed`, and maintenance deletes it once it is this
    /// old.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_RETAIN_COMPLETED_HOURS",
        default_value_t = 0.0
    )]
    pub(crate) retain_completed_hours: f64,
    /// Keep failed jobs this many hours.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_RETAIN_FAILED_HOURS",
        default_value_t = 720.0
    )]
    pub(crate) retain_failed_hours: f64,
    /// Keep cancelled jobs this many hours.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_RETAIN_CANCELLED_HOURS",
        default_value_t = 168.0
    )]
    pub(crate) retain_cancelled_hours: f64,
    /// Keep finished workflows and batches (their steps, edges and
    /// results: `workflow show`) this many hours after their last step
    /// ended.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_RETAIN_WORKFLOWS_HOURS",
        default_value_t = 168.0
    )]
    pub(crate) retain_workflows_hours: f64,
    /// Worker id stored on claimed rows (default: host-pid-random).
    #[arg(long, env = "JOBQUEUE_WORKER_ID")]
    pub(crate) worker_id: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics, e.g.
    /// 127.0.0.1:9464 (default: no metrics). Bind to 127.0.0.1 unless the
    /// scraper runs elsewhere: the page shows queue names and job types.
    #[arg(long, env = "JOBQUEUE_METRICS_ADDR", value_name = "ADDR")]
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
    /// How often the runner that computes the table-wide queue gauges
    /// refreshes them, in seconds.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_METRICS_REFRESH_SECS",
        default_value_t = 5.0
    )]
    pub(crate) metrics_refresh_secs: f64,
    /// Seconds the runner waits on one database round trip before it takes
    /// the server for hung (a frozen process or VM, a partitioned network),
    /// closes the connection and reconnects through the URL's hosts. Also
    /// the per-host connect timeout (2 to 10 s) and TCP user timeout, unless
    /// the URL sets them.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_DB_TIMEOUT_SECS",
        default_value_t = 15.0
    )]
    pub(crate) db_timeout_secs: f64,
    /// Jobs claimed beyond what the workers can start at once (default: a
    /// quarter of the workers, at least 1).
    #[arg(long, env = "JOBQUEUE_PREFETCH")]
    pub(crate) prefetch: Option<usize>,
    /// How often leases of running jobs are renewed, in seconds (default: a
    /// third of the lease).
    #[arg(long, allow_negative_numbers = true, env = "JOBQUEUE_HEARTBEAT_SECS")]
    pub(crate) heartbeat_secs: Option<f64>,
    /// How often finished jobs past their retention are deleted, in seconds.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_PRUNE_SECS",
        default_value_t = 60.0
    )]
    pub(crate) prune_secs: f64,
    /// How often the jobs table's dead row versions are checked, in seconds.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_VACUUM_SECS",
        default_value_t = 10.0
    )]
    pub(crate) vacuum_secs: f64,
    /// Dead row versions that make maintenance vacuum the jobs table.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_VACUUM_MIN_DEAD",
        default_value_t = 20_000
    )]
    pub(crate) vacuum_min_dead: i64,
    /// Timeout for job types that set none, in seconds (default: none).
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_DEFAULT_TIMEOUT_SECS"
    )]
    pub(crate) default_timeout_secs: Option<f64>,
    /// Most outcomes written by one statement.
    #[arg(
        long,
        allow_negative_numbers = true,
        env = "JOBQUEUE_COMPLETION_BATCH",
        default_value_t = 1000
    )]
    pub(crate) completion_batch: usize,
    /// Database connections handlers may use at once (default: the
    /// concurrency, at most 256).
    #[arg(long, env = "JOBQUEUE_HANDLER_POOL_SIZE")]
    pub(crate) handler_pool_size: Option<u32>,
}

/// `jobqueue enqueue`.
#[derive(Debug, clap::Args)]
pub(crate) struct EnqueueArgs {
    /// Job type, e.g. email.send: one this binary registers, whose declared
    /// queue, priority and attempts apply unless given here.
    pub(crate) job_type: String,
    /// Payload as JSON, e.g. '{"to": "a@example.com"}'; it must decode as
    /// the type's payload.
    #[arg(required_unless_present = "payload_file")]
    pub(crate) payload: Option<String>,
    /// Read the payload from this file instead (`-`: standard input), for
    /// payloads too large for the command line.
    #[arg(long, value_name = "PATH", conflicts_with = "payload")]
    pub(crate) payload_file: Option<std::path::PathBuf>,
    /// Enqueue a type this binary does not register (its payload is then
    /// only checked to be JSON, and the queue-wide defaults apply).
    #[arg(long)]
    pub(crate) force: bool,
    /// Priority, 0 to 1000 (higher first; default: the type's).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) priority: Option<i32>,
    /// Queue (default: the type's).
    #[arg(long)]
    pub(crate) queue: Option<String>,
    /// Not before this time (RFC 3339 with a time zone, e.g.
    /// 2026-11-22T10:00:00Z or 2026-11-22T11:00:00+01:00).
    #[arg(long, conflicts_with = "delay_secs")]
    pub(crate) run_at: Option<String>,
    /// Not before this many seconds from now.
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) delay_secs: Option<f64>,
    /// Attempts before failed, 1 to 1000 (default: the type's).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) max_attempts: Option<i32>,
    /// At most one live job per key: when a live job holds the key, nothing
    /// is inserted, its id is printed and a note goes to stderr (exit 0).
    #[arg(long)]
    pub(crate) unique_key: Option<String>,
    /// Concurrency key, 1 to 255 characters (default: the type's, from
    /// its payload): in a queue with a key limit (`queue keys`), at most
    /// that many of the key's jobs run at once.
    #[arg(long)]
    pub(crate) concurrency_key: Option<String>,
    /// A tag, 1 to 64 characters of [A-Za-z0-9_.:=/-] (`tenant:42`);
    /// repeat for more (at most 16): `list --tag` and the dashboard select
    /// by them.
    #[arg(long = "tag", value_name = "TAG")]
    pub(crate) tags: Vec<String>,
    /// A metadata entry, KEY=VALUE; VALUE is taken as JSON when it parses
    /// (`attempt=3`, `user={"id":42}`), else as a string. Repeat for more.
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub(crate) meta: Vec<String>,
}

/// `jobqueue list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// Only this status (blocked, waiting, scheduled, pending, unhandled,
    /// claimed, running, completed, failed, cancelled).
    #[arg(long)]
    pub(crate) status: Option<String>,
    /// Only this queue.
    #[arg(long)]
    pub(crate) queue: Option<String>,
    /// Only this job type.
    #[arg(long = "type")]
    pub(crate) job_type: Option<String>,
    /// Only jobs carrying this tag.
    #[arg(long)]
    pub(crate) tag: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50, allow_negative_numbers = true)]
    pub(crate) limit: i64,
    /// Print one JSON object per job, one per line (fields in the guide).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `jobqueue retry`.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub(crate) struct RetryArgs {
    /// The job to retry.
    pub(crate) id: Option<String>,
    /// Retry every failed job.
    #[arg(long)]
    pub(crate) failed: bool,
}

/// `jobqueue prune`.
#[derive(Debug, clap::Args)]
pub(crate) struct PruneArgs {
    /// Delete completed jobs finished more than this many hours ago.
    #[arg(long, allow_negative_numbers = true, default_value_t = 24.0)]
    pub(crate) completed_hours: f64,
    /// Delete failed jobs finished more than this many hours ago.
    #[arg(long, allow_negative_numbers = true, default_value_t = 720.0)]
    pub(crate) failed_hours: f64,
    /// Delete cancelled jobs finished more than this many hours ago.
    #[arg(long, allow_negative_numbers = true, default_value_t = 168.0)]
    pub(crate) cancelled_hours: f64,
}
