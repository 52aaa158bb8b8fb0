//! The runner's Prometheus metrics: what this runner did, by queue and job
//! type, and the table-wide queue gauges when this runner computes them
//! (see `queue_gauges.rs`).
//!
//! Families are `prometheus-client` handles (clones share their values):
//! the runner's threads update them, and the exposition (see
//! `exposition.rs`) encodes them with the values read at scrape time.
//! Each job carries the handles of its queue and type ([`JobMetrics`]),
//! looked up once when it is claimed, so the hot path takes no lock but the
//! histograms' own.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// Registers in `registry` each family `"name" [in Unit] => handle, "help";`
/// (a clone of the handle: clones share their values).
macro_rules! families {
    ($registry:expr; $($name:literal $(in $unit:ident)? => $metric:expr, $help:literal;)*) => {
        $(families!(@one $registry, $name, $help, $metric $(, Unit::$unit)?);)*
    };
    (@one $registry:expr, $name:literal, $help:literal, $metric:expr) => {
        $registry.register($name, $help, $metric.clone())
    };
    (@one $registry:expr, $name:literal, $help:literal, $metric:expr, $unit:expr) => {
        $registry.register_with_unit($name, $help, $unit, $metric.clone())
    };
}

/// Labels of what one job did.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobLabels {
    queue: String,
    job_type: String,
}

/// Labels of a job's end (or hand-back).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    queue: String,
    job_type: String,
    outcome: &'static str,
}

/// Labels of a table-wide queue gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct QueueLabels {
    pub(crate) queue: String,
}

/// Labels of a queue's job count by state.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct QueueStateLabels {
    pub(crate) queue: String,
    pub(crate) state: &'static str,
}

/// What became of a claimed job, as counted in `jobqueue_job_outcomes_total`
/// (in `Outcome::ALL`'s order: the discriminant indexes a job's counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Completed = 0,
    Retried = 1,
    Failed = 2,
    Cancelled = 3,
    Snoozed = 4,
    LeaseLost = 5,
    Released = 6,
    Unhandled = 7,
}

impl Outcome {
    const ALL: [Outcome; 8] = [
        Outcome::Completed,
        Outcome::Retried,
        Outcome::Failed,
        Outcome::Cancelled,
        Outcome::Snoozed,
        Outcome::LeaseLost,
        Outcome::Released,
        Outcome::Unhandled,
    ];

    fn label(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Retried => "retried",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
            Outcome::Snoozed => "snoozed",
            Outcome::LeaseLost => "lease_lost",
            Outcome::Released => "released",
            Outcome::Unhandled => "unhandled",
        }
    }
}

/// The handles of one queue and job type, carried by each of its jobs.
#[derive(Debug)]
pub(crate) struct JobMetrics {
    claimed: Counter,
    panics: Counter,
    handler: Histogram,
    queue_time: Histogram,
    outcomes: [Counter; Outcome::ALL.len()],
}

impl JobMetrics {
    /// The handler ran for `took`.
    pub(crate) fn handler_ran(&self, took: Duration) {
        self.handler.observe(took.as_secs_f64());
    }

    /// The job started `waited` after it was due.
    pub(crate) fn started_after(&self, waited: Duration) {
        self.queue_time.observe(waited.as_secs_f64());
    }

    /// The handler panicked.
    pub(crate) fn panicked(&self) {
        self.panics.inc();
    }

    /// The job's outcome was written (or, for `LeaseLost`, found lost).
    pub(crate) fn ended(&self, outcome: Outcome) {
        self.outcomes[outcome as usize].inc();
    }

    /// A job of this queue and type was claimed.
    pub(crate) fn claimed(&self) {
        self.claimed.inc();
    }
}

/// Buckets of durations from 0.5 ms to about 65 s, doubling.
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

/// The table-wide queue gauges, set by the runner that computes them.
#[derive(Debug, Default, Clone)]
pub(crate) struct QueueGaugeFamilies {
    /// Jobs by queue and state (waiting, due, scheduled, unhandled, held,
    /// failed).
    pub(crate) jobs: Family<QueueStateLabels, Gauge>,
    /// Age of each queue's oldest due job (0 when none is due).
    pub(crate) oldest_due: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    /// 1 for a paused queue.
    pub(crate) paused: Family<QueueLabels, Gauge>,
    /// Seconds left of a queue's back-off after a handler's "rate
    /// limited, retry after" (0 when not backing off).
    pub(crate) backoff: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    /// A queue's global limit: only queues with one.
    pub(crate) global_limit: Family<QueueLabels, Gauge>,
    /// A queue's rate limit, its starts per period: only rate-limited
    /// queues.
    pub(crate) rate_starts: Family<QueueLabels, Gauge>,
    /// A queue's rate limit, its period: only rate-limited queues.
    pub(crate) rate_period: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    /// Jobs started within a rate limit's current window: only
    /// rate-limited queues.
    pub(crate) rate_started: Family<QueueLabels, Gauge>,
    /// A queue's key limit, its most jobs of one key at once (1 for
    /// `ordered`): only queues with one.
    pub(crate) key_limit: Family<QueueLabels, Gauge>,
    /// Keys of a queue with jobs admitted and not finished: only queues
    /// with a key limit.
    pub(crate) keys_held: Family<QueueLabels, Gauge>,
    /// 1 while this runner computes the table-wide gauges.
    pub(crate) leader: Gauge,
    /// How long the last computation took.
    pub(crate) refresh: Gauge<f64, AtomicU64>,
}

/// Every metric a runner keeps.
#[derive(Debug)]
pub(crate) struct Metrics {
    claimed: Family<JobLabels, Counter>,
    outcomes: Family<OutcomeLabels, Counter>,
    panics: Family<JobLabels, Counter>,
    handler: Family<JobLabels, Histogram, fn() -> Histogram>,
    queue_time: Family<JobLabels, Histogram, fn() -> Histogram>,
    claim_duration: Histogram,
    claim_batch: Histogram,
    pub(crate) empty_claims: Counter,
    pub(crate) wakeups: Counter,
    pub(crate) rescued: Counter,
    pub(crate) queues: QueueGaugeFamilies,
    /// The handles by queue, then job type.
    by_job: RwLock<HashMap<String, HashMap<String, Arc<JobMetrics>>>>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Metrics {
            claimed: Family::default(),
            outcomes: Family::default(),
            panics: Family::default(),
            handler: Family::new_with_constructor(seconds_histogram),
            queue_time: Family::new_with_constructor(seconds_histogram),
            claim_duration: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
            claim_batch: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
            empty_claims: Counter::default(),
            wakeups: Counter::default(),
            rescued: Counter::default(),
            queues: QueueGaugeFamilies::default(),
            by_job: RwLock::new(HashMap::new()),
        }
    }

    /// The handles of `queue` and `job_type`, made on first use (with every
    /// outcome at 0, so each series exists before its first increment).
    pub(crate) fn job(&self, queue: &str, job_type: &str) -> Arc<JobMetrics> {
        if let Some(found) = self
            .by_job
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(queue)
            .and_then(|types| types.get(job_type))
        {
            return Arc::clone(found);
        }
        let labels = JobLabels {
            queue: queue.to_owned(),
            job_type: job_type.to_owned(),
        };
        let made = Arc::new(JobMetrics {
            claimed: self.claimed.get_or_create_owned(&labels),
            panics: self.panics.get_or_create_owned(&labels),
            handler: self.handler.get_or_create_owned(&labels),
            queue_time: self.queue_time.get_or_create_owned(&labels),
            outcomes: Outcome::ALL.map(|outcome| {
                self.outcomes.get_or_create_owned(&OutcomeLabels {
                    queue: queue.to_owned(),
                    job_type: job_type.to_owned(),
                    outcome: outcome.label(),
                })
            }),
        });
        let mut by_job = self.by_job.write().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            by_job
                .entry(labels.queue)
                .or_default()
                .entry(labels.job_type)
                .or_insert(made),
        )
    }

    /// The queues this runner has claimed jobs from.
    pub(crate) fn queues_claimed(&self) -> Vec<String> {
        self.by_job
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// A claim took `took` and returned `jobs` jobs.
    pub(crate) fn claimed(&self, took: Duration, jobs: usize) {
        self.claim_duration.observe(took.as_secs_f64());
        self.claim_batch.observe(jobs as f64);
        if jobs == 0 {
            self.empty_claims.inc();
        }
    }

    /// Registers every family in `registry` (names get the `jobqueue_`
    /// prefix, counters `_total`, durations `_seconds`).
    pub(crate) fn register(&self, registry: &mut Registry) {
        let queues = &self.queues;
        families! { registry;
            "jobs_claimed" => self.claimed,
                "Jobs claimed by this runner";
            "job_outcomes" => self.outcomes,
                "What became of the jobs this runner claimed: completed, retried, failed, \
                 cancelled, snoozed, lease_lost (another runner recovered the job first), \
                 released (handed back unstarted), unhandled (set aside: no handler)";
            "handler_panics" => self.panics,
                "Handler panics caught (each also fails or retries its attempt)";
            "job_duration" in Seconds => self.handler,
                "How long handlers ran";
            "job_queue_time" in Seconds => self.queue_time,
                "From when a job was due (its run_at) to when its handler started";
            "claim_duration" in Seconds => self.claim_duration,
                "Round trip of one claim statement";
            "claim_batch_size" => self.claim_batch,
                "Jobs returned by one claim statement";
            "claims_empty" => self.empty_claims,
                "Claims that found no due job";
            "notify_wakeups" => self.wakeups,
                "Notifications of new due jobs in this runner's queues";
            "jobs_rescued" => self.rescued,
                "Jobs whose lease expired (their runner died or froze), recovered by this runner";
            "queue_jobs" => queues.jobs,
                "Jobs per queue and state (waiting: on their concurrency key; due, scheduled, \
                 unhandled, held, failed), for every known queue; exported by the one runner that computes the table-wide gauges";
            "queue_oldest_due_age" in Seconds => queues.oldest_due,
                "How long the oldest due job of each queue has waited past its run_at (0: none due)";
            "queue_paused" => queues.paused,
                "1 for a paused queue";
            "queue_backoff" in Seconds => queues.backoff,
                "How long each queue's runners still hold back after a handler's \"rate \
                 limited, retry after\" (0: not backing off)";
            "queue_global_limit" => queues.global_limit,
                "Most jobs of the queue held at once by all runners together (only queues \
                 with a global limit)";
            "queue_rate_limit_starts" => queues.rate_starts,
                "Most jobs of the queue started per rate-limit period by all runners \
                 together (only rate-limited queues)";
            "queue_rate_limit_period" in Seconds => queues.rate_period,
                "The period of the queue's rate limit (only rate-limited queues)";
            "queue_rate_started" => queues.rate_started,
                "Jobs of the queue started within its rate limit's current window (only \
                 rate-limited queues)";
            "queue_key_limit" => queues.key_limit,
                "Most jobs of one concurrency key of the queue at once, by all runners together \
                 (1 for an ordered queue; only queues with a key limit)";
            "queue_keys_held" => queues.keys_held,
                "Concurrency keys of the queue with jobs admitted and not finished (only queues \
                 with a key limit)";
            "queue_gauges_leader" => queues.leader,
                "1 while this runner computes the table-wide queue gauges";
            "queue_gauges_refresh" in Seconds => queues.refresh,
                "How long the last computation of the queue gauges took";
        }
    }
}
