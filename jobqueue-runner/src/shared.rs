//! What the runner's threads share: configuration, handlers, the jobs in
//! flight, counters, the database's health, and the room the fetcher
//! claims into.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use diesel::r2d2::Pool;

use crate::counters::Counters;
use crate::health::Health;
use crate::job_state::{InFlight, JobState};
use crate::{Registry, RunnerConfig};

/// Handler connections.
pub(crate) type HandlerPool = Pool<crate::connection::HandlerConnections>;

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (every critical section here is a plain map or option update).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Everything the runner's threads share.
pub(crate) struct Shared {
    pub(crate) config: RunnerConfig,
    pub(crate) registry: Registry,
    pub(crate) job_types: Vec<String>,
    pub(crate) inflight: InFlight,
    /// This runner's own per-queue concurrency.
    pub(crate) queue_limits: crate::queue_limits::QueueLimits,
    pub(crate) health: Health,
    pub(crate) counters: Counters,
    /// Prometheus metrics, when kept (see `RunnerConfig::metrics`).
    pub(crate) metrics: Option<crate::metrics::Metrics>,
    /// Workers running a handler now (counted while metrics are kept).
    pub(crate) busy_workers: AtomicUsize,
    pub(crate) pool: HandlerPool,
    /// The shutdown broadcast: disconnected when shutdown begins (claiming
    /// stops; claimed jobs not yet started are handed back).
    pub(crate) shutdown: crossbeam_channel::Receiver<()>,
    /// When the shutdown began (set just before the broadcast).
    pub(crate) shutdown_at: std::sync::OnceLock<Instant>,
    /// Jobs claimed and not yet finished: held by a worker, waiting for
    /// one, or finished with the outcome not yet written. The fetcher claims
    /// only while this is below its capacity.
    pub(crate) outstanding: AtomicUsize,
    /// A finishing job wakes the fetcher when `outstanding` drops to this
    /// (the fetcher sets it before it waits for room; 0 when it waits for
    /// new jobs instead, which finishing jobs cannot bring).
    pub(crate) wake_below: AtomicUsize,
    /// Moving average of handler run time, in microseconds.
    pub(crate) job_micros: AtomicU64,
    /// When a worker last started a job, in microseconds since `epoch`.
    pub(crate) last_start: AtomicU64,
    /// The runner's start, the origin of `last_start`.
    pub(crate) epoch: Instant,
    /// Wakes the fetcher (capacity 1: wake-ups coalesce, none is lost).
    pub(crate) wake: Sender<()>,
    /// Wakes the early claims (see `early.rs`; capacity 1).
    pub(crate) early: Sender<()>,
    /// Jobs held from early claims (at most `RunnerConfig::early_reserve`).
    pub(crate) early_held: AtomicUsize,
    /// The queues announced to the early claims and not yet claimed by
    /// them: the fetcher leaves them to the early claims meanwhile.
    pub(crate) early_queues: crate::early::Announced,
    /// The queues whose claims resume (see `resume.rs`): early claims,
    /// which read their queues from the start, leave them to the fetcher.
    pub(crate) resuming_queues: Mutex<HashSet<String>>,
    /// Whether the fetcher's last claim found a backlog (at least as many
    /// jobs as the early reserve): see `early.rs`.
    pub(crate) backlog: std::sync::atomic::AtomicBool,
    /// The queues notifications announced while claims resume: how a
    /// runner of every queue learns of queues new to it meanwhile.
    pub(crate) announced_queues: Mutex<HashSet<String>>,
    /// Whether the runner's queues have global limits, as the fetcher last
    /// read it (see `fetcher::limits_policy`).
    pub(crate) limits_seen: std::sync::atomic::AtomicU8,
    /// Ends the runner threads' connections that stop answering.
    pub(crate) watchdog: Arc<crate::hang_guard::Watchdog>,
    /// The URL's hosts, tried from the one that answered last.
    pub(crate) hosts: Arc<crate::host_order::HostOrder>,
}

impl Shared {
    pub(crate) fn is_stopping(&self) -> bool {
        crate::backoff::is_stopped(&self.shutdown)
    }

    /// Until when the runner waits for in-flight handlers (and their
    /// outcomes) once shutdown began: the grace period.
    pub(crate) fn grace_deadline(&self) -> Option<Instant> {
        self.shutdown_at
            .get()
            .map(|at| *at + self.config.shutdown_grace)
    }

    pub(crate) fn wake_fetcher(&self) {
        let _ = self.wake.try_send(());
    }

    /// New jobs are due in one of this runner's queues: wakes the fetcher,
    /// and the early claims for when the runner is busy.
    pub(crate) fn announce(&self, queue: String) {
        // Only names a claim takes are kept (a notification's payload is
        // text anyone may send on the channel).
        if jobqueue_core::limits::check_queue(&queue).is_ok() {
            // Only a runner of every queue claims from the queues announced
            // while claims resume.
            if self.config.queues.is_empty() && !lock(&self.resuming_queues).is_empty() {
                lock(&self.announced_queues).insert(queue.clone());
            }
            self.early_queues.add(queue);
        }
        self.wake_fetcher();
        let _ = self.early.try_send(());
    }

    /// A job stops counting against the runner's capacity: its outcome was
    /// written, or its handler was abandoned. Counts once per job.
    pub(crate) fn finished(&self, state: &JobState) {
        self.inflight.remove(&state.lease);
        if state.free_slot() {
            if state.early {
                self.early_held.fetch_sub(1, Ordering::AcqRel);
            }
            if let Some(slot) = state.queue_slot
                && self.queue_limits.freed(slot)
            {
                // Its queue was at this runner's limit for it.
                self.wake_fetcher();
            }
            self.slot_freed();
        }
    }

    /// Room for another job. Wakes the fetcher only when that makes the
    /// room it waits for, not once per job.
    fn slot_freed(&self) {
        let left = self
            .outstanding
            .fetch_sub(1, Ordering::AcqRel)
            .saturating_sub(1);
        if left <= self.wake_below.load(Ordering::Acquire) {
            self.wake_fetcher();
        }
    }

    /// Microseconds since the runner started.
    pub(crate) fn micros_now(&self) -> u64 {
        self.epoch.elapsed().as_micros().min(u128::from(u64::MAX)) as u64
    }

    /// Folds one handler run time into the moving average (1/16 weight).
    pub(crate) fn note_job_time(&self, took: Duration) {
        let sample = took.as_micros().min(u128::from(u32::MAX)) as u64;
        let old = self.job_micros.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample.max(1)
        } else {
            (old * 15 + sample) / 16
        };
        self.job_micros.store(new.max(1), Ordering::Relaxed);
    }
}
