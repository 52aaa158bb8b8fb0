//! The runner's room: the jobs it holds against its capacity, those held
//! from early claims, and its own per-queue limits.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::queue_limits::QueueLimits;
use crate::RunnerConfig;
use crate::job_state::JobState;

/// Jobs claimed and not yet finished, counted as the claimer delivers them
/// and as they finish.
pub(super) struct Room {
    /// Jobs claimed and not yet finished: held by a worker, waiting for
    /// one, or finished with the outcome not yet written. The fetcher claims
    /// only while this is below its capacity.
    outstanding: AtomicUsize,
    /// A finishing job wakes the fetcher when `outstanding` drops to this
    /// (the fetcher sets it before it waits for room; 0 when it waits for
    /// new jobs instead, which finishing jobs cannot bring).
    wake_below: AtomicUsize,
    /// Jobs held from early claims (at most `RunnerConfig::early_reserve`).
    early_held: AtomicUsize,
    /// This runner's own per-queue concurrency.
    queues: QueueLimits,
}

impl Room {
    pub(super) fn new(config: &RunnerConfig) -> Self {
        Room {
            outstanding: AtomicUsize::new(0),
            wake_below: AtomicUsize::new(0),
            early_held: AtomicUsize::new(0),
            queues: QueueLimits::new(config),
        }
    }

    /// Jobs claimed and not yet finished.
    pub(super) fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Acquire)
    }

    /// Jobs held from early claims.
    pub(super) fn early_held(&self) -> usize {
        self.early_held.load(Ordering::Acquire)
    }

    /// `got` jobs were claimed (`early`: by an early claim).
    pub(super) fn took(&self, got: usize, early: bool) {
        self.outstanding.fetch_add(got, Ordering::AcqRel);
        if early {
            self.early_held.fetch_add(got, Ordering::AcqRel);
        }
    }

    /// The slot of `queue`'s own limit, if it has one, with a job of it
    /// counted against it.
    pub(super) fn take_queue_slot(&self, queue: &str) -> Option<usize> {
        let slot = self.queues.slot(queue)?;
        self.queues.took(slot);
        Some(slot)
    }

    /// How many more jobs of each limited queue this runner may take now.
    pub(super) fn queue_room(&self) -> Vec<(String, i64)> {
        self.queues.room()
    }

    /// The fetcher waits for room: a finishing job wakes it once
    /// `outstanding` drops to `below`.
    pub(super) fn wake_below(&self, below: usize) {
        self.wake_below.store(below, Ordering::Release);
    }

    /// The fetcher waits for new jobs, which finishing ones cannot bring.
    pub(super) fn ran_dry(&self) {
        self.wake_below.store(0, Ordering::Release);
    }

    /// `state`'s job no longer counts (the caller saw its slot freed for the
    /// first time); true if that made room the fetcher waits for: its
    /// queue was at this runner's limit for it, or the jobs held dropped to
    /// where the fetcher asked to be woken. Not once per job.
    pub(super) fn freed(&self, state: &JobState) -> bool {
        if state.early {
            self.early_held.fetch_sub(1, Ordering::AcqRel);
        }
        let queue_was_full = state.queue_slot.is_some_and(|slot| self.queues.freed(slot));
        let left = self
            .outstanding
            .fetch_sub(1, Ordering::AcqRel)
            .saturating_sub(1);
        queue_was_full || left <= self.wake_below.load(Ordering::Acquire)
    }
}
