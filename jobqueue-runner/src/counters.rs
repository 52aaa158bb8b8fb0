//! Counters of what a runner did, and their public snapshot.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Counters of what the runner did.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) claimed: AtomicU64,
    pub(crate) empty_claims: AtomicU64,
    pub(crate) resumed_claims: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) retried: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) snoozed: AtomicU64,
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
#[non_exhaustive]
pub struct RunnerStats {
    /// Jobs claimed.
    pub claimed: u64,
    /// Claims that found no due job.
    pub empty_claims: u64,
    /// Claims that resumed in some queue after the last job taken there,
    /// because a long transaction held the xmin horizon (see the guide's
    /// runner chapter, `docs/src/runner.md`, "long transactions").
    pub resumed_claims: u64,
    /// Jobs completed (by the runner or by their handler's transaction).
    pub completed: u64,
    /// Failed attempts sent back to pending for a retry.
    pub retried: u64,
    /// Jobs that ended `failed` (attempts exhausted or permanent error).
    pub failed: u64,
    /// Jobs that ended `cancelled`.
    pub cancelled: u64,
    /// Jobs snoozed: sent back to wait without using up an attempt.
    pub snoozed: u64,
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
    /// The counter of jobs that ended so.
    pub(crate) fn of(&self, ended: crate::metrics::Outcome) -> &AtomicU64 {
        use crate::metrics::Outcome;
        match ended {
            Outcome::Completed => &self.completed,
            Outcome::Retried => &self.retried,
            Outcome::Failed => &self.failed,
            Outcome::Cancelled => &self.cancelled,
            Outcome::Snoozed => &self.snoozed,
            Outcome::LeaseLost => &self.lost,
            Outcome::Released => &self.released,
            Outcome::Unhandled => &self.unhandled,
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> RunnerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RunnerStats {
            claimed: get(&self.claimed),
            empty_claims: get(&self.empty_claims),
            resumed_claims: get(&self.resumed_claims),
            completed: get(&self.completed),
            retried: get(&self.retried),
            failed: get(&self.failed),
            cancelled: get(&self.cancelled),
            snoozed: get(&self.snoozed),
            released: get(&self.released),
            lost: get(&self.lost),
            unhandled: get(&self.unhandled),
            panicked: get(&self.panicked),
        }
    }
}
