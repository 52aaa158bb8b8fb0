//! State shared by the runner's threads: configuration, handlers, the jobs in
//! flight, counters, and the database health used to log outages once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use diesel::PgConnection;
use diesel::r2d2::{ConnectionManager, Pool};
use jobqueue_core::{JobId, Lease};

use crate::{Registry, RunnerConfig};

/// Handler connections.
pub(crate) type HandlerPool = Pool<ConnectionManager<PgConnection>>;

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (every critical section here is a plain map or option update).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One claimed job while this runner holds it.
#[derive(Debug)]
pub(crate) struct JobState {
    pub(crate) lease: Lease,
    pub(crate) job_type: String,
    /// A cancel was requested (seen at a heartbeat or progress report).
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
    /// The job no longer counts against the runner's capacity (its outcome
    /// was written, or its handler was abandoned).
    slot_freed: AtomicBool,
    started: OnceLock<Instant>,
    timeout: OnceLock<Option<Duration>>,
}

impl JobState {
    pub(crate) fn new(lease: Lease, job_type: String) -> Self {
        JobState {
            lease,
            job_type,
            cancel: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            timed_out: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            handled: AtomicBool::new(false),
            marked_running: AtomicBool::new(false),
            slot_freed: AtomicBool::new(false),
            started: OnceLock::new(),
            timeout: OnceLock::new(),
        }
    }

    /// Records that the handler starts now.
    pub(crate) fn start(&self, timeout: Option<Duration>) {
        let _ = self.started.set(Instant::now());
        let _ = self.timeout.set(timeout);
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

/// `error` on one line (libpq's messages span several).
pub(crate) fn one_line(error: &dyn std::fmt::Display) -> String {
    error
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the database answers, shared so an outage is logged once, not
/// once per thread and attempt.
#[derive(Debug, Default)]
pub(crate) struct Health {
    down_since: Mutex<Option<Instant>>,
}

impl Health {
    pub(crate) fn report_down(&self, who: &str, error: &dyn std::fmt::Display) {
        let mut down = lock(&self.down_since);
        if down.is_none() {
            *down = Some(Instant::now());
            log::error!(
                "database unavailable ({who}: {}); retrying with backoff",
                one_line(error)
            );
        }
    }

    pub(crate) fn report_up(&self) {
        let mut down = lock(&self.down_since);
        if let Some(since) = down.take() {
            log::warn!(
                "database reachable again after {:.1} s",
                since.elapsed().as_secs_f64()
            );
        }
    }
}

/// Counters of what the runner did.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) claimed: AtomicU64,
    pub(crate) empty_claims: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) retried: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) released: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) unhandled: AtomicU64,
    pub(crate) panicked: AtomicU64,
    /// Handlers abandoned past their timeout that have not returned yet.
    /// Each may hold a handler pool connection for good, so while there are
    /// any, handlers that find the pool empty open a connection of their own
    /// (see [`crate::JobContext::conn`]) instead of waiting for one that may
    /// never come back.
    pub(crate) abandoned_running: AtomicUsize,
}

/// A snapshot of a runner's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunnerStats {
    /// Jobs claimed.
    pub claimed: u64,
    /// Claims that found no due job.
    pub empty_claims: u64,
    /// Jobs completed (by the runner or by their handler's transaction).
    pub completed: u64,
    /// Failed attempts sent back to pending for a retry.
    pub retried: u64,
    /// Jobs that ended `failed` (attempts exhausted or permanent error).
    pub failed: u64,
    /// Jobs that ended `cancelled`.
    pub cancelled: u64,
    /// Claimed jobs handed back unstarted (shutdown).
    pub released: u64,
    /// Outcomes not written because the lease was lost meanwhile.
    pub lost: u64,
    /// Jobs set aside as unhandled: claimed from a queue this runner works,
    /// of a type it has no handler for.
    pub unhandled: u64,
    /// Handler panics caught.
    pub panicked: u64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> RunnerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RunnerStats {
            claimed: get(&self.claimed),
            empty_claims: get(&self.empty_claims),
            completed: get(&self.completed),
            retried: get(&self.retried),
            failed: get(&self.failed),
            cancelled: get(&self.cancelled),
            released: get(&self.released),
            lost: get(&self.lost),
            unhandled: get(&self.unhandled),
            panicked: get(&self.panicked),
        }
    }
}

/// Everything the runner's threads share.
pub(crate) struct Shared {
    pub(crate) config: RunnerConfig,
    pub(crate) registry: Registry,
    pub(crate) job_types: Vec<String>,
    pub(crate) inflight: InFlight,
    pub(crate) health: Health,
    pub(crate) counters: Counters,
    pub(crate) pool: HandlerPool,
    /// Shutdown has begun: claimed jobs not yet started are handed back.
    pub(crate) stopping: AtomicBool,
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
}

impl Shared {
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    pub(crate) fn wake_fetcher(&self) {
        let _ = self.wake.try_send(());
    }

    /// A job stops counting against the runner's capacity: its outcome was
    /// written, or its handler was abandoned. Counts once per job.
    pub(crate) fn finished(&self, state: &JobState) {
        self.inflight.remove(&state.lease);
        if !state.slot_freed.swap(true, Ordering::AcqRel) {
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

/// Exponential backoff for reconnect loops: 50 ms doubling to 2 s, jittered.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(2);

    pub(crate) fn new() -> Self {
        Backoff { next: Self::FIRST }
    }

    pub(crate) fn reset(&mut self) {
        self.next = Self::FIRST;
    }

    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next.mul_f64(0.75 + fastrand::f64() * 0.5);
        self.next = (self.next * 2).min(Self::MAX);
        delay
    }
}

/// Sleeps for `timeout` unless `stop` is closed first; true if it was.
/// (A stop channel is closed by dropping its sender: a broadcast to every
/// thread holding a receiver.)
pub(crate) fn stopped_within(stop: &crossbeam_channel::Receiver<()>, timeout: Duration) -> bool {
    matches!(
        stop.recv_timeout(timeout),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected) | Ok(())
    )
}

/// Whether `stop` is closed, without waiting.
pub(crate) fn is_stopped(stop: &crossbeam_channel::Receiver<()>) -> bool {
    matches!(
        stop.try_recv(),
        Err(crossbeam_channel::TryRecvError::Disconnected) | Ok(())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_with_jitter_and_resets() {
        let mut backoff = Backoff::new();
        let delays: Vec<Duration> = (0..10).map(|_| backoff.next_delay()).collect();
        let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
        assert!((37.5..=62.5).contains(&ms(&delays[0])), "{delays:?}");
        assert!((75.0..=125.0).contains(&ms(&delays[1])), "{delays:?}");
        for delay in &delays {
            assert!(ms(delay) <= 2500.0, "{delays:?}");
        }
        assert!(ms(&delays[9]) >= 1500.0, "capped at 2 s ± 25 %: {delays:?}");
        backoff.reset();
        assert!(ms(&backoff.next_delay()) <= 62.5);
    }
}
