//! One attempt of a job: its handler run with its context, a panic caught,
//! and what the handler returned turned into an outcome with the retry
//! decision. The path a runner's worker (`worker.rs`) and an inline run
//! (`inline.rs`) share.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use jobqueue_core::{JobRow, RetryPolicy};

use crate::context::JobContext;
use crate::job_error::JobError;
use crate::job_state::JobState;
use crate::middleware::{Middleware, Next};
use crate::panics::panic_message;
use crate::registry::{Handler, Registry};
use crate::trace::AttemptSpan;

/// What one attempt of a handler came to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Outcome {
    /// The handler returned `Ok(())`: the job is to be completed.
    Completed,
    /// The handler completed the job itself, with
    /// [`JobContext::complete_in_transaction`]: nothing is left to write.
    CompletedInTransaction,
    /// The attempt failed and may be retried: after `policy`'s delay
    /// while attempts remain, else the job fails for good. Also a panic
    /// (its message in `error`).
    Retried {
        /// What went wrong.
        error: String,
        /// The job type's backoff, or the runner's for a type that
        /// declares none.
        policy: RetryPolicy,
    },
    /// The handler said retrying cannot help ([`JobError::Fail`]):
    /// the job fails for good.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// The handler asked to run again after this long, without using up
    /// an attempt ([`JobError::Snooze`]).
    Snoozed(Duration),
    /// The called service is rate limiting ([`JobError::RateLimited`]): a
    /// snooze of this long, and the job's queue held back as long.
    RateLimited(Duration),
    /// The handler stopped on a cancel request ([`JobError::Cancelled`]).
    Cancelled,
    /// The handler found the job no longer held ([`JobError::LeaseLost`]):
    /// nothing is to be written.
    LeaseLost,
    /// No handler is registered for the job's type: the job is set aside
    /// as unhandled.
    Unhandled,
}

impl Outcome {
    /// The outcome as an attempt span records it: its name, and its error
    /// for a failure.
    fn traced(&self) -> (&'static str, Option<&str>) {
        match self {
            Outcome::Completed => ("completed", None),
            Outcome::CompletedInTransaction => ("completed_in_transaction", None),
            Outcome::Retried { error, .. } => ("retried", Some(error)),
            Outcome::Failed { error } => ("failed", Some(error)),
            Outcome::Snoozed(_) => ("snoozed", None),
            Outcome::RateLimited(_) => ("rate_limited", None),
            Outcome::Cancelled => ("cancelled", None),
            Outcome::LeaseLost => ("lease_lost", None),
            Outcome::Unhandled => ("unhandled", None),
        }
    }
}

/// An attempt's outcome, and whether its handler panicked.
pub(crate) struct Attempted {
    pub(crate) outcome: Outcome,
    pub(crate) panicked: bool,
}

/// Runs `handler` on `row`'s payload with `ctx`, inside `registry`'s
/// middleware (outermost first), catching a panic (which its lifecycle
/// handlers are told of), and says what became of the attempt; a failure worth retrying gets the type's
/// backoff, or `default_policy` for a type that declares none. With the
/// `tracing` feature the handler runs inside the attempt's span, which
/// records the outcome.
pub(crate) fn run(
    handler: &Handler,
    registry: &Registry,
    row: &JobRow,
    ctx: &mut JobContext<'_>,
    state: &JobState,
    default_policy: RetryPolicy,
) -> Attempted {
    let span = AttemptSpan::new(row);
    let attempted = attempt(
        handler,
        registry.stack(),
        row,
        ctx,
        state,
        default_policy,
        &span,
    );
    ended(registry, row, &span, &attempted);
    attempted
}

/// [`run`], inside `span`.
fn attempt(
    handler: &Handler,
    middleware: &[Arc<dyn Middleware>],
    row: &JobRow,
    ctx: &mut JobContext<'_>,
    state: &JobState,
    default_policy: RetryPolicy,
    span: &AttemptSpan,
) -> Attempted {
    let stack = Next::new(middleware, &handler.body, &row.payload);
    let result = span.in_scope(|| catch_unwind(AssertUnwindSafe(|| stack.run(ctx))));
    concluded(handler, row, state, default_policy, result)
}

/// What an attempt came to, from what its handler (and middleware)
/// returned or the panic that ended it: the path a thread's attempt and an
/// async task's share.
pub(crate) fn concluded(
    handler: &Handler,
    row: &JobRow,
    state: &JobState,
    default_policy: RetryPolicy,
    result: std::thread::Result<Result<(), JobError>>,
) -> Attempted {
    let policy = handler.retry.unwrap_or(default_policy);
    let outcome = match result {
        Ok(Ok(())) if state.handled.load(Ordering::Relaxed) => Outcome::CompletedInTransaction,
        Ok(Ok(())) => Outcome::Completed,
        Ok(Err(JobError::Retry(error))) => Outcome::Retried { error, policy },
        Ok(Err(JobError::Fail(error))) => Outcome::Failed { error },
        Ok(Err(JobError::Snooze(delay))) => Outcome::Snoozed(delay),
        Ok(Err(JobError::RateLimited(delay))) => Outcome::RateLimited(delay),
        Ok(Err(JobError::Cancelled)) => Outcome::Cancelled,
        Ok(Err(JobError::LeaseLost)) => Outcome::LeaseLost,
        Err(panic) => {
            let message = panic_message(panic.as_ref());
            let error = format!(
                "handler for job type `{}` panicked: {message}",
                row.job_type
            );
            return Attempted {
                outcome: Outcome::Retried { error, policy },
                panicked: true,
            };
        }
    };
    Attempted {
        outcome,
        panicked: false,
    }
}

/// Tells the lifecycle handlers of a panic, and records the outcome on the
/// attempt's span.
pub(crate) fn ended(registry: &Registry, row: &JobRow, span: &AttemptSpan, attempted: &Attempted) {
    if attempted.panicked
        && let Outcome::Retried { error, .. } = &attempted.outcome
    {
        crate::lifecycle::call_panicked(registry.lifecycle_handlers(), row, error);
    }
    span.ended(|| attempted.outcome.traced());
}
