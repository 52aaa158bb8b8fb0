//! Work middleware: code an application wraps around every attempt (a
//! tenant's database role set first, a request-scoped logger, an error
//! report, a payload decrypted before its handler reads it).
//!
//! Where it sits in an attempt, outermost first:
//!
//! 1. the attempt's `tracing` span (the `tracing` feature), so what a
//!    middleware logs carries the job's trace;
//! 2. the catch of a panic, which turns it into a retried outcome;
//! 3. the registry's middleware, in the order it was registered (the first
//!    registered is the outermost);
//! 4. the payload decoded into the job's type, then its handler.
//!
//! The outcome a middleware returns is the attempt's: the completer writes
//! it, and the runner's metrics count it, after the whole stack has
//! returned. Runners, the testing kit's `perform` and `drain`, and inline
//! runs all run the same stack.

use std::sync::Arc;

use crate::context::JobContext;
use crate::job_error::JobError;
use crate::registry::Body;

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
