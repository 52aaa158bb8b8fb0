//! A worker's writes on the jobs it holds: start, complete, fail, release,
//! and finishing a cancelled job. Every one is fenced by the lease token and
//! takes many jobs in one statement; the fencing itself (which of the
//! leases a statement applied to, and which were lost) is at the end, for
//! every fenced write of the crate.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, Double, Integer, Nullable, Text, Timestamptz, Uuid};

use crate::id_rows::IdRow;
use crate::isolation::{Scope, scoped};
use crate::lease::{Fenced, Lease, columns};
use crate::prepared::{Prepared, Statement, prepared};
use crate::{Error, JobId, JobStatus, Result, RetryPolicy, limits, sql};

/// The statement that sets held jobs aside as `unhandled`, bound.
pub(crate) fn park_query(leases: &[Lease], runner: &str) -> Prepared<'static, sql::JobParkMany> {
    fenced_query::<sql::JobParkMany>(leases).bind::<Text, _>(runner.to_owned())
}

/// Marks held jobs as `running` (their handlers started).
pub fn start_many(conn: &mut PgConnection, leases: &[Lease]) -> Result<Fenced> {
    fenced_update::<sql::JobStartMany>(conn, Scope::Own, leases)
}

/// Completes many held jobs in ONE statement. Jobs no longer held under their
/// token are left alone and listed in [`Fenced::lost`]. For jobs outside
/// workflows: steps of a workflow complete with `complete_steps_many`
/// (`workflow_release.rs`), which releases the steps after them.
///
/// Called inside the caller's transaction, the completion commits or rolls
/// back with the handler's own writes: exactly-once database effects.
pub fn complete_many(conn: &mut PgConnection, leases: &[Lease]) -> Result<Fenced> {
    fenced_update::<sql::JobCompleteMany>(conn, Scope::Own, leases)
}

/// Completes many held jobs by deleting their rows, in ONE statement: for
/// completed jobs kept for no time (`Retention::completed` of zero), it
/// writes no new row version and no index entry and leaves nothing to
/// prune (the least WAL per job). Fenced like [`complete_many`], and like
/// it joins the caller's transaction; like it, for jobs outside workflows.
pub fn complete_and_delete_many(conn: &mut PgConnection, leases: &[Lease]) -> Result<Fenced> {
    fenced_update::<sql::JobCompleteDeleteMany>(conn, Scope::Own, leases)
}

/// Hands held jobs back to `pending` without using up an attempt: for a runner
/// that claimed them but will not start them (shutting down).
pub fn release_many(conn: &mut PgConnection, leases: &[Lease]) -> Result<Fenced> {
    fenced_update::<sql::JobReleaseMany>(conn, Scope::Own, leases)
}

/// Finishes held jobs as `cancelled` (their handlers stopped on a cancel request).
pub fn cancel_held_many(conn: &mut PgConnection, leases: &[Lease]) -> Result<Fenced> {
    fenced_update::<sql::JobCancelHeldMany>(conn, Scope::Own, leases)
}

/// Sets held jobs aside as [`JobStatus::Unhandled`] without using up an
/// attempt: `runner` claimed them from a queue it works but has no handler
/// for their type. Their error names the type, the runner and the queue.
/// [`crate::ready::reclaim_unhandled`] puts them back when a runner that handles
/// the type runs.
pub fn park_many(conn: &mut PgConnection, leases: &[Lease], runner: &str) -> Result<Fenced> {
    run_fenced(conn, Scope::Own, leases, park_query(leases, runner))
}

/// One failed attempt to record.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The attempt that failed.
    pub lease: Lease,
    /// What went wrong; kept on the row (cut to 8 KiB).
    pub error: String,
    /// Wait this long before the next attempt; `None` fails the job for
    /// good whatever attempts remain.
    pub retry_in: Option<Duration>,
}

impl Failure {
    /// A failure that retries after `policy`'s delay for this attempt.
    pub fn retry(lease: Lease, error: impl Into<String>, policy: &RetryPolicy) -> Self {
        Failure {
            lease,
            error: error.into(),
            retry_in: Some(policy.delay(lease.attempt)),
        }
    }

    /// A failure that is final: the job goes to `failed` at once.
    pub fn permanent(lease: Lease, error: impl Into<String>) -> Self {
        Failure {
            lease,
            error: error.into(),
            retry_in: None,
        }
    }
}

/// Where a failed job went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOutcome {
    /// Back to `scheduled` (or `pending`, with no delay), due again at `run_at`.
    Retrying {
        /// When the next attempt is due (database time).
        run_at: DateTime<Utc>,
    },
    /// Attempts exhausted or failed permanently: `failed`.
    Failed,
    /// A cancel had been requested: `cancelled`.
    Cancelled,
}

/// What [`fail_many`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailedMany {
    /// The jobs changed, with where each went.
    pub outcomes: Vec<(JobId, FailOutcome)>,
    /// Jobs no longer held under the presented token; left unchanged.
    pub lost: Vec<JobId>,
}

#[derive(QueryableByName)]
struct FailRow {
    #[diesel(sql_type = Uuid)]
    id: JobId,
    #[diesel(sql_type = Text)]
    status: JobStatus,
    #[diesel(sql_type = Timestamptz)]
    run_at: DateTime<Utc>,
}

/// Records many failed attempts in ONE statement: each job returns to
/// `pending` after its delay while it has attempts left, else goes to
/// `failed`; its error is kept as `last_error` and in its error history.
pub fn fail_many(conn: &mut PgConnection, failures: &[Failure]) -> Result<FailedMany> {
    fail_many_in(conn, Scope::Own, failures)
}

/// The failure statement bound to `failures` (sorted by id); also returns
/// their ids.
pub(crate) fn fail_query(
    failures: &[Failure],
) -> (Prepared<'static, sql::JobFailMany>, Vec<JobId>) {
    let mut sorted: Vec<&Failure> = failures.iter().collect();
    sorted.sort_unstable_by_key(|failure| failure.lease.job_id);
    let n = sorted.len();
    let mut ids = Vec::with_capacity(n);
    let mut tokens = Vec::with_capacity(n);
    let mut delays = Vec::with_capacity(n);
    let mut errors = Vec::with_capacity(n);
    for failure in sorted {
        ids.push(failure.lease.job_id);
        tokens.push(failure.lease.token);
        delays.push(failure.retry_in.map(|d| d.as_secs_f64()));
        errors.push(limits::clip_error(&failure.error));
    }
    let query = prepared::<sql::JobFailMany>()
        .bind::<Array<Uuid>, _>(ids.clone())
        .bind::<Array<Integer>, _>(tokens)
        .bind::<Array<Nullable<Double>>, _>(delays)
        .bind::<Array<Text>, _>(errors);
    (query, ids)
}

pub(crate) fn fail_many_in(
    conn: &mut PgConnection,
    scope: Scope,
    failures: &[Failure],
) -> Result<FailedMany> {
    if failures.is_empty() {
        return Ok(FailedMany::default());
    }
    let (query, ids) = fail_query(failures);
    let rows = scoped(conn, scope, sql::HOT_PATH_BEGIN, |conn| {
        Ok(query.load::<FailRow>(conn)?)
    })?;
    let changed: std::collections::HashSet<JobId> = rows.iter().map(|row| row.id).collect();
    let lost = ids.into_iter().filter(|id| !changed.contains(id)).collect();
    let outcomes = rows
        .into_iter()
        .map(|row| {
            let outcome = match row.status {
                JobStatus::Pending | JobStatus::Scheduled => {
                    FailOutcome::Retrying { run_at: row.run_at }
                }
                JobStatus::Cancelled => FailOutcome::Cancelled,
                _ => FailOutcome::Failed,
            };
            (row.id, outcome)
        })
        .collect();
    Ok(FailedMany { outcomes, lost })
}

/// Records one failed attempt; [`Error::LeaseLost`] (and no change) if the
/// job is no longer held under the failure's lease token.
pub fn fail(conn: &mut PgConnection, failure: &Failure) -> Result<FailOutcome> {
    let done = fail_many(conn, std::slice::from_ref(failure))?;
    done.outcomes
        .first()
        .map(|(_, outcome)| *outcome)
        .ok_or(Error::LeaseLost {
            job_id: failure.lease.job_id,
            token: failure.lease.token,
        })
}

impl crate::session::QueueSession {
    /// [`complete_many`], in one round trip.
    pub fn complete_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobCompleteMany>(self.conn(), Scope::Session, leases)
    }

    /// [`complete_and_delete_many`], in one round trip.
    pub fn complete_and_delete_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobCompleteDeleteMany>(self.conn(), Scope::Session, leases)
    }

    /// [`fail_many`], in one round trip.
    pub fn fail_many(&mut self, failures: &[Failure]) -> Result<FailedMany> {
        fail_many_in(self.conn(), Scope::Session, failures)
    }

    /// [`release_many`], in one round trip.
    pub fn release_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobReleaseMany>(self.conn(), Scope::Session, leases)
    }

    /// [`park_many`], in one round trip.
    pub fn park_many(&mut self, leases: &[Lease], runner: &str) -> Result<Fenced> {
        run_fenced(
            self.conn(),
            Scope::Session,
            leases,
            park_query(leases, runner),
        )
    }

    /// [`cancel_held_many`], in one round trip.
    pub fn cancel_held_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobCancelHeldMany>(self.conn(), Scope::Session, leases)
    }

    /// [`start_many`], in one round trip.
    pub fn start_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobStartMany>(self.conn(), Scope::Session, leases)
    }
}

// Running the batch statements on held jobs that are fenced by the
// lease tokens: `(ids, tokens, ...) -> RETURNING id`, what each changed
// sorted from what it left alone (a job recovered meanwhile).

/// One of the `(ids, tokens) -> RETURNING id` statements, bound to
/// `leases` (sorted by id).
pub(crate) fn fenced_query<S: Statement>(leases: &[Lease]) -> Prepared<'static, S> {
    let (ids, tokens) = columns(leases);
    prepared::<S>()
        .bind::<Array<Uuid>, _>(ids)
        .bind::<Array<Integer>, _>(tokens)
}

/// Runs a bound `(ids, tokens, ...) -> RETURNING id` statement on `leases`.
pub(crate) fn run_fenced<S: Statement>(
    conn: &mut PgConnection,
    scope: Scope,
    leases: &[Lease],
    query: Prepared<'_, S>,
) -> Result<Fenced> {
    if leases.is_empty() {
        return Ok(Fenced::default());
    }
    let rows = scoped(conn, scope, sql::HOT_PATH_BEGIN, |conn| {
        Ok(query.load::<IdRow>(conn)?)
    })?;
    Ok(Fenced::sort(
        leases,
        rows.into_iter().map(|row| row.id).collect(),
    ))
}

/// Runs one of the `(ids, tokens) -> RETURNING id` statements.
pub(crate) fn fenced_update<S: Statement>(
    conn: &mut PgConnection,
    scope: Scope,
    leases: &[Lease],
) -> Result<Fenced> {
    run_fenced(conn, scope, leases, fenced_query::<S>(leases))
}

/// `Ok` if the statement changed `lease`'s job, else
/// [`Error::LeaseLost`]: the one-job form of a fenced statement.
pub(crate) fn single(lease: &Lease, fenced: Fenced) -> Result<()> {
    if fenced.applied.contains(&lease.job_id) {
        Ok(())
    } else {
        Err(Error::LeaseLost {
            job_id: lease.job_id,
            token: lease.token,
        })
    }
}
