//! One attempt of a job: its handler run with its context, a panic caught,
//! and what the handler returned turned into an outcome with the retry
//! decision. The path a runner's worker (`worker.rs`) and an inline run
//! (`inline.rs`) share. The application's middleware (`Middleware`,
//! `Next`), which wraps the handler in every attempt, is defined here too.

use crate::context::JobContext;
use crate::job_error::JobError;
use crate::job_state::JobState;
use crate::panics::panic_message;
use crate::registry::{Body, Handler, Registry};
use crate::trace::AttemptSpan;
use jobqueue_core::{JobRow, RetryPolicy};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

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

/// [`run`] for a job a runner holds (`row`, under `state`), with a
/// context on the runner's shared state.
pub(crate) fn run_held(
    shared: &crate::shared::Shared,
    handler: &Handler,
    row: &JobRow,
    state: &JobState,
) -> Attempted {
    let mut ctx = JobContext::new(shared, row, state);
    run(
        handler,
        &shared.registry,
        row,
        &mut ctx,
        state,
        shared.config.retry,
    )
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

// Work middleware: code an application wraps around every attempt (a
// tenant's database role set first, a request-scoped logger, an error
// report, a payload decrypted before its handler reads it).
//
// Where it sits in an attempt, outermost first:
//
// 1. the attempt's `tracing` span (the `tracing` feature), so what a
// middleware logs carries the job's trace;
// 2. the catch of a panic, which turns it into a retried outcome;
// 3. the registry's middleware, in the order it was registered (the first
// registered is the outermost);
// 4. the payload decoded into the job's type, then its handler.
//
// The outcome a middleware returns is the attempt's: the completer writes
// it, and the runner's metrics count it, after the whole stack has
// returned. Runners, the testing kit's `perform` and `drain`, and inline
// runs all run the same stack.

/// Code wrapped around every attempt of every job a [`Registry`] handles
/// (see [`Registry::middleware`]).
///
/// `around` sees the job through `ctx` (its id, type, queue, attempt, row
/// and payload), may act before its handler runs and after, and returns
/// the attempt's outcome: the one [`Next::run`] returned, or another (an
/// error turned into [`JobError::Fail`], say). Not calling `next` at all
/// skips the handler; the job's outcome is then whatever `around`
/// returns. To act on some job types or queues only, look at
/// [`JobContext::job_type`] or [`JobContext::queue`] and call `next`
/// straight away for the others.
///
/// A panic in the handler unwinds through `around`: use a guard's `Drop`
/// (or catch it) to act on it. A middleware that panics fails its
/// attempt as a handler's panic does, and is retried the same way.
///
/// ```
/// use std::time::Instant;
/// use jobqueue_runner::{JobContext, JobError, Middleware, Next, Registry};
///
/// /// Logs each attempt's outcome and how long it took.
/// struct Timing;
///
/// impl Middleware for Timing {
///     fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError> {
///         let started = Instant::now();
///         let outcome = next.run(ctx);
///         log::info!(
///             "{} {} took {:?}: {}",
///             ctx.job_type(),
///             ctx.job_id(),
///             started.elapsed(),
///             if outcome.is_ok() { "ok" } else { "error" }
///         );
///         outcome
///     }
/// }
///
/// let registry = Registry::new().middleware(Timing);
/// ```
///
/// [`Registry`]: crate::Registry
/// [`Registry::middleware`]: crate::Registry::middleware
pub trait Middleware: Send + Sync + 'static {
    /// Runs around one attempt: call `next.run(ctx)` (or
    /// [`Next::run_with_payload`]) to run the rest of the stack and the
    /// handler, and return the attempt's outcome.
    fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError>;
}

/// The rest of an attempt, inside a middleware: the middleware registered
/// after it, then the handler.
pub struct Next<'a> {
    rest: &'a [Arc<dyn Middleware>],
    handler: &'a Body,
    payload: &'a serde_json::Value,
}

impl std::fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next")
            .field("middleware_left", &self.rest.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Next<'a> {
    /// The stack `middleware` around `handler`, on `payload`.
    pub(crate) fn new(
        middleware: &'a [Arc<dyn Middleware>],
        handler: &'a Body,
        payload: &'a serde_json::Value,
    ) -> Self {
        Next {
            rest: middleware,
            handler,
            payload,
        }
    }

    /// The payload the handler will decode: the job's as stored, or what
    /// an outer middleware gave [`Next::run_with_payload`].
    pub fn payload(&self) -> &serde_json::Value {
        self.payload
    }

    /// Runs the rest of the stack and the handler; returns their outcome.
    pub fn run(self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        match self.rest.split_first() {
            Some((first, rest)) => first.around(
                ctx,
                Next {
                    rest,
                    handler: self.handler,
                    payload: self.payload,
                },
            ),
            None => match self.handler {
                Body::Thread(run) => run(self.payload, ctx),
                #[cfg(feature = "async")]
                Body::Async(run) => crate::async_drive::block_on(&**run, self.payload, ctx),
            },
        }
    }

    /// Runs the rest of the stack and the handler on `payload` instead of
    /// the job's stored payload (one whose field an enqueue hook encrypted,
    /// decrypted here). The stored row is not changed: a retry starts
    /// again from the stored payload.
    pub fn run_with_payload(
        self,
        payload: &serde_json::Value,
        ctx: &mut JobContext<'_>,
    ) -> Result<(), JobError> {
        Next {
            rest: self.rest,
            handler: self.handler,
            payload,
        }
        .run(ctx)
    }
}
