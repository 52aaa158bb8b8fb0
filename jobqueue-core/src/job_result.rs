//! Results an enqueuer awaits: what a job's handler recorded
//! (`JobContext::set_result`), kept in `jobqueue_results` by the statement
//! that completes the job, and what became of a job that recorded none.
//!
//! [`result`] looks once; [`wait_result`] waits, woken by the notification
//! on channel `jobqueue_results` that a completion with a result, a
//! failure for good and a cancellation send, and looking again every
//! [`RECHECK`] for the ends that send none (a lease that expired on a
//! last attempt, a workflow step cancelled with the step before it, a
//! job deleted).

use std::time::{Duration, Instant};

use diesel::connection::{AnsiTransactionManager, TransactionManager};
use diesel::prelude::*;
use diesel::sql_types::{Array, Double, Integer, Nullable, Text, Uuid};
use serde::de::DeserializeOwned;

use crate::finish::run_fenced;
use crate::isolation::Scope;
use crate::lease::{Fenced, Lease};
use crate::prepared::{Prepared, Statement, prepared};
use crate::workflow_release::StepDone;
use crate::{Error, JobId, JobStatus, Result, sql};

/// The channel a completion with a result notifies, with the job's id.
pub const RESULTS_CHANNEL: &str = "jobqueue_results";

/// How often [`wait_result`] looks again without a notification: how long
/// an end that sends none may wait at most to be seen.
pub const RECHECK: Duration = Duration::from_millis(200);

/// How often a waiter reads its connection's socket for a notification (a
/// read of what arrived, no round trip): often while the wait is young,
/// when most results arrive, then less often.
fn listen_tick(waited: Duration) -> Duration {
    if waited < Duration::from_millis(100) {
        Duration::from_micros(200)
    } else if waited < Duration::from_secs(1) {
        Duration::from_millis(1)
    } else {
        Duration::from_millis(5)
    }
}

/// What became of a job, as its enqueuer sees it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum JobResult<T> {
    /// It completed: with the result its handler recorded, while it is
    /// kept ([`crate::Retention::results`]; a workflow step's, with its
    /// workflow, [`crate::Retention::workflows`]); `None` if it recorded
    /// none and its completed row is still kept.
    Completed(Option<T>),
    /// It failed for good, with its last error.
    Failed(String),
    /// It was cancelled.
    Cancelled,
    /// It has not ended: its status now (`pending`, `scheduled`, `running`,
    /// ...).
    Pending(JobStatus),
    /// Nothing is kept of it: no such job, a job that completed without a
    /// result and whose row was deleted (completed rows are deleted as
    /// they complete by default), or one pruned after its retention.
    /// Record a result, even `()`, for jobs whose end is awaited.
    Gone,
}

impl<T> JobResult<T> {
    /// Whether the job has ended (or nothing is left of it to wait for).
    pub fn is_final(&self) -> bool {
        !matches!(self, JobResult::Pending(_))
    }
}

#[derive(QueryableByName)]
pub(crate) struct ResultRow {
    #[diesel(sql_type = Nullable<Text>)]
    result: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    status: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    error: Option<String>,
}

/// What became of job `id`, looked up once: its kept result decoded as
/// `T` ([`Error::ResultDecode`] if it does not decode), else its status.
pub fn result<T: DeserializeOwned>(conn: &mut PgConnection, id: JobId) -> Result<JobResult<T>> {
    let row = diesel::sql_query(sql::RESULT_READ)
        .bind::<Uuid, _>(id)
        .get_result::<ResultRow>(conn)?;
    read(id, row)
}

/// What [`sql::RESULT_READ`]'s row for job `id` says became of it.
pub(crate) fn read<T: DeserializeOwned>(id: JobId, row: ResultRow) -> Result<JobResult<T>> {
    if let Some(text) = row.result {
        let value = serde_json::from_str(&text).map_err(|source| Error::ResultDecode {
            job_id: id,
            type_name: std::any::type_name::<T>(),
            source,
        })?;
        return Ok(JobResult::Completed(Some(value)));
    }
    let Some(status) = row.status else {
        return Ok(JobResult::Gone);
    };
    Ok(match status.parse::<JobStatus>()? {
        JobStatus::Completed => JobResult::Completed(None),
        JobStatus::Failed => JobResult::Failed(row.error.unwrap_or_default()),
        JobStatus::Cancelled => JobResult::Cancelled,
        other => JobResult::Pending(other),
    })
}

/// The result kept for job `id`, as JSON, if one is kept and has not
/// expired (what `jobqueue show` and the dashboard show).
pub fn kept_result(conn: &mut PgConnection, id: JobId) -> Result<Option<serde_json::Value>> {
    Ok(match result::<serde_json::Value>(conn, id)? {
        JobResult::Completed(Some(value)) => Some(value),
        _ => None,
    })
}

/// What became of job `id`, waiting up to `timeout` for it to end:
/// [`JobResult::Pending`] only if it had not ended by then. Woken by the
/// notification its completion sends (listening on `conn` while it waits),
/// and looking again every [`RECHECK`] for an end that sends none.
///
/// `conn` must be outside a transaction: a `LISTEN` takes effect when its
/// transaction commits, so a waiter inside one would hear nothing
/// ([`Error::InvalidOption`] naming the transaction).
pub fn wait_result<T: DeserializeOwned>(
    conn: &mut PgConnection,
    id: JobId,
    timeout: Duration,
) -> Result<JobResult<T>> {
    let depth = AnsiTransactionManager::transaction_manager_status_mut(conn)
        .transaction_depth()
        .map_err(Error::Database)?;
    if depth.is_some() {
        return Err(inside_a_transaction());
    }
    let deadline = Instant::now() + timeout;
    diesel::sql_query(format!("LISTEN {RESULTS_CHANNEL}")).execute(conn)?;
    let waited = wait_listening(conn, id, deadline);
    // A connection that goes back to a pool must not keep listening.
    let unlisten = diesel::sql_query(format!("UNLISTEN {RESULTS_CHANNEL}")).execute(conn);
    let outcome = waited?;
    unlisten?;
    Ok(outcome)
}

/// Why a wait inside a transaction is refused.
pub(crate) fn inside_a_transaction() -> Error {
    Error::invalid(
        "connection",
        "wait_result needs a connection outside a transaction: a LISTEN inside \
         one is heard only after it commits; commit first (the enqueue's \
         transaction included), then wait",
    )
}

/// [`wait_result`]'s loop, on a connection that listens.
fn wait_listening<T: DeserializeOwned>(
    conn: &mut PgConnection,
    id: JobId,
    deadline: Instant,
) -> Result<JobResult<T>> {
    let ours = id.to_string();
    let began = Instant::now();
    loop {
        let seen = result::<T>(conn, id)?;
        let now = Instant::now();
        if seen.is_final() || now >= deadline {
            return Ok(seen);
        }
        let look_again = (now + RECHECK).min(deadline);
        'listen: while Instant::now() < look_again {
            for notification in conn.notifications_iter() {
                if notification?.payload == ours {
                    break 'listen;
                }
            }
            std::thread::sleep(listen_tick(began.elapsed()));
        }
    }
}

/// Completes one held job outside a workflow whose handler recorded a
/// result (`done.result`), keeping it for `keep` (`None`: until deleted),
/// in the completion's own statement, fenced like it: the result is kept
/// exactly when the completion commits. `delete` deletes the row (a
/// retention of zero). [`Error::LeaseLost`] (and no change) if the job is
/// no longer held under its lease's token.
pub fn complete_with_result(
    conn: &mut PgConnection,
    done: &StepDone,
    delete: bool,
    keep: Option<Duration>,
) -> Result<()> {
    let fenced = complete_results_in(conn, Scope::Own, std::slice::from_ref(done), delete, keep)?;
    crate::finish::single(&done.lease, fenced)
}

/// Completes held jobs outside workflows whose handlers recorded a result
/// (`done`, each with one), keeping the results for `keep` (`None`: until
/// deleted), in one statement fenced like the other completions: a result
/// is kept exactly when its job's completion commits. `delete` deletes the
/// completed rows (a retention of zero).
pub(crate) fn complete_results_in(
    conn: &mut PgConnection,
    scope: Scope,
    done: &[StepDone],
    delete: bool,
    keep: Option<Duration>,
) -> Result<Fenced> {
    let leases: Vec<Lease> = done.iter().map(|job| job.lease).collect();
    if delete {
        run_fenced(
            conn,
            scope,
            &leases,
            results_query::<sql::JobCompleteDeleteResultsMany>(done, keep),
        )
    } else {
        run_fenced(
            conn,
            scope,
            &leases,
            results_query::<sql::JobCompleteResultsMany>(done, keep),
        )
    }
}

/// Statement `S` bound to `done` sorted by id (`$1` ids, `$2` tokens,
/// `$3` results) and `keep` in seconds (`$4`).
fn results_query<S: Statement>(done: &[StepDone], keep: Option<Duration>) -> Prepared<'static, S> {
    let mut sorted: Vec<&StepDone> = done.iter().collect();
    sorted.sort_unstable_by_key(|job| job.lease.job_id);
    prepared::<S>()
        .bind::<Array<Uuid>, _>(
            sorted
                .iter()
                .map(|job| job.lease.job_id)
                .collect::<Vec<_>>(),
        )
        .bind::<Array<Integer>, _>(sorted.iter().map(|job| job.lease.token).collect::<Vec<_>>())
        .bind::<Array<Nullable<Text>>, _>(
            sorted
                .iter()
                .map(|job| job.result.clone())
                .collect::<Vec<_>>(),
        )
        .bind::<Nullable<Double>, _>(keep.map(|keep| keep.as_secs_f64()))
}

impl crate::session::QueueSession {
    /// Completes held jobs whose handlers recorded a result, keeping the
    /// results for their enqueuers ([`result`]), in one round trip.
    pub fn complete_results_many(
        &mut self,
        done: &[StepDone],
        delete: bool,
        keep: Option<Duration>,
    ) -> Result<Fenced> {
        complete_results_in(self.conn(), Scope::Session, done, delete, keep)
    }
}
