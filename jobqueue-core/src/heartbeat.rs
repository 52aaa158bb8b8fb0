//! Keeping held jobs alive: lease renewal (many at once) and progress.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Double, Integer, Nullable, SmallInt, Text, Uuid};

use crate::isolation::{Scope, read_committed, scoped};
use crate::lease::Lease;
use crate::lease::columns;
use crate::prepared::{Prepared, prepared};
use crate::{Error, JobId, Result, sql};

#[derive(QueryableByName)]
struct BeatRow {
    #[diesel(sql_type = Uuid)]
    id: JobId,
    #[diesel(sql_type = Bool)]
    cancel_requested: bool,
}

/// What [`heartbeat_many`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeat {
    /// Jobs whose lease was renewed.
    pub renewed: Vec<JobId>,
    /// Renewed jobs whose cancellation was requested: their handlers should stop.
    pub cancel_requested: Vec<JobId>,
    /// Jobs no longer held under the presented token (recovered, finished):
    /// their handlers' work will not count.
    pub lost: Vec<JobId>,
}

/// Renews the leases of many held jobs in ONE statement, to `lease` from the
/// database's `now()`.
pub fn heartbeat_many(
    conn: &mut PgConnection,
    leases: &[Lease],
    lease: Duration,
) -> Result<Heartbeat> {
    heartbeat_many_in(conn, Scope::Own, leases, lease)
}

/// The lease renewal statement bound to `leases` (sorted by id).
pub(crate) fn heartbeat_query(
    leases: &[Lease],
    lease: Duration,
) -> Prepared<'static, sql::JobHeartbeatMany> {
    let (ids, tokens) = columns(leases);
    prepared::<sql::JobHeartbeatMany>()
        .bind::<Array<Uuid>, _>(ids)
        .bind::<Array<Integer>, _>(tokens)
        .bind::<Double, _>(lease.as_secs_f64())
}

pub(crate) fn heartbeat_many_in(
    conn: &mut PgConnection,
    scope: Scope,
    leases: &[Lease],
    lease: Duration,
) -> Result<Heartbeat> {
    if leases.is_empty() {
        return Ok(Heartbeat::default());
    }
    let query = heartbeat_query(leases, lease);
    let rows = scoped(conn, scope, sql::HOT_PATH_BEGIN, |conn| {
        Ok(query.load::<BeatRow>(conn)?)
    })?;
    let cancel_requested = rows
        .iter()
        .filter(|row| row.cancel_requested)
        .map(|row| row.id)
        .collect();
    let renewed: Vec<JobId> = rows.into_iter().map(|row| row.id).collect();
    let fenced = crate::lease::Fenced::sort(leases, renewed);
    Ok(Heartbeat {
        renewed: fenced.applied,
        cancel_requested,
        lost: fenced.lost,
    })
}

/// A progress report from a running handler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Percent done, `0..=100`; `None` leaves it unchanged.
    pub percent: Option<i16>,
    /// The current stage; `None` leaves it unchanged.
    pub stage: Option<String>,
    /// Events to add to the job's event count.
    pub events: i32,
}

/// Records progress of one held job (and marks it `running`). Returns whether
/// a cancel was requested; [`Error::LeaseLost`] if the job is no longer held
/// under `lease`'s token.
pub fn report_progress(
    conn: &mut PgConnection,
    lease: &Lease,
    progress: &Progress,
) -> Result<bool> {
    if let Some(percent) = progress.percent
        && !(0..=100).contains(&percent)
    {
        return Err(Error::invalid(
            "progress",
            format!("{percent}% is outside 0 to 100"),
        ));
    }
    if progress.events < 0 {
        return Err(Error::invalid(
            "events",
            format!("{} is negative", progress.events),
        ));
    }
    #[derive(QueryableByName)]
    struct CancelRow {
        #[diesel(sql_type = Bool)]
        cancel_requested: bool,
    }
    let row = read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::JOB_PROGRESS)
            .bind::<Uuid, _>(lease.job_id)
            .bind::<Integer, _>(lease.token)
            .bind::<Nullable<SmallInt>, _>(progress.percent)
            .bind::<Nullable<Text>, _>(progress.stage.as_deref())
            .bind::<Integer, _>(progress.events)
            .get_result::<CancelRow>(conn)
            .optional()?)
    })?;
    row.map(|row| row.cancel_requested).ok_or(Error::LeaseLost {
        job_id: lease.job_id,
        token: lease.token,
    })
}
