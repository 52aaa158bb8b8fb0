//! The table-wide queue gauges (depth by state, oldest due age, paused,
//! back-off, limits, the starts in a rate limit's window and the keys
//! held under a key limit) of every known queue, computed by one runner
//! at a time.
//!
//! Every runner serving metrics tries, on a connection of its own, to take
//! a session-level advisory lock (`jobqueue_core::engine::try_lead_queue_gauges`).
//! The one that holds it computes the gauges every refresh interval with
//! `jobqueue_core::list_queues` (partial indexes only: cheap at any history
//! size) and exports them; the others export none, so summing or graphing
//! them across runners counts each queue once. The lock is the session's:
//! a leader that dies, or loses its connection, hands the role to the next
//! runner whose turn comes, within one interval.
//!
//! A queue this runner reported once, or claimed jobs from, and that no
//! longer shows in the table (emptied, its failed jobs pruned) reads 0,
//! never its last value. A limit's gauges exist only while the queue has
//! that limit: a limit removed takes its series with it.

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, Instant};

use diesel::PgConnection;
use jobqueue_core::{JobStatus, KeyLimit, QueueInfo, RateLimit};

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;
use crate::health::ConnectFailures;
use crate::metrics::{Metrics, QueueGaugeFamilies, QueueLabels, QueueStateLabels};

/// The job states of `jobqueue_queue_jobs`: `blocked` counts the steps of
/// workflows waiting for the steps they come after.
const STATES: [&str; 7] = [
    "blocked",
    "waiting",
    "due",
    "scheduled",
    "unhandled",
    "held",
    "failed",
];

/// Computes the table-wide queue gauges every `metrics_refresh` while this
/// runner holds the lead, on a connection of its own (the lead is its
/// session's lock).
pub struct QueueGauges {
    interval: Duration,
    conn: Option<crate::hang_guard::Guarded<PgConnection>>,
    failures: ConnectFailures,
    leading: bool,
    known: BTreeSet<String>,
}

impl fmt::Debug for QueueGauges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueGauges")
            .field("interval", &self.interval)
            .field("connected", &self.conn.is_some())
            .field("leading", &self.leading)
            .field("known", &self.known)
            .finish_non_exhaustive()
    }
}

impl QueueGauges {
    /// The service as `config` paces it.
    pub fn new(config: &RunnerConfig) -> Self {
        QueueGauges {
            interval: config.metrics_refresh,
            conn: None,
            failures: ConnectFailures::default(),
            leading: false,
            known: BTreeSet::new(),
        }
    }
}

/// What a pass of [`QueueGauges`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GaugesReport {
    /// Nothing: the runner keeps no metrics.
    MetricsOff,
    /// No connection could be made (logged as the runner logs outages).
    NoConnection,
    /// Another runner leads: this one exports none.
    Following,
    /// This runner leads and set the gauges of these many queues.
    Leading {
        /// Queues whose gauges were set (those in the table, and those
        /// known before that emptied since, at 0).
        queues: usize,
        /// Whether it took the lead in this pass.
        took_the_lead: bool,
    },
}

impl fmt::Display for GaugesReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GaugesReport::MetricsOff => f.write_str("no metrics kept"),
            GaugesReport::NoConnection => f.write_str("no connection"),
            GaugesReport::Following => f.write_str("another runner computes the queue gauges"),
            GaugesReport::Leading {
                queues,
                took_the_lead,
            } => {
                if *took_the_lead {
                    f.write_str("this runner now computes the table-wide queue gauges; ")?;
                }
                write!(f, "set the gauges of {queues} queues")
            }
        }
    }
}

impl PassReport for GaugesReport {
    fn log_level(&self) -> Option<log::Level> {
        match self {
            GaugesReport::Leading {
                took_the_lead: true,
                ..
            } => Some(log::Level::Info),
            _ => None,
        }
    }
}

impl Service for QueueGauges {
    type Report = GaugesReport;

    fn cadence(&self) -> Cadence {
        Cadence::from_start("queue gauges", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<GaugesReport> {
        let shared = &cx.shared;
        let Some(metrics) = shared.metrics.as_ref() else {
            return Ok(GaugesReport::MetricsOff);
        };
        let gauges = &metrics.queues;
        if self.conn.is_none() {
            match shared.connector.service_connection("queue gauges") {
                Ok(c) => {
                    self.failures.connected(&shared.health);
                    self.conn = Some(c);
                }
                Err(e) => self.failures.failed(&shared.health, "queue gauges", &e),
            }
        }
        let was_leading = self.leading;
        let refreshed = match self.conn.as_mut() {
            Some(c) => refresh(c, &mut self.leading, metrics, &mut self.known).map(Some),
            None => Ok(None),
        };
        if refreshed.is_err() {
            // The lock may have gone with the connection: start over.
            self.conn = None;
            self.leading = false;
        }
        if !self.leading {
            clear(gauges);
        }
        gauges.leader.set(i64::from(self.leading));
        Ok(match refreshed? {
            None => GaugesReport::NoConnection,
            Some(None) => GaugesReport::Following,
            Some(Some(queues)) => GaugesReport::Leading {
                queues,
                took_the_lead: !was_leading,
            },
        })
    }
}

/// Takes the lead if free; if leading, sets every known queue's gauges and
/// returns how many (`None`: another runner leads).
fn refresh(
    conn: &mut PgConnection,
    leading: &mut bool,
    metrics: &Metrics,
    known: &mut BTreeSet<String>,
) -> jobqueue_core::Result<Option<usize>> {
    let gauges = &metrics.queues;
    if !*leading {
        *leading = jobqueue_core::engine::try_lead_queue_gauges(conn)?;
        if !*leading {
            return Ok(None);
        }
    }
    let started = Instant::now();
    let queues = jobqueue_core::list_queues(conn, jobqueue_core::Counting::Live)?;
    let mut seen = BTreeSet::new();
    for q in &queues {
        set(gauges, &q.queue, &Reading::of(q));
        seen.insert(q.queue.clone());
    }
    // Queues this runner claimed from are known too, even if they emptied
    // before any refresh saw them.
    known.extend(metrics.queues_claimed());
    for gone in known.difference(&seen) {
        set(gauges, gone, &Reading::default());
    }
    known.extend(seen);
    gauges.refresh.set(started.elapsed().as_secs_f64());
    Ok(Some(known.len()))
}

/// One queue's gauges as a refresh read them (the default: a queue that
/// no longer shows in the table, at 0 and without limits).
#[derive(Debug, Default)]
struct Reading {
    /// Jobs in each of [`STATES`].
    counts: [i64; STATES.len()],
    oldest_due: f64,
    paused: bool,
    backoff: f64,
    global_limit: Option<i32>,
    rate_limit: Option<RateLimit>,
    rate_started: i64,
    key_limit: Option<KeyLimit>,
    keys_held: i64,
}

impl Reading {
    fn of(q: &QueueInfo) -> Self {
        Reading {
            counts: [
                q.count(JobStatus::Blocked),
                q.count(JobStatus::Waiting),
                q.count(JobStatus::Pending),
                q.count(JobStatus::Scheduled),
                q.count(JobStatus::Unhandled),
                q.held(),
                q.count(JobStatus::Failed),
            ],
            oldest_due: q.oldest_due_age().map_or(0.0, |a| a.as_secs_f64()),
            paused: q.paused,
            backoff: q.backoff_left().map_or(0.0, |left| left.as_secs_f64()),
            global_limit: q.global_limit,
            rate_limit: q.rate_limit,
            rate_started: q.rate_used,
            key_limit: q.key_limit,
            keys_held: q.keys_held,
        }
    }
}

fn set(gauges: &QueueGaugeFamilies, queue: &str, reading: &Reading) {
    for (state, n) in STATES.into_iter().zip(reading.counts) {
        gauges
            .jobs
            .get_or_create(&QueueStateLabels {
                queue: queue.to_owned(),
                state,
            })
            .set(n);
    }
    let labels = QueueLabels {
        queue: queue.to_owned(),
    };
    gauges
        .oldest_due
        .get_or_create(&labels)
        .set(reading.oldest_due);
    gauges
        .paused
        .get_or_create(&labels)
        .set(i64::from(reading.paused));
    gauges.backoff.get_or_create(&labels).set(reading.backoff);
    match reading.global_limit {
        Some(limit) => {
            gauges
                .global_limit
                .get_or_create(&labels)
                .set(i64::from(limit));
        }
        None => {
            gauges.global_limit.remove(&labels);
        }
    }
    match reading.rate_limit {
        Some(rate) => {
            gauges
                .rate_starts
                .get_or_create(&labels)
                .set(i64::from(rate.starts()));
            gauges
                .rate_period
                .get_or_create(&labels)
                .set(rate.period().as_secs_f64());
            gauges
                .rate_started
                .get_or_create(&labels)
                .set(reading.rate_started);
        }
        None => {
            gauges.rate_starts.remove(&labels);
            gauges.rate_period.remove(&labels);
            gauges.rate_started.remove(&labels);
        }
    }
    match reading.key_limit {
        Some(limit) => {
            gauges
                .key_limit
                .get_or_create(&labels)
                .set(i64::from(limit.jobs_per_key()));
            gauges
                .keys_held
                .get_or_create(&labels)
                .set(reading.keys_held);
        }
        None => {
            gauges.key_limit.remove(&labels);
            gauges.keys_held.remove(&labels);
        }
    }
}

fn clear(gauges: &QueueGaugeFamilies) {
    gauges.jobs.clear();
    gauges.oldest_due.clear();
    gauges.paused.clear();
    gauges.backoff.clear();
    gauges.global_limit.clear();
    gauges.rate_starts.clear();
    gauges.rate_period.clear();
    gauges.rate_started.clear();
    gauges.key_limit.clear();
    gauges.keys_held.clear();
}
