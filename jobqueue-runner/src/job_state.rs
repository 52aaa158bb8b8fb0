//! What the runner knows of each job it holds: its lease and flags the
//! lease keeper, the handler and the completer set, and the set of them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use jobqueue_core::JobId;
use jobqueue_core::engine::{Beat, Lease, QueueKey};

use crate::progress_note::ProgressNote;
use crate::sync::lock;

/// One claimed job while this runner holds it.
#[derive(Debug)]
pub(crate) struct JobState {
    pub(crate) lease: Lease,
    pub(crate) job_type: String,
    /// The runner's own limit of its queue (see `claimer/queue_limits.rs`), if any.
    pub(crate) queue_slot: Option<usize>,
    /// Claimed by an early claim (see `claimer/fetcher.rs`, its early claims).
    pub(crate) early: bool,
    /// The metrics of its queue and type, when metrics are kept.
    pub(crate) metrics: Option<Arc<crate::metrics::JobMetrics>>,
    /// Its queue and concurrency key, if it has one: once it finishes, the
    /// key's next jobs may be admitted.
    pub(crate) key: Option<QueueKey>,
    /// It is a step of a workflow: its completion releases the steps after
    /// it, and its end if it fails is settled at once.
    pub(crate) workflow: bool,
    /// The result its handler recorded for the steps after it (JSON text).
    pub(crate) result: Mutex<Option<String>>,
    /// How long it waited from due to claimed (by the database's clock),
    /// and when the claim returned (by this machine's): its queue time is
    /// the one plus the time since the other when its handler starts.
    pub(crate) waited_at_claim: Duration,
    pub(crate) claim_returned: Instant,
    /// A job of a rate-limited queue: when its handler must have started
    /// by (its claim was sent, plus the limit's margin), or it is handed
    /// back unstarted (see `Claimed::rate_margins`).
    pub(crate) start_by: Option<Instant>,
    /// A cancel was requested (seen at a heartbeat).
    pub(crate) cancel: AtomicBool,
    /// The lease was lost: the job was recovered by someone else.
    pub(crate) lost: AtomicBool,
    /// The handler ran past its timeout.
    pub(crate) timed_out: AtomicBool,
    /// The handler ran so far past its timeout that its lease is no longer
    /// renewed and its worker thread was replaced.
    pub(crate) abandoned: AtomicBool,
    /// The handler completed the job itself, in its own transaction.
    pub(crate) handled: AtomicBool,
    /// The row was marked `running`.
    pub(crate) marked_running: AtomicBool,
    /// Progress the handler reported that is not written yet.
    pub(crate) progress: ProgressNote,
    /// The job's event count when it was claimed: what the events its
    /// handler reports add to (see `Beat::events_base`).
    pub(crate) events_base: i32,
    /// The job no longer counts against the runner's capacity (its outcome
    /// was written, or its handler was abandoned).
    slot_freed: AtomicBool,
    started: OnceLock<Instant>,
    timeout: OnceLock<Option<Duration>>,
    /// An async handler's deadline: its future is dropped then (see
    /// `async_attempt.rs`), so the lease keeper neither flags nor abandons
    /// it as it does a thread handler past its timeout.
    #[cfg(feature = "async")]
    pub(crate) drop_at: OnceLock<Instant>,
    /// Wakes an async handler's guard when a cancel is requested or the
    /// lease is lost.
    #[cfg(feature = "async")]
    pub(crate) stop: tokio::sync::Notify,
}

impl JobState {
    pub(crate) fn new(
        lease: Lease,
        job_type: String,
        queue_slot: Option<usize>,
        early: bool,
        events_base: i32,
    ) -> Self {
        JobState {
            lease,
            job_type,
            queue_slot,
            early,
            metrics: None,
            key: None,
            workflow: false,
            result: Mutex::new(None),
            waited_at_claim: Duration::ZERO,
            claim_returned: Instant::now(),
            start_by: None,
            cancel: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            timed_out: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            handled: AtomicBool::new(false),
            marked_running: AtomicBool::new(false),
            progress: ProgressNote::default(),
            events_base,
            slot_freed: AtomicBool::new(false),
            started: OnceLock::new(),
            timeout: OnceLock::new(),
            #[cfg(feature = "async")]
            drop_at: OnceLock::new(),
            #[cfg(feature = "async")]
            stop: tokio::sync::Notify::new(),
        }
    }

    /// A cancel was requested or the lease lost: an async handler's future
    /// is dropped at its next await (a thread handler sees the flags).
    pub(crate) fn wake_handler(&self) {
        #[cfg(feature = "async")]
        self.stop.notify_one();
    }

    /// Marks the job as no longer counting against the runner's capacity;
    /// true the first time only.
    pub(crate) fn free_slot(&self) -> bool {
        !self.slot_freed.swap(true, Ordering::AcqRel)
    }

    /// Records that the handler starts now.
    pub(crate) fn start(&self, timeout: Option<Duration>) {
        let _ = self.started.set(Instant::now());
        let _ = self.timeout.set(timeout);
    }

    /// Records that an async handler starts now, its future to be dropped
    /// after `timeout`.
    #[cfg(feature = "async")]
    pub(crate) fn start_async(&self, timeout: Option<Duration>) {
        let now = Instant::now();
        let _ = self.started.set(now);
        let _ = self.timeout.set(None);
        if let Some(timeout) = timeout {
            let _ = self.drop_at.set(now + timeout);
        }
    }

    /// From due to now: how long the job waited for its handler.
    pub(crate) fn queue_time(&self) -> Duration {
        self.waited_at_claim + self.claim_returned.elapsed()
    }

    pub(crate) fn started(&self) -> Option<Instant> {
        self.started.get().copied()
    }

    /// When the handler's timeout runs out, if it started and has one.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let started = self.started()?;
        let timeout = (*self.timeout.get()?)?;
        Some(started + timeout)
    }
}

/// Gives each of `jobs` back the progress of its beat (in the same order)
/// that a failed heartbeat did not write.
pub(crate) fn put_back_progress<'a>(
    jobs: impl IntoIterator<Item = &'a JobState>,
    beats: Vec<Beat>,
) {
    for (job, beat) in jobs.into_iter().zip(beats) {
        if let Some(progress) = beat.progress {
            job.progress.put_back(progress);
        }
    }
}

/// The jobs this runner holds, by id.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    jobs: Mutex<HashMap<JobId, Arc<JobState>>>,
}

impl InFlight {
    pub(crate) fn insert(&self, state: Arc<JobState>) {
        lock(&self.jobs).insert(state.lease.job_id, state);
    }

    /// Forgets a job, if it is still the same claim.
    pub(crate) fn remove(&self, lease: &Lease) {
        let mut jobs = lock(&self.jobs);
        if jobs
            .get(&lease.job_id)
            .is_some_and(|s| s.lease.token == lease.token)
        {
            jobs.remove(&lease.job_id);
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<Arc<JobState>> {
        lock(&self.jobs).values().cloned().collect()
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.jobs).len()
    }
}
