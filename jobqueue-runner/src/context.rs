//! What a handler sees of its job and the runner while it works.

use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use diesel::PgConnection;
use diesel::connection::{AnsiTransactionManager, TransactionManager};
use diesel::r2d2::PooledConnection;
use jobqueue_core::{JobId, JobRow};

use crate::hang_guard::Guarded;
use crate::inline_host::{InlineHost, Report};
use crate::job_error::JobError;
use crate::job_state::JobState;
use crate::shared::Shared;

/// The running job's context: its identity, progress reporting, the flags
/// that ask it to stop, and a database connection.
pub struct JobContext<'a> {
    host: Host<'a>,
    row: &'a JobRow,
    state: &'a JobState,
    /// The durable steps this attempt has come to ([`JobContext::step`]).
    pub(crate) steps_taken: usize,
    /// The durable cursor as this attempt last advanced it, else as the
    /// row recorded it ([`JobContext::cursor`]).
    pub(crate) cursor: Option<serde_json::Value>,
}

/// Where the job is worked, and what that gives its handler.
enum Host<'a> {
    /// A runner's worker thread: the runner's shared state, and the
    /// handler's connection once it asked for one.
    Runner {
        shared: &'a Shared,
        conn: Option<HandlerConn>,
    },
    /// Its caller's own thread (see `inline.rs`).
    Inline(InlineHost<'a>),
}

/// A handler's database connection: from the runner's handler pool, or one
/// of its own when abandoned handlers hold pool connections and none is idle.
enum HandlerConn {
    Pooled(PooledConnection<crate::connector::HandlerConnections>),
    Own(Guarded<PgConnection>),
}

impl HandlerConn {
    fn get(&mut self) -> &mut PgConnection {
        match self {
            HandlerConn::Pooled(conn) => conn.conn(),
            HandlerConn::Own(conn) => conn.conn(),
        }
    }
}

impl Drop for JobContext<'_> {
    fn drop(&mut self) {
        // An abandoned handler that returns at last gives its connection back.
        if let Host::Runner { shared, .. } = &self.host
            && self.state.abandoned.load(Ordering::Acquire)
        {
            let _ = shared.counters.abandoned_running.fetch_update(
                Ordering::AcqRel,
                Ordering::Acquire,
                |n| n.checked_sub(1),
            );
        }
    }
}

impl std::fmt::Debug for JobContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext")
            .field("job_id", &self.row.id)
            .field("job_type", &self.row.job_type)
            .field("attempt", &self.row.attempts)
            .finish()
    }
}

impl<'a> JobContext<'a> {
    pub(crate) fn new(shared: &'a Shared, row: &'a JobRow, state: &'a JobState) -> Self {
        JobContext {
            host: Host::Runner { shared, conn: None },
            row,
            state,
            steps_taken: 0,
            cursor: row.step_cursor.clone(),
        }
    }

    /// The context of a job worked inline, on its caller's thread.
    pub(crate) fn inline(host: InlineHost<'a>, row: &'a JobRow, state: &'a JobState) -> Self {
        JobContext {
            host: Host::Inline(host),
            row,
            state,
            steps_taken: 0,
            cursor: row.step_cursor.clone(),
        }
    }

    /// The progress reports the handler made, in order, if the job is
    /// worked inline (a runner keeps only the latest, in its job state).
    pub(crate) fn take_reports(&mut self) -> Vec<Report> {
        match &mut self.host {
            Host::Runner { .. } => Vec::new(),
            Host::Inline(host) => std::mem::take(&mut host.reports),
        }
    }

    /// Whether durable steps and cursors are recorded on a stored row:
    /// always on a runner, and inline only for a job read from the
    /// database (the testing kit's `perform` works one that is not).
    pub(crate) fn records_durably(&self) -> bool {
        match &self.host {
            Host::Runner { .. } => true,
            Host::Inline(host) => host.stored,
        }
    }

    /// The handlers and application state of the runner (or the inline
    /// caller) working the job.
    #[cfg(feature = "async")]
    pub(crate) fn registry(&self) -> &'a crate::Registry {
        match &self.host {
            Host::Runner { shared, .. } => {
                let shared: &'a Shared = shared;
                &shared.registry
            }
            Host::Inline(host) => host.registry,
        }
    }

    /// The attempt's lease, and the state shared with the runner.
    pub(crate) fn job_state(&self) -> &'a JobState {
        self.state
    }

    /// The job's id.
    pub fn job_id(&self) -> JobId {
        self.row.id
    }

    /// The job's type.
    pub fn job_type(&self) -> &str {
        &self.row.job_type
    }

    /// The job's queue.
    pub fn queue(&self) -> &str {
        &self.row.queue
    }

    /// This attempt's number, 1 for the first.
    pub fn attempt(&self) -> i32 {
        self.row.attempts
    }

    /// Attempts allowed in all.
    pub fn max_attempts(&self) -> i32 {
        self.row.max_attempts
    }

    /// When the job was enqueued (database clock).
    pub fn enqueued_at(&self) -> DateTime<Utc> {
        self.row.created_at
    }

    /// When the job became due (database clock).
    pub fn due_at(&self) -> DateTime<Utc> {
        self.row.run_at
    }

    /// The whole row as claimed.
    pub fn row(&self) -> &JobRow {
        self.row
    }

    /// Whether someone asked to cancel this job; the handler should stop and
    /// return [`JobError::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        self.state.cancel.load(Ordering::Relaxed)
    }

    /// Whether the runner is shutting down; a long handler should wrap up
    /// within the shutdown grace period.
    pub fn is_shutting_down(&self) -> bool {
        match &self.host {
            Host::Runner { shared, .. } => shared.is_stopping(),
            Host::Inline(host) => host.shutting_down,
        }
    }

    /// Whether this attempt ran past its timeout.
    pub fn is_timed_out(&self) -> bool {
        self.state.timed_out.load(Ordering::Relaxed)
    }

    /// Whether the runner lost this job (lease expired, job recovered):
    /// nothing more the handler reports will count.
    pub fn is_lease_lost(&self) -> bool {
        self.state.lost.load(Ordering::Relaxed)
    }

    /// Any reason to stop: cancelled, shutting down, timed out or lease lost.
    pub fn should_stop(&self) -> bool {
        self.is_cancelled()
            || self.is_shutting_down()
            || self.is_timed_out()
            || self.is_lease_lost()
    }

    /// The application state of type `S` given to the runner's registry
    /// with [`Registry::state`](crate::Registry::state), shared by every
    /// handler. Without one, the attempt fails with a retry whose error says
    /// how to give it (a runner deployed without it leaves the job to one
    /// that has it, or to a fixed deploy).
    pub fn state<S: Send + Sync + 'static>(&self) -> Result<std::sync::Arc<S>, JobError> {
        let registry = match &self.host {
            Host::Runner { shared, .. } => &shared.registry,
            Host::Inline(host) => host.registry,
        };
        registry.get_state::<S>().ok_or_else(|| {
            JobError::Retry(format!(
                "this runner has no application state of type `{}`: give it with \
                 `Registry::state(value)` (or `Cli::state(value)`)",
                std::any::type_name::<S>()
            ))
        })
    }

    /// The workflow this job is a step of, if any (see
    /// [`jobqueue_core::Workflow`]).
    pub fn workflow_id(&self) -> Option<JobId> {
        self.row.workflow_id
    }

    /// Records `value` as this job's result, written with its completion
    /// (a later call replaces an earlier one; an attempt that does not
    /// complete records nothing). A step of a workflow keeps it with the
    /// workflow's steps, for the steps after it to read
    /// ([`parent_result`](Self::parent_result)); any other job keeps it for
    /// its enqueuer ([`jobqueue_core::result`],
    /// [`jobqueue_core::wait_result`]) for the runner's
    /// `retention.results` (a day unless set). A value whose JSON is larger
    /// than [`MAX_RESULT_BYTES`](jobqueue_core::engine::MAX_RESULT_BYTES)
    /// fails the attempt for good, as does one that does not serialize.
    pub fn set_result<T: serde::Serialize + ?Sized>(&self, value: &T) -> Result<(), JobError> {
        let json = serde_json::to_string(value)
            .map_err(|e| JobError::fail(format!("the job's result does not serialize: {e}")))?;
        jobqueue_core::engine::check_result(&json).map_err(JobError::fail)?;
        *crate::sync::lock(&self.state.result) = Some(json);
        Ok(())
    }

    /// The results of the steps this step comes after, by step name in
    /// name order (`None` for one that recorded none); read from the
    /// database on the handler's connection. Empty outside a workflow.
    pub fn parent_results(&mut self) -> Result<Vec<(String, Option<serde_json::Value>)>, JobError> {
        if let Host::Inline(InlineHost {
            parents: Some(parents),
            ..
        }) = &self.host
        {
            return Ok(parents.clone());
        }
        if self.row.workflow_id.is_none() {
            return Ok(Vec::new());
        }
        let id = self.row.id;
        let conn = self.conn()?;
        jobqueue_core::engine::parent_results(conn, id).map_err(JobError::retry)
    }

    /// The result of the parent step named `step`, decoded as `T`; `None`
    /// if it recorded none. A name that is not one of this step's parents,
    /// or a result that does not decode as `T`, fails the attempt for good
    /// (retrying would read the same).
    pub fn parent_result<T: serde::de::DeserializeOwned>(
        &mut self,
        step: &str,
    ) -> Result<Option<T>, JobError> {
        let results = self.parent_results()?;
        let Some((_, value)) = results.iter().find(|(name, _)| name == step) else {
            let names: Vec<&str> = results.iter().map(|(name, _)| name.as_str()).collect();
            return Err(JobError::fail(format!(
                "no parent step is named `{step}`; this step comes after [{}]",
                names.join(", ")
            )));
        };
        value
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| {
                JobError::fail(format!(
                    "the result of step `{step}` does not decode as `{}`: {e}",
                    std::any::type_name::<T>()
                ))
            })
    }

    /// Records progress: `percent` done (capped at 100) and the current
    /// stage.
    ///
    /// A note in memory, not a statement: the runner writes the latest
    /// report with the job's next heartbeat (so it shows in `jobqueue
    /// show` and the dashboard at most one heartbeat interval later, 10 s
    /// with the default 30 s lease), or with the job's outcome if that
    /// comes first. Call it as often as is useful: a thousand reports cost
    /// what one does, and a database outage does not reach the handler.
    ///
    /// Returns `Err(JobError::LeaseLost)` only when the runner already knows
    /// the job is lost (a heartbeat found it recovered by another runner):
    /// nothing the handler does will count, and `?` stops it. It keeps a
    /// `Result` for that, and so that handlers written as
    /// `ctx.progress(..)?` stay as they are.
    pub fn progress(&mut self, percent: u8, stage: &str) -> Result<(), JobError> {
        self.state.progress.note(Some(percent), Some(stage), 0);
        self.record(Some(percent), Some(stage), 0);
        self.still_held()
    }

    /// Adds `count` to the job's event counter: noted in memory and written
    /// like [`progress`](Self::progress), whose return it shares.
    pub fn events(&mut self, count: u32) -> Result<(), JobError> {
        self.state.progress.note(None, None, count);
        self.record(None, None, count);
        self.still_held()
    }

    /// Keeps a report of a job worked inline, for its caller.
    fn record(&mut self, percent: Option<u8>, stage: Option<&str>, events: u32) {
        if let Host::Inline(host) = &mut self.host {
            host.reports.push(Report {
                percent,
                stage: stage.map(str::to_owned),
                events,
            });
        }
    }

    /// `Err(JobError::LeaseLost)` if a heartbeat found the job lost.
    fn still_held(&self) -> Result<(), JobError> {
        if self.is_lease_lost() {
            Err(JobError::LeaseLost)
        } else {
            Ok(())
        }
    }

    /// A database connection for the handler's own work, from the runner's
    /// handler pool. Writes made on it outside
    /// [`complete_in_transaction`](Self::complete_in_transaction) commit on
    /// their own: at-least-once, like the job.
    ///
    /// Handlers abandoned past their timeout keep their pool connections
    /// until they return, if ever; while there are any, a handler that finds
    /// the pool empty opens a connection of its own (closed when it returns)
    /// instead of waiting for one.
    ///
    /// A job worked inline (the testing kit's drain) has its caller's
    /// connection instead, or none (`JobError::Retry` saying so).
    pub fn conn(&mut self) -> Result<&mut PgConnection, JobError> {
        match &mut self.host {
            Host::Runner { shared, conn } => runner_conn(shared, conn),
            Host::Inline(host) => host.conn.as_deref_mut().ok_or_else(|| {
                JobError::retry(
                    "no database connection: this job is worked inline without one \
                     (give the handler a connection to reach one)",
                )
            }),
        }
    }

    /// Runs `work` and completes the job in ONE transaction (READ
    /// COMMITTED): the handler's database writes and the completion commit
    /// together or not at all, so they happen exactly once.
    ///
    /// If the runner no longer holds the job (its lease expired and it was
    /// recovered), the transaction rolls back and this returns
    /// [`JobError::LeaseLost`]. On success the handler should return `Ok(())`.
    /// Progress that no heartbeat wrote yet is written in the same
    /// transaction, when the completion keeps the row.
    ///
    /// On a connection already inside a transaction (a job worked inline
    /// on a test's connection), the transaction is a savepoint of that
    /// one; a job worked inline that is not stored has `work` run there
    /// and no row to complete.
    pub fn complete_in_transaction<T>(
        &mut self,
        work: impl FnOnce(&mut PgConnection) -> Result<T, JobError>,
    ) -> Result<T, JobError> {
        let state = self.state;
        let lease = state.lease;
        let (deletes, completes) = match &self.host {
            Host::Runner { shared, .. } => (shared.config.retention.deletes_completed(), true),
            Host::Inline(host) => (host.deletes_completed, host.stored),
        };
        let conn = self.conn()?;
        // Unwritten progress goes with a completion that keeps the row.
        let note = if deletes || !completes {
            None
        } else {
            state.progress.take()
        };
        let body = |conn: &mut PgConnection| {
            let value = work(conn)?;
            if !completes {
                return Ok(value);
            }
            let noted = note.as_ref().map_or(Ok(false), |progress| {
                jobqueue_core::engine::report_progress(conn, &lease, progress)
            });
            let completed = noted.and_then(|_| {
                let done = jobqueue_core::engine::StepDone {
                    lease,
                    result: crate::sync::lock(&state.result).clone(),
                };
                jobqueue_core::engine::complete_step(conn, &done, deletes)
            });
            match completed {
                Ok(()) => Ok(value),
                Err(jobqueue_core::Error::LeaseLost { .. }) => Err(JobError::LeaseLost),
                Err(e) => Err(JobError::retry(e)),
            }
        };
        let result = in_read_committed(conn, body);
        match (&result, note) {
            (Err(_), Some(progress)) => state.progress.put_back(progress),
            (Ok(_), Some(_)) => state.progress.written(),
            (_, None) => {}
        }
        match result {
            Ok(value) => {
                state.handled.store(true, Ordering::Relaxed);
                Ok(value)
            }
            Err(JobError::LeaseLost) => {
                state.lost.store(true, Ordering::Relaxed);
                Err(JobError::LeaseLost)
            }
            Err(e) => Err(e),
        }
    }
}

/// Runs `body` in a READ COMMITTED transaction on `conn`, or in a
/// savepoint of the transaction `conn` is already in (a job worked inline
/// on a test's connection). The transaction's own failures (BEGIN,
/// COMMIT) become retries through `JobError`'s conversion.
pub(crate) fn in_read_committed<T>(
    conn: &mut PgConnection,
    body: impl FnOnce(&mut PgConnection) -> Result<T, JobError>,
) -> Result<T, JobError> {
    let in_transaction = AnsiTransactionManager::transaction_manager_status_mut(conn)
        .transaction_depth()
        .is_ok_and(|depth| depth.is_some());
    if in_transaction {
        diesel::Connection::transaction::<T, JobError, _>(conn, body)
    } else {
        conn.build_transaction()
            .read_committed()
            .run::<T, JobError, _>(body)
    }
}

/// The handler's connection of a runner's worker: from the runner's handler
/// pool, or one of its own while abandoned handlers hold pool connections
/// (see [`JobContext::conn`]).
fn runner_conn<'c>(
    shared: &Shared,
    slot: &'c mut Option<HandlerConn>,
) -> Result<&'c mut PgConnection, JobError> {
    let conn = match slot {
        Some(conn) => conn,
        slot => {
            let unavailable = |e: &dyn std::fmt::Display| {
                JobError::retry(format!("no database connection for the handler: {e}"))
            };
            let conn = if shared.counters.abandoned_running.load(Ordering::Acquire) == 0 {
                HandlerConn::Pooled(shared.pool.get().map_err(|e| unavailable(&e))?)
            } else if let Some(pooled) = shared.pool.try_get() {
                HandlerConn::Pooled(pooled)
            } else {
                let own = shared
                    .connector
                    .handler_connection()
                    .map_err(|e| unavailable(&e))?;
                HandlerConn::Own(own)
            };
            slot.insert(conn)
        }
    };
    Ok(conn.get())
}
