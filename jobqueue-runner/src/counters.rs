//! Counters of what a runner did, and their public snapshot.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Defines [`Counters`], its snapshot [`RunnerStats`] and
/// [`Counters::snapshot`] from one list of counts, each a field of both.
macro_rules! counts {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Counters of what the runner did.
        #[derive(Debug, Default)]
        pub(crate) struct Counters {
            $(pub(crate) $name: AtomicU64,)*
            /// Handlers abandoned past their timeout that have not returned
            /// yet. Each may hold a handler pool connection for good, so
            /// while there are any, handlers that find the pool empty open a
            /// connection of their own (see [`crate::JobContext::conn`])
            /// instead of waiting for one that may never come back.
            pub(crate) abandoned_running: AtomicUsize,
        }

        /// A snapshot of a runner's counters.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct RunnerStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Counters {
            /// The counts now.
            pub(crate) fn snapshot(&self) -> RunnerStats {
                RunnerStats {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }
    };
}

counts! {
    /// Jobs claimed.
    claimed,
    /// Claims that found no due job.
    empty_claims,
    /// Claims that resumed in some queue after the last job taken there,
    /// because a long transaction held the xmin horizon (see the guide's
    /// runner chapter, `docs/src/runner.md`, "long transactions").
    resumed_claims,
    /// Claims sent while another of the runner's claims of a backlog was
    /// under way (two batches at once, on two connections).
    overlapped_claims,
    /// Early claims: of queues announced while the runner was busy, sent
    /// beside its claims of a backlog (see the guide's runner chapter).
    early_claims,
    /// Jobs completed (by the runner or by their handler's transaction).
    completed,
    /// Failed attempts sent back to pending for a retry.
    retried,
    /// Jobs that ended `failed` (attempts exhausted or permanent error).
    failed,
    /// Jobs that ended `cancelled`.
    cancelled,
    /// Jobs snoozed: sent back to wait without using up an attempt.
    snoozed,
    /// Claimed jobs handed back unstarted (shutdown, or a late start).
    released,
    /// Jobs of rate-limited queues handed back because no worker started
    /// them within their limit's margin of their claim (also counted as
    /// released).
    late_starts,
    /// Outcomes not written because the lease was lost meanwhile.
    lost,
    /// Jobs set aside as unhandled: claimed from a queue this runner works,
    /// of a type it has no handler for.
    unhandled,
    /// Handler panics caught.
    panicked,
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
}
