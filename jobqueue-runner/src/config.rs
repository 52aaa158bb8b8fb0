//! Runner configuration: every knob, its default, and its validation.

use std::net::SocketAddr;
use std::time::Duration;

use jobqueue_core::{Retention, RetryPolicy};

use crate::RunnerError;

/// One chaining setter per field, documented as setting it: `field: Type;`
/// takes the value as it is, `field: Type => expression;` stores the
/// expression (an `Option` field's `Some`, a conversion).
macro_rules! setters {
    ($($field:ident: $ty:ty $(=> $value:expr)?;)*) => {
        $(
            #[doc = concat!("Sets `", stringify!($field), "` (the same as setting the field; see its documentation).")]
            pub fn $field(mut self, $field: $ty) -> Self {
                self.$field = setters!(@value $field $(, $value)?);
                self
            }
        )*
    };
    (@value $field:ident) => { $field };
    (@value $field:ident, $value:expr) => { $value };
}

/// How a runner works. Build with [`RunnerConfig::new`] and set fields
/// (directly, or with the chaining setters, which do the same). Values that
/// default to a share of another field (`prefetch`, `heartbeat_interval`,
/// `handler_pool_size`) are `None` until set, and derived when the runner
/// starts: setting `concurrency` or `lease` never leaves them stale.
///
/// Its `Debug` output shows the database URL with its password hidden.
#[derive(Clone)]
#[non_exhaustive]
pub struct RunnerConfig {
    /// PostgreSQL URL (libpq syntax, multi-host URLs included).
    pub database_url: String,
    /// Stored on claimed rows. Default: `host-pid-random`.
    pub worker_id: String,
    /// Jobs worked at once: the worker threads, each running one handler
    /// at a time (with the `async` feature, see `threads`: async handlers
    /// run as tasks and hold no thread). Default 8.
    pub concurrency: usize,
    /// Worker threads, each running one thread handler
    /// ([`crate::Perform`]) at a time, when fewer than `concurrency`: a
    /// runner whose handlers are async ([`crate::AsyncPerform`]) needs few,
    /// since a worker only hands an async job to the runtime. Default
    /// (`None`): `concurrency`.
    #[cfg(feature = "async")]
    pub threads: Option<usize>,
    /// Threads of the tokio runtime the runner makes for its async
    /// handlers, when any are registered and the application gives no
    /// runtime of its own ([`crate::Runner::async_runtime`]). Default 2.
    #[cfg(feature = "async")]
    pub async_threads: usize,
    /// Queues to work; empty means every queue. Default: every queue.
    pub queues: Vec<String>,
    /// This runner's own concurrency per queue: at most this many jobs of
    /// the queue held at once (`--queues mail=4,media=2`); queues not named
    /// share the workers. A queue named here but not in a non-empty
    /// `queues` is refused. Default: none.
    pub queue_concurrency: std::collections::BTreeMap<String, usize>,
    /// Snoozes allowed per job ([`crate::JobError::Snooze`]) before the job
    /// fails instead. Default [`jobqueue_core::engine::DEFAULT_MAX_SNOOZES`].
    pub max_snoozes: i32,
    /// Most jobs claimed by one statement. Default
    /// [`RunnerConfig::DEFAULT_BATCH_SIZE`]. Only short jobs fill a batch:
    /// for longer ones the runner claims what its workers have room for.
    pub batch_size: usize,
    /// Jobs claimed beyond what the workers can start at once. Small, so a
    /// runner never hoards jobs another runner could take. The runner raises
    /// it, up to two batches, for short jobs: to what its workers finish
    /// during one claim round trip (such jobs would not start sooner
    /// elsewhere). Default (`None`): `concurrency / 4`, at least 1.
    pub prefetch: Option<usize>,
    /// Fallback poll when no notification arrives, and how often scheduled
    /// jobs (delayed, or waiting out a retry's backoff) that became due are
    /// moved to `pending`. Default 1 s.
    pub poll_interval: Duration,
    /// How long a claim holds a job without a heartbeat. Default 30 s.
    pub lease: Duration,
    /// How often leases of in-flight jobs are renewed. Default (`None`): a
    /// third of the lease.
    pub heartbeat_interval: Option<Duration>,
    /// Backoff between attempts. Default: [`RetryPolicy::default`].
    pub retry: RetryPolicy,
    /// How long finished jobs are kept. Default: [`Retention::default`].
    pub retention: Retention,
    /// How often expired leases are recovered. Default 5 s.
    pub rescue_interval: Duration,
    /// How often finished jobs are pruned. Default 60 s.
    pub prune_interval: Duration,
    /// How often the jobs table's dead row versions are checked, and the
    /// table vacuumed when there are at least `vacuum_min_dead`. Default 10 s.
    pub vacuum_interval: Duration,
    /// Dead row versions that make maintenance vacuum. Default 20,000.
    pub vacuum_min_dead: i64,
    /// How often the indexes of live jobs are compared with the size they
    /// would have packed, and one several times that size rebuilt
    /// (`REINDEX INDEX CONCURRENTLY`, by one runner at a time) once nothing
    /// holds the xmin horizon: what a long transaction made them grow stays
    /// until then. Default 10 min.
    pub index_upkeep_interval: Duration,
    /// How long in-flight jobs may run on after shutdown begins. Default 30 s.
    pub shutdown_grace: Duration,
    /// Timeout for job types that set none. Default: none.
    pub default_timeout: Option<Duration>,
    /// Most outcomes written by one statement. Default 1000.
    pub completion_batch: usize,
    /// Database connections handlers may use at once. Default (`None`):
    /// `concurrency`, at most 256.
    pub handler_pool_size: Option<u32>,
    /// Prometheus metrics: off, kept for [`crate::RunnerHandle::metrics_text`],
    /// or also served over HTTP. Default: off.
    pub metrics: MetricsMode,
    /// How often the one runner that computes the table-wide queue gauges
    /// (see [`MetricsMode`]) refreshes them, and how soon another takes
    /// over when it stops. Default 5 s.
    pub metrics_refresh: Duration,
    /// How long the runner waits on one database round trip (its own
    /// statements: claims, outcomes, heartbeats, maintenance but `VACUUM`)
    /// before it takes the server for hung, closes the connection and
    /// connects again through the URL's hosts; also the per-host connect
    /// timeout (2 to 10 s) and the TCP user timeout its connections get
    /// unless the URL sets them. A server that stopped answering without
    /// closing its connections (a frozen process or VM, a partitioned
    /// network) costs at most this long. Default 15 s; keep it above the
    /// longest statement the runner may wait on (a claim queued behind a
    /// queue's lock, a prune batch).
    pub db_timeout: Duration,
}

/// Every field, the URL's password hidden ([`jobqueue_core::redact_url`]).
impl std::fmt::Debug for RunnerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so that a new field cannot be left out unnoticed.
        let RunnerConfig {
            database_url,
            worker_id,
            concurrency,
            #[cfg(feature = "async")]
            threads,
            #[cfg(feature = "async")]
            async_threads,
            queues,
            queue_concurrency,
            max_snoozes,
            batch_size,
            prefetch,
            poll_interval,
            lease,
            heartbeat_interval,
            retry,
            retention,
            rescue_interval,
            prune_interval,
            vacuum_interval,
            vacuum_min_dead,
            index_upkeep_interval,
            shutdown_grace,
            default_timeout,
            completion_batch,
            handler_pool_size,
            metrics,
            metrics_refresh,
            db_timeout,
        } = self;
        let mut out = f.debug_struct("RunnerConfig");
        out.field("database_url", &jobqueue_core::redact_url(database_url))
            .field("worker_id", worker_id)
            .field("concurrency", concurrency);
        #[cfg(feature = "async")]
        out.field("threads", threads)
            .field("async_threads", async_threads);
        out.field("queues", queues)
            .field("queue_concurrency", queue_concurrency)
            .field("max_snoozes", max_snoozes)
            .field("batch_size", batch_size)
            .field("prefetch", prefetch)
            .field("poll_interval", poll_interval)
            .field("lease", lease)
            .field("heartbeat_interval", heartbeat_interval)
            .field("retry", retry)
            .field("retention", retention)
            .field("rescue_interval", rescue_interval)
            .field("prune_interval", prune_interval)
            .field("vacuum_interval", vacuum_interval)
            .field("vacuum_min_dead", vacuum_min_dead)
            .field("index_upkeep_interval", index_upkeep_interval)
            .field("shutdown_grace", shutdown_grace)
            .field("default_timeout", default_timeout)
            .field("completion_batch", completion_batch)
            .field("handler_pool_size", handler_pool_size)
            .field("metrics", metrics)
            .field("metrics_refresh", metrics_refresh)
            .field("db_timeout", db_timeout)
            .finish()
    }
}

/// Whether a runner keeps Prometheus metrics, and where it serves them.
///
/// A runner that keeps them counts what it does by queue and job type
/// (claims, outcomes, handler and queue-time histograms, claim round trips
/// and batch sizes, empty claims, wake-ups, rescues, reconnects, busy and
/// idle workers), and one runner at a time also computes the table-wide
/// gauges of every known queue (jobs by state, oldest due age, paused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MetricsMode {
    /// No metrics are kept (and none of their cost is paid).
    #[default]
    Off,
    /// Kept, and read by the application
    /// ([`crate::RunnerHandle::metrics_text`]), e.g. to serve from its own
    /// HTTP server.
    Keep,
    /// Kept, and served as OpenMetrics text at `GET /metrics` on this
    /// address (e.g. `127.0.0.1:9464`). A runner whose address cannot be
    /// bound refuses to start.
    Serve(SocketAddr),
}

impl RunnerConfig {
    /// Default of `batch_size`. Each claim and each completion is a commit,
    /// with its WAL flush; batches of 1,000 drain a backlog of short jobs
    /// about 1.5 times as fast as batches of 200 on a 2-core machine
    /// (`jobqueue bench --only drain`).
    pub const DEFAULT_BATCH_SIZE: usize = 1000;

    /// Defaults for a runner on `database_url`.
    pub fn new(database_url: impl Into<String>) -> Self {
        RunnerConfig {
            database_url: database_url.into(),
            worker_id: default_worker_id(),
            concurrency: 8,
            #[cfg(feature = "async")]
            threads: None,
            #[cfg(feature = "async")]
            async_threads: 2,
            queues: Vec::new(),
            queue_concurrency: std::collections::BTreeMap::new(),
            max_snoozes: jobqueue_core::engine::DEFAULT_MAX_SNOOZES,
            batch_size: Self::DEFAULT_BATCH_SIZE,
            prefetch: None,
            poll_interval: Duration::from_secs(1),
            lease: jobqueue_core::engine::DEFAULT_LEASE,
            heartbeat_interval: None,
            retry: RetryPolicy::default(),
            retention: Retention::default(),
            rescue_interval: Duration::from_secs(5),
            prune_interval: Duration::from_secs(60),
            vacuum_interval: Duration::from_secs(10),
            vacuum_min_dead: 20_000,
            index_upkeep_interval: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(30),
            default_timeout: None,
            completion_batch: 1000,
            handler_pool_size: None,
            metrics: MetricsMode::Off,
            metrics_refresh: Duration::from_secs(5),
            db_timeout: Duration::from_secs(15),
        }
    }

    /// Serves Prometheus metrics on `addr` (sets `metrics`).
    pub fn serve_metrics(mut self, addr: SocketAddr) -> Self {
        self.metrics = MetricsMode::Serve(addr);
        self
    }

    /// Sets `queues` (the same as setting the field): the queues to work,
    /// all of them if none.
    pub fn queues<I, S>(mut self, queues: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.queues = queues.into_iter().map(Into::into).collect();
        self
    }

    setters! {
        worker_id: impl Into<String> => worker_id.into();
        concurrency: usize;
        queue_concurrency: std::collections::BTreeMap<String, usize>;
        max_snoozes: i32;
        batch_size: usize;
        prefetch: usize => Some(prefetch);
        poll_interval: Duration;
        lease: Duration;
        heartbeat_interval: Duration => Some(heartbeat_interval);
        retry: RetryPolicy;
        retention: Retention;
        rescue_interval: Duration;
        prune_interval: Duration;
        vacuum_interval: Duration;
        vacuum_min_dead: i64;
        index_upkeep_interval: Duration;
        shutdown_grace: Duration;
        default_timeout: Duration => Some(default_timeout);
        completion_batch: usize;
        handler_pool_size: u32 => Some(handler_pool_size);
        metrics: MetricsMode;
        metrics_refresh: Duration;
        db_timeout: Duration;
    }

    /// Sets `threads`: the worker threads for thread handlers, when fewer
    /// than `concurrency` (a runner of async handlers needs few).
    #[cfg(feature = "async")]
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Sets `async_threads`: the threads of the runtime the runner makes
    /// for its async handlers.
    #[cfg(feature = "async")]
    pub fn async_threads(mut self, threads: usize) -> Self {
        self.async_threads = threads;
        self
    }

    /// The worker threads a runner starts: `threads`, or `concurrency`.
    pub(crate) fn worker_threads(&self) -> usize {
        #[cfg(feature = "async")]
        return self.threads.unwrap_or(self.concurrency);
        #[cfg(not(feature = "async"))]
        self.concurrency
    }

    /// Keeps completed jobs' rows for `keep` (a prune deletes them after);
    /// zero deletes each row as its job completes. Sets
    /// `retention.completed` (default: zero). See [`Retention`].
    pub fn keep_completed(mut self, keep: Duration) -> Self {
        self.retention.completed = Some(keep);
        self
    }

    /// `prefetch`, or its default: a quarter of the workers, at least 1.
    pub fn effective_prefetch(&self) -> usize {
        self.prefetch.unwrap_or((self.concurrency / 4).max(1))
    }

    /// `heartbeat_interval`, or its default: a third of the lease.
    pub fn effective_heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval.unwrap_or(self.lease / 3)
    }

    /// `handler_pool_size`, or its default: `concurrency`, at most 256.
    pub fn effective_handler_pool_size(&self) -> u32 {
        self.handler_pool_size
            .unwrap_or(self.concurrency.clamp(1, 256) as u32)
    }

    /// The most the prefetch grows to for short jobs: two batches (one
    /// being claimed while the last one's outcomes are written), or the
    /// configured prefetch if that is more.
    pub fn max_prefetch(&self) -> usize {
        self.effective_prefetch().max(2 * self.batch_size)
    }

    /// The most jobs this runner holds at once: claimed, running, or
    /// finished with the outcome not yet written (`concurrency` +
    /// [`RunnerConfig::max_prefetch`] + [`RunnerConfig::early_reserve`]). A
    /// job's place frees up only once its outcome is written, so a slow
    /// database makes the runner claim less.
    pub fn max_held(&self) -> usize {
        self.concurrency + self.max_prefetch() + self.early_reserve()
    }

    /// Places kept for early claims: when jobs are announced in a queue
    /// of which this runner holds none waiting, it claims them at once, up
    /// to this many (the workers' count), even while its other queues keep
    /// it full, so they start at the next free worker.
    pub fn early_reserve(&self) -> usize {
        self.concurrency
    }

    /// Checks every field; the error names the field and what is allowed.
    pub fn validate(&self) -> Result<(), RunnerError> {
        let bad = |msg: String| Err(RunnerError::Config(msg));
        if self.database_url.trim().is_empty() {
            return bad("database_url is empty".into());
        }
        if !(1..=4096).contains(&self.concurrency) {
            return bad(format!(
                "concurrency {} is out of range (1 to 4096)",
                self.concurrency
            ));
        }
        #[cfg(feature = "async")]
        {
            let threads = self.worker_threads();
            if !(1..=self.concurrency).contains(&threads) {
                return bad(format!(
                    "threads {threads} is out of range (1 to concurrency, {})",
                    self.concurrency
                ));
            }
            if !(1..=256).contains(&self.async_threads) {
                return bad(format!(
                    "async_threads {} is out of range (1 to 256)",
                    self.async_threads
                ));
            }
        }
        if !(1..=10_000).contains(&self.batch_size) {
            return bad(format!(
                "batch_size {} is out of range (1 to 10000)",
                self.batch_size
            ));
        }
        if self.effective_prefetch() > 10_000 {
            return bad(format!(
                "prefetch {} is over 10000",
                self.effective_prefetch()
            ));
        }
        for queue in &self.queues {
            jobqueue_core::limits::check_queue(queue)?;
        }
        for (queue, most) in &self.queue_concurrency {
            jobqueue_core::limits::check_queue(queue)?;
            if *most == 0 {
                return bad(format!(
                    "concurrency 0 for queue `{queue}`: give at least 1 (to not work the queue, \
                     leave it out of `queues`)"
                ));
            }
            if !self.queues.is_empty() && !self.queues.contains(queue) {
                return bad(format!(
                    "queue `{queue}` has a concurrency but is not among the queues worked ({})",
                    self.queues.join(", ")
                ));
            }
        }
        if self.max_snoozes < 0 {
            return bad(format!("max_snoozes {} is negative", self.max_snoozes));
        }
        if self.lease < Duration::from_millis(500) {
            return bad(format!("lease {:?} is shorter than 500 ms", self.lease));
        }
        let heartbeat = self.effective_heartbeat_interval();
        if heartbeat.is_zero() || heartbeat >= self.lease {
            return bad(format!(
                "heartbeat_interval {heartbeat:?} must be above zero and shorter than the lease {:?}",
                self.lease
            ));
        }
        for (name, value) in [
            ("poll_interval", self.poll_interval),
            ("rescue_interval", self.rescue_interval),
            ("prune_interval", self.prune_interval),
            ("vacuum_interval", self.vacuum_interval),
            ("index_upkeep_interval", self.index_upkeep_interval),
            ("metrics_refresh", self.metrics_refresh),
        ] {
            if value < Duration::from_millis(1) {
                return bad(format!("{name} {value:?} is shorter than 1 ms"));
            }
        }
        if !(1..=100_000).contains(&self.completion_batch) {
            return bad(format!(
                "completion_batch {} is out of range (1 to 100000)",
                self.completion_batch
            ));
        }
        if self.effective_handler_pool_size() == 0 {
            return bad("handler_pool_size is 0".into());
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&self.db_timeout) {
            return bad(format!(
                "db_timeout {:?} is out of range (0.1 s to 1 hour)",
                self.db_timeout
            ));
        }
        self.retry.validate()?;
        Ok(())
    }
}

/// `host-pid-random`: unique per process, readable in `list` output.
fn default_worker_id() -> String {
    format!(
        "{}-{}-{:04x}",
        hostname(),
        std::process::id(),
        fastrand::u16(..)
    )
}

/// This machine's name (`host` if it cannot be read).
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_values_follow_the_fields_they_derive_from() {
        let mut config = RunnerConfig::new("postgres://x/y");
        assert_eq!(config.effective_prefetch(), 2);
        config.concurrency = 40;
        config.lease = Duration::from_secs(9);
        assert_eq!(config.effective_prefetch(), 10);
        assert_eq!(config.effective_handler_pool_size(), 40);
        assert_eq!(
            config.effective_heartbeat_interval(),
            Duration::from_secs(3)
        );
        config.prefetch = Some(3);
        config.heartbeat_interval = Some(Duration::from_secs(1));
        assert_eq!(config.effective_prefetch(), 3);
        assert_eq!(
            config.effective_heartbeat_interval(),
            Duration::from_secs(1)
        );
        // The setters do what setting the fields does.
        let chained = RunnerConfig::new("postgres://x/y")
            .concurrency(40)
            .lease(Duration::from_secs(9));
        assert_eq!(chained.effective_prefetch(), 10);
        assert_eq!(
            chained.effective_heartbeat_interval(),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn the_bound_on_held_jobs_is_concurrency_and_two_batches() {
        let mut config = RunnerConfig::new("postgres://x/y").concurrency(4);
        config.batch_size = 20;
        assert_eq!(config.max_held(), 4 + 40 + 4);
        config.prefetch = Some(100);
        assert_eq!(config.max_held(), 4 + 100 + 4);
    }

    #[test]
    fn validation_names_the_field() {
        let base = RunnerConfig::new("postgres://x/y");
        let cases: [(&str, RunnerConfig); 5] = [
            ("concurrency", base.clone().concurrency(0)),
            (
                "batch_size",
                RunnerConfig {
                    batch_size: 0,
                    ..base.clone()
                },
            ),
            ("lease", base.clone().lease(Duration::from_millis(10))),
            (
                "heartbeat_interval",
                RunnerConfig {
                    heartbeat_interval: Some(Duration::from_secs(60)),
                    ..base.clone()
                },
            ),
            (
                "database_url",
                RunnerConfig {
                    database_url: " ".into(),
                    ..base.clone()
                },
            ),
        ];
        for (field, config) in cases {
            let error = config.validate().expect_err(field).to_string();
            assert!(error.contains(field), "{field}: {error}");
        }
        assert!(base.validate().is_ok());
    }
}
