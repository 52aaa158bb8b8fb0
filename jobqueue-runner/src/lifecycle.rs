//! Lifecycle handlers: the application's code called when a job fails for
//! good (a dead letter) or its handler panics.
//!
//! A job fails for good in one of two places, and its handlers run in the
//! transaction that fails it, before it commits:
//!
//! - the completer's write of a failed attempt that was the job's last
//!   (or that its handler said not to retry);
//! - the rescue of a job whose runner was lost during its last attempt.
//!
//! A runner killed before that commit fails nothing: the job's lease runs
//! out, and whichever runner rescues it fails it and calls the handlers in
//! its own transaction. So a job that failed for good had its handlers
//! called at least once, and a handler's writes through the connection it
//! is given commit with the failure or not at all: exactly once. A
//! handler's error or panic is logged and rolled back to before the
//! handler (a savepoint); the job's failure is written all the same.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use diesel::{Connection, PgConnection};
use jobqueue_core::engine::{FailOutcome, FailedMany, Failure, QueueSession, Rescued};
use jobqueue_core::{JobId, JobRow};

use crate::attempt::panic_message;

/// What an application runs when a job fails for good or its handler
/// panics; registered with [`Registry::lifecycle`]. Each method does
/// nothing unless implemented.
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

    /// `job`'s handler panicked, saying `message`; the attempt is retried
    /// (or failed for good) as any failed attempt. Called by the process
    /// whose worker caught the panic, right after, before the attempt's
    /// outcome is written: at most once (not at all if that process dies
    /// first).
    fn panicked(&self, job: &JobRow, message: &str) {
        let _ = (job, message);
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
        call_failed(conn, dead, handlers)?;
        Ok(done)
    })
}

/// Rescues up to `limit` stale jobs in one transaction in which every job
/// it fails for good is read and handed to `handlers`' [`Lifecycle::failed`].
pub(crate) fn rescue_stale(
    session: &mut QueueSession,
    limit: i64,
    handlers: &Handlers,
) -> jobqueue_core::Result<Rescued> {
    session.conn().transaction(|conn| {
        let rescued = jobqueue_core::engine::rescue_stale(conn, limit)?;
        call_failed(conn, rescued.failed.iter().copied(), handlers)?;
        Ok(rescued)
    })
}

/// Hands each of `dead` (read as it is now) to every handler, each call in
/// a savepoint of its own.
fn call_failed(
    conn: &mut PgConnection,
    dead: impl Iterator<Item = JobId>,
    handlers: &Handlers,
) -> jobqueue_core::Result<()> {
    for id in dead {
        let Some(job) = jobqueue_core::get_job(conn, id)?.found() else {
            continue;
        };
        for handler in handlers {
            let called = conn.transaction::<_, HandlerFailed, _>(|conn| {
                match catch_unwind(AssertUnwindSafe(|| handler.failed(&job, conn))) {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(error)) => Err(HandlerFailed::Said(error)),
                    Err(panic) => Err(HandlerFailed::Panicked(panic_message(panic.as_ref()))),
                }
            });
            match called {
                Ok(()) => {}
                Err(HandlerFailed::Database(e)) => return Err(e.into()),
                Err(failed) => log::error!(
                    "the lifecycle handler of failed job {} ({}) {failed}; \
                     the job is failed all the same",
                    job.id,
                    job.job_type
                ),
            }
        }
    }
    Ok(())
}

/// Tells `handlers` that `job`'s handler panicked, saying `message`; a
/// handler's own panic is logged.
pub(crate) fn call_panicked(handlers: &Handlers, job: &JobRow, message: &str) {
    for handler in handlers {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| handler.panicked(job, message))) {
            log::error!(
                "the lifecycle handler of job {} ({}), told of its handler's panic, panicked \
                 itself: {}",
                job.id,
                job.job_type,
                panic_message(panic.as_ref())
            );
        }
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
