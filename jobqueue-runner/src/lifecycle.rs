//! Lifecycle handlers: the application's code called when a job fails for
//! good (a dead letter), is cancelled by a runner, panics or runs past
//! its timeout.
//!
//! A runner fails a job for good, or cancels one it holds, in one of two
//! places, and the handlers run in the transaction that writes it, before
//! it commits:
//!
//! - the completer's write of the attempt's outcome (a failed last
//!   attempt, one its handler said not to retry, a handler that stopped on
//!   a cancel request);
//! - the rescue of a job whose runner was lost (during its last attempt,
//!   or with a cancel request).
//!
//! A runner killed before that commit has written nothing: the job's lease
//! runs out, and whichever runner rescues it fails or cancels it and calls
//! the handlers in its own transaction. So each such job had its handlers
//! called at least once, and a handler's writes through the connection it
//! is given commit with the job's end or not at all: exactly once. A
//! handler's error or panic is logged and rolled back to before the
//! handler (a savepoint); the job's end is written all the same.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use diesel::{Connection, PgConnection};
use jobqueue_core::engine::{
    FailOutcome, FailedMany, Failure, Fenced, Lease, QueueSession, Rescued,
};
use jobqueue_core::{JobId, JobRow};

use crate::panics::panic_message;

/// What an application runs when a job fails for good, is cancelled by a
/// runner, panics or runs past its timeout; registered with
/// [`Registry::lifecycle`]. Each method does nothing unless implemented.
///
/// ```
/// use diesel::PgConnection;
/// use jobqueue_core::JobRow;
/// use jobqueue_runner::{Lifecycle, Registry};
///
/// /// Records each dead letter in the application's own table.
/// struct DeadLetters;
///
/// impl Lifecycle for DeadLetters {
///     fn failed(&self, job: &JobRow, conn: &mut PgConnection) -> Result<(), String> {
///         use diesel::RunQueryDsl;
///         use diesel::sql_types::{Text, Uuid};
///         diesel::sql_query("INSERT INTO dead_letters (job_id, error) VALUES ($1, $2)")
///             .bind::<Uuid, _>(job.id)
///             .bind::<Text, _>(job.last_error.clone().unwrap_or_default())
///             .execute(conn)
///             .map(drop)
///             .map_err(|e| e.to_string())
///     }
/// }
///
/// let registry = Registry::new().lifecycle(DeadLetters);
/// ```
///
/// [`Registry::lifecycle`]: crate::Registry::lifecycle
pub trait Lifecycle: Send + Sync + 'static {
    /// `job` failed for good: its last attempt failed, its handler said
    /// not to retry, or the runner of its last attempt was lost. `job` is
    /// its row as failed (`last_error` says why); `conn` is the
    /// transaction that fails it, not yet committed: what the handler
    /// writes through it commits with the failure. Called at least once
    /// for each such job (see the module's documentation); an `Err` is
    /// logged, and rolls back only what this call wrote.
    fn failed(&self, job: &JobRow, conn: &mut PgConnection) -> Result<(), String> {
        let _ = (job, conn);
        Ok(())
    }

    /// A runner cancelled `job`, which it held: its handler stopped on a
    /// cancel request, or the runner of a job with a cancel request was
    /// lost. Called as [`Lifecycle::failed`] is: in the transaction that
    /// cancels it, at least once, its writes through `conn` exactly once.
    /// A job cancelled while it waited is cancelled by the application's
    /// own call (`jobqueue::cancel`), which knows; no runner is told.
    fn cancelled(&self, job: &JobRow, conn: &mut PgConnection) -> Result<(), String> {
        let _ = (job, conn);
        Ok(())
    }

    /// `job`'s handler panicked; `error` is the attempt's error, which
    /// quotes the panic's message. The attempt is retried (or failed for
    /// good) as any failed attempt. Called by the process whose worker
    /// caught the panic, right after, before the attempt's outcome is
    /// written: at most once (not at all if that process dies first).
    fn panicked(&self, job: &JobRow, error: &str) {
        let _ = (job, error);
    }

    /// The handler of job `job_id` (of type `job_type`) has run past its
    /// timeout: it is asked to stop, and a lease after the timeout its
    /// lease is no longer renewed, so it is rescued. Called once, by the
    /// runner running it, on the thread that renews its jobs' leases: keep
    /// it short (hand slow work to a job of its own).
    fn timed_out(&self, job_id: JobId, job_type: &str) {
        let _ = (job_id, job_type);
    }
}

/// The registry's lifecycle handlers, in the order registered.
pub(crate) type Handlers = [Arc<dyn Lifecycle>];

/// Writes `failures` in one transaction in which every job they fail for
/// good is read and handed to `handlers`' [`Lifecycle::failed`].
pub(crate) fn fail_many(
    session: &mut QueueSession,
    failures: &[Failure],
    handlers: &Handlers,
) -> jobqueue_core::Result<FailedMany> {
    session.conn().transaction(|conn| {
        let done = jobqueue_core::engine::fail_many(conn, failures)?;
        let dead = done
            .outcomes
            .iter()
            .filter(|(_, outcome)| matches!(outcome, FailOutcome::Failed))
            .map(|(id, _)| *id);
        call_each(conn, dead, handlers, Ending::Failed)?;
        Ok(done)
    })
}

/// Cancels the jobs held under `leases` in one transaction in which every
/// job it cancels is read and handed to `handlers`'
/// [`Lifecycle::cancelled`].
pub(crate) fn cancel_held_many(
    session: &mut QueueSession,
    leases: &[Lease],
    handlers: &Handlers,
) -> jobqueue_core::Result<Fenced> {
    session.conn().transaction(|conn| {
        let done = jobqueue_core::engine::cancel_held_many(conn, leases)?;
        call_each(
            conn,
            done.applied.iter().copied(),
            handlers,
            Ending::Cancelled,
        )?;
        Ok(done)
    })
}

/// Rescues up to `limit` stale jobs in one transaction in which every job
/// it fails for good, or cancels, is read and handed to `handlers`'
/// [`Lifecycle::failed`] or [`Lifecycle::cancelled`].
pub(crate) fn rescue_stale(
    session: &mut QueueSession,
    limit: i64,
    handlers: &Handlers,
) -> jobqueue_core::Result<Rescued> {
    session.conn().transaction(|conn| {
        let rescued = jobqueue_core::engine::rescue_stale(conn, limit)?;
        call_each(
            conn,
            rescued.failed.iter().copied(),
            handlers,
            Ending::Failed,
        )?;
        call_each(
            conn,
            rescued.cancelled.iter().copied(),
            handlers,
            Ending::Cancelled,
        )?;
        Ok(rescued)
    })
}

/// Tells `handlers` of job `id` if the write just made on `conn` failed it
/// for good or cancelled it (as its row now says), as a runner's completer
/// does, in the transaction `conn` is in.
pub(crate) fn tell_ended(
    conn: &mut PgConnection,
    id: JobId,
    handlers: &Handlers,
) -> jobqueue_core::Result<()> {
    if handlers.is_empty() {
        return Ok(());
    }
    let Some(job) = jobqueue_core::get_job(conn, id)?.found() else {
        return Ok(());
    };
    let ending = match job.status {
        jobqueue_core::JobStatus::Failed => Ending::Failed,
        jobqueue_core::JobStatus::Cancelled => Ending::Cancelled,
        _ => return Ok(()),
    };
    call(conn, &job, handlers, ending)
}

/// How a job a lifecycle handler is told of ended.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Failed,
    Cancelled,
}

impl Ending {
    /// Calls the method of `handler` for this ending.
    fn call(
        self,
        handler: &dyn Lifecycle,
        job: &JobRow,
        conn: &mut PgConnection,
    ) -> Result<(), String> {
        match self {
            Ending::Failed => handler.failed(job, conn),
            Ending::Cancelled => handler.cancelled(job, conn),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Ending::Failed => "failed",
            Ending::Cancelled => "cancelled",
        }
    }
}

/// Hands each of `ended` (read as it is now) to every handler.
fn call_each(
    conn: &mut PgConnection,
    ended: impl Iterator<Item = JobId>,
    handlers: &Handlers,
    ending: Ending,
) -> jobqueue_core::Result<()> {
    for id in ended {
        if let Some(job) = jobqueue_core::get_job(conn, id)?.found() {
            call(conn, &job, handlers, ending)?;
        }
    }
    Ok(())
}

/// Hands `job` to every handler, each call in a savepoint of its own.
fn call(
    conn: &mut PgConnection,
    job: &JobRow,
    handlers: &Handlers,
    ending: Ending,
) -> jobqueue_core::Result<()> {
    for handler in handlers {
        let called = conn.transaction::<_, HandlerFailed, _>(|conn| {
            match catch_unwind(AssertUnwindSafe(|| ending.call(&**handler, job, conn))) {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(HandlerFailed::Said(error)),
                Err(panic) => Err(HandlerFailed::Panicked(panic_message(panic.as_ref()))),
            }
        });
        match called {
            Ok(()) => {}
            Err(HandlerFailed::Database(e)) => return Err(e.into()),
            Err(failed) => log::error!(
                "the lifecycle handler of {} job {} ({}) {failed}; \
                 the job is {} all the same",
                ending.name(),
                job.id,
                job.job_type,
                ending.name()
            ),
        }
    }
    Ok(())
}

/// Tells `handlers` that `job`'s handler panicked (`error`, the
/// attempt's); a handler's own panic is logged.
pub(crate) fn call_panicked(handlers: &Handlers, job: &JobRow, error: &str) {
    for handler in handlers {
        told(job.id, &job.job_type, "of its handler's panic", || {
            handler.panicked(job, error)
        });
    }
}

/// Tells `handlers` that job `job_id` (of type `job_type`) ran past its
/// timeout; a handler's own panic is logged.
pub(crate) fn call_timed_out(handlers: &Handlers, job_id: JobId, job_type: &str) {
    for handler in handlers {
        told(job_id, job_type, "that it ran past its timeout", || {
            handler.timed_out(job_id, job_type)
        });
    }
}

/// Runs `tell`, logging its panic.
fn told(job_id: JobId, job_type: &str, of_what: &str, tell: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(tell)) {
        log::error!(
            "the lifecycle handler of job {job_id} ({job_type}), told {of_what}, panicked: {}",
            panic_message(panic.as_ref())
        );
    }
}

/// Why a call of [`Lifecycle::failed`] was rolled back.
enum HandlerFailed {
    /// It returned an error.
    Said(String),
    /// It panicked.
    Panicked(String),
    /// The savepoint itself failed: the transaction is lost.
    Database(diesel::result::Error),
}

impl From<diesel::result::Error> for HandlerFailed {
    fn from(e: diesel::result::Error) -> Self {
        HandlerFailed::Database(e)
    }
}

impl std::fmt::Display for HandlerFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandlerFailed::Said(error) => write!(f, "returned an error (rolled back): {error}"),
            HandlerFailed::Panicked(message) => write!(f, "panicked (rolled back): {message}"),
            HandlerFailed::Database(e) => write!(f, "could not run: {e}"),
        }
    }
}
