//! Snoozing: a handler's "run me again in D" while it waits on something
//! outside (a report being generated, a rate limit's window), which uses
//! up no attempt.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Double, Integer, Uuid};

use crate::id_rows::IdStatusRow;
use crate::isolation::{Scope, scoped};
use crate::lease::Lease;
use crate::prepared::prepared;
use crate::{Error, JobId, JobStatus, Result, sql};

/// Snoozes allowed per job by default before it fails instead.
pub const DEFAULT_MAX_SNOOZES: i32 = 100;

/// One held job to snooze.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snooze {
    /// The attempt that asks to be run again later.
    pub lease: Lease,
    /// How long from now (by the database's clock).
    pub delay: Duration,
    /// Also hold the job's whole queue back for `delay`, on every runner
    /// (the called service said "retry after"): its `backoff_until`.
    pub queue_backoff: bool,
}

/// What [`snooze_many`] did with each job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snoozed {
    /// Jobs back to `pending` or `scheduled`, and those that failed for
    /// having snoozed too often or were cancelled, with their new status.
    pub outcomes: Vec<(JobId, JobStatus)>,
    /// Jobs no longer held under the lease given: nothing changed.
    pub lost: Vec<JobId>,
}

/// Sends held jobs back to wait `delay` each, in ONE statement, without
/// using up their attempts; their history records each snooze. A job that
/// already snoozed `max_snoozes` times fails instead, with an error saying
/// so (a job waiting on something that never comes does not loop forever);
/// one with a cancel request is cancelled.
pub fn snooze_many(
    conn: &mut PgConnection,
    snoozes: &[Snooze],
    max_snoozes: i32,
) -> Result<Snoozed> {
    snooze_many_in(conn, Scope::Own, snoozes, max_snoozes)
}

pub(crate) fn snooze_many_in(
    conn: &mut PgConnection,
    scope: Scope,
    snoozes: &[Snooze],
    max_snoozes: i32,
) -> Result<Snoozed> {
    if max_snoozes < 0 {
        return Err(Error::invalid(
            "max_snoozes",
            format!("{max_snoozes} is negative"),
        ));
    }
    if snoozes.is_empty() {
        return Ok(Snoozed::default());
    }
    let mut sorted: Vec<&Snooze> = snoozes.iter().collect();
    sorted.sort_unstable_by_key(|snooze| snooze.lease.job_id);
    let ids: Vec<JobId> = sorted.iter().map(|s| s.lease.job_id).collect();
    let tokens: Vec<i32> = sorted.iter().map(|s| s.lease.token).collect();
    let delays: Vec<f64> = sorted.iter().map(|s| s.delay.as_secs_f64()).collect();
    let backoffs: Vec<bool> = sorted.iter().map(|s| s.queue_backoff).collect();
    let query = prepared::<sql::JobSnoozeMany>()
        .bind::<Array<Uuid>, _>(ids.clone())
        .bind::<Array<Integer>, _>(tokens)
        .bind::<Array<Double>, _>(delays)
        .bind::<Integer, _>(max_snoozes)
        .bind::<Array<Bool>, _>(backoffs);
    let rows = scoped(conn, scope, sql::HOT_PATH_BEGIN, |conn| {
        Ok(query.load::<IdStatusRow>(conn)?)
    })?;
    let changed: std::collections::HashSet<JobId> = rows.iter().map(|row| row.id).collect();
    Ok(Snoozed {
        outcomes: rows.into_iter().map(|row| (row.id, row.status)).collect(),
        lost: ids.into_iter().filter(|id| !changed.contains(id)).collect(),
    })
}

impl crate::session::QueueSession {
    /// [`snooze_many`], in one round trip.
    pub fn snooze_many(&mut self, snoozes: &[Snooze], max_snoozes: i32) -> Result<Snoozed> {
        snooze_many_in(self.conn(), Scope::Session, snoozes, max_snoozes)
    }
}
