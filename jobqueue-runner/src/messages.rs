//! The messages between the runner's threads: claimed jobs on their way to
//! a worker, and what became of each one on its way to the completer.

use std::sync::Arc;

use jobqueue_core::engine::Lease;
use jobqueue_core::{JobRow, RetryPolicy};

use crate::job_state::JobState;

/// A claimed job on its way to a worker.
pub(crate) struct Claimed {
    pub(crate) row: JobRow,
    pub(crate) state: Arc<JobState>,
}

/// What became of one claimed job, to be written by the completer.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) state: Arc<JobState>,
    pub(crate) kind: OutcomeKind,
}

impl Outcome {
    pub(crate) fn new(state: &Arc<JobState>, kind: OutcomeKind) -> Self {
        Outcome {
            state: Arc::clone(state),
            kind,
        }
    }

    pub(crate) fn lease(&self) -> Lease {
        self.state.lease
    }
}

#[derive(Debug)]
pub(crate) enum OutcomeKind {
    /// The handler succeeded: complete the job.
    Complete,
    /// The handler completed the job in its own transaction: nothing to write.
    Handled,
    /// The attempt failed: retried after the policy's backoff while
    /// attempts remain, or, without a policy, failed for good.
    Fail {
        error: String,
        retry: Option<RetryPolicy>,
    },
    /// The handler asked to run again after this long (no attempt used).
    Snooze(std::time::Duration),
    /// A snooze of this long that also holds the job's queue back as long.
    RateLimited(std::time::Duration),
    /// The handler stopped on a cancel request.
    Cancelled,
    /// Claimed but never started (shutdown, shedding): hand it back.
    Release,
    /// Claimed from a queue this runner works, but of a type it has no
    /// handler for: set it aside as unhandled.
    Park,
    /// The lease was lost while the handler ran: nothing to write.
    Lost,
}

impl From<crate::attempt::Outcome> for OutcomeKind {
    /// What the completer writes for an attempt's outcome.
    fn from(outcome: crate::attempt::Outcome) -> Self {
        use crate::attempt::Outcome;
        match outcome {
            Outcome::Completed => OutcomeKind::Complete,
            Outcome::CompletedInTransaction => OutcomeKind::Handled,
            Outcome::Retried { error, policy } => OutcomeKind::Fail {
                error,
                retry: Some(policy),
            },
            Outcome::Failed { error } => OutcomeKind::Fail { error, retry: None },
            Outcome::Snoozed(delay) => OutcomeKind::Snooze(delay),
            Outcome::RateLimited(delay) => OutcomeKind::RateLimited(delay),
            Outcome::Cancelled => OutcomeKind::Cancelled,
            Outcome::LeaseLost => OutcomeKind::Lost,
            Outcome::Unhandled => OutcomeKind::Park,
        }
    }
}
