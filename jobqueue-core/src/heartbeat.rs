//! Keeping held jobs alive: lease renewal (many at once) and progress.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Double, Integer, Nullable, SmallInt, Text, Uuid};

use crate::isolation::{Scope, read_committed, scoped};
use crate::lease::Lease;
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
    heartbeat_many_in(conn, Scope::Own, &Beat::without_progress(leases), lease)
}

/// Renews the leases of many held jobs in ONE statement, as
/// [`heartbeat_many`], and writes in the same statement the progress that
/// comes with some of them: the percent and stage (when given) replace the
/// row's, the events add to its count (which stops at `i32::MAX`), and the
/// job shows as `running`. A job no longer held under its token gets
/// neither. [`Error::InvalidOption`] (nothing sent) if a report is out of
/// range: see [`Progress`].
pub fn heartbeat_with_progress(
    conn: &mut PgConnection,
    beats: &[Beat],
    lease: Duration,
) -> Result<Heartbeat> {
    heartbeat_many_in(conn, Scope::Own, beats, lease)
}

/// One held job in a heartbeat: its lease, and the progress its handler
/// reported since the last heartbeat, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// The lease to renew.
    pub lease: Lease,
    /// Progress to write with the renewal.
    pub progress: Option<Progress>,
    /// The job's event count when it was claimed. When given, the
    /// progress's [`Progress::events`] are all the events of this claim so
    /// far, not those since the last beat, and the row's count becomes this
    /// base plus them unless it is already higher: a beat sent again after
    /// its reply was lost (its commit unknown), or beats that two threads
    /// sent in either order, count each event once. `None`: the events add
    /// to the row's count.
    pub events_base: Option<i32>,
}

impl Beat {
    /// Beats that renew `leases` and write no progress.
    pub(crate) fn without_progress(leases: &[Lease]) -> Vec<Beat> {
        leases
            .iter()
            .map(|&lease| Beat {
                lease,
                progress: None,
                events_base: None,
            })
            .collect()
    }
}

/// The lease renewal statement bound to `beats`, sorted by id, with the
/// progress arrays parallel to the ids (empty when no beat has progress).
pub(crate) fn heartbeat_query(
    beats: &[Beat],
    lease: Duration,
) -> Prepared<'static, sql::JobHeartbeatMany> {
    let mut sorted: Vec<&Beat> = beats.iter().collect();
    sorted.sort_unstable_by_key(|beat| beat.lease.job_id);
    let ids: Vec<JobId> = sorted.iter().map(|beat| beat.lease.job_id).collect();
    let tokens: Vec<i32> = sorted.iter().map(|beat| beat.lease.token).collect();
    let reported: Vec<Option<&Progress>> = if beats.iter().any(|beat| beat.progress.is_some()) {
        sorted.iter().map(|beat| beat.progress.as_ref()).collect()
    } else {
        Vec::new()
    };
    let percent: Vec<Option<i16>> = reported.iter().map(|p| p.and_then(|p| p.percent)).collect();
    let stage: Vec<Option<String>> = reported
        .iter()
        .map(|p| p.and_then(|p| p.stage.clone()))
        .collect();
    let events: Vec<Option<i32>> = reported.iter().map(|p| p.map(|p| p.events)).collect();
    let bases: Vec<Option<i32>> = if reported.is_empty() {
        Vec::new()
    } else {
        sorted.iter().map(|beat| beat.events_base).collect()
    };
    prepared::<sql::JobHeartbeatMany>()
        .bind::<Array<Uuid>, _>(ids)
        .bind::<Array<Integer>, _>(tokens)
        .bind::<Double, _>(lease.as_secs_f64())
        .bind::<Array<Nullable<SmallInt>>, _>(percent)
        .bind::<Array<Nullable<Text>>, _>(stage)
        .bind::<Array<Nullable<Integer>>, _>(events)
        .bind::<Array<Nullable<Integer>>, _>(bases)
}

pub(crate) fn heartbeat_many_in(
    conn: &mut PgConnection,
    scope: Scope,
    beats: &[Beat],
    lease: Duration,
) -> Result<Heartbeat> {
    if beats.is_empty() {
        return Ok(Heartbeat::default());
    }
    for progress in beats.iter().filter_map(|beat| beat.progress.as_ref()) {
        progress.validate()?;
    }
    let query = heartbeat_query(beats, lease);
    let rows = scoped(conn, scope, sql::HOT_PATH_BEGIN, |conn| {
        Ok(query.load::<BeatRow>(conn)?)
    })?;
    let cancel_requested = rows
        .iter()
        .filter(|row| row.cancel_requested)
        .map(|row| row.id)
        .collect();
    let renewed: Vec<JobId> = rows.into_iter().map(|row| row.id).collect();
    let leases: Vec<Lease> = beats.iter().map(|beat| beat.lease).collect();
    let fenced = crate::lease::Fenced::sort(&leases, renewed);
    Ok(Heartbeat {
        renewed: fenced.applied,
        cancel_requested,
        lost: fenced.lost,
    })
}

/// A progress report from a running handler.
///
/// The percent must be within `0..=100`, the events not negative, and the
/// stage free of NUL characters (PostgreSQL's text cannot hold them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Percent done, `0..=100`; `None` leaves it unchanged.
    pub percent: Option<i16>,
    /// The current stage; `None` leaves it unchanged.
    pub stage: Option<String>,
    /// Events to add to the job's event count.
    pub events: i32,
}

impl Progress {
    /// [`Error::InvalidOption`] if the report is out of range.
    fn validate(&self) -> Result<()> {
        if let Some(percent) = self.percent
            && !(0..=100).contains(&percent)
        {
            return Err(Error::invalid(
                "progress",
                format!("{percent}% is outside 0 to 100"),
            ));
        }
        if self.events < 0 {
            return Err(Error::invalid(
                "events",
                format!("{} is negative", self.events),
            ));
        }
        if self
            .stage
            .as_deref()
            .is_some_and(|stage| stage.contains('\0'))
        {
            return Err(Error::invalid("stage", "it contains a NUL character"));
        }
        Ok(())
    }
}

/// Records progress of one held job in a statement of its own (and marks
/// it `running`); a runner writes its handlers' reports with their
/// heartbeats instead ([`heartbeat_with_progress`]). Returns whether a
/// cancel was requested; [`Error::LeaseLost`] if the job is no longer held
/// under `lease`'s token.
pub fn report_progress(
    conn: &mut PgConnection,
    lease: &Lease,
    progress: &Progress,
) -> Result<bool> {
    progress.validate()?;
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

impl crate::session::QueueSession {
    /// [`heartbeat_many`], in one round trip.
    pub fn heartbeat_many(&mut self, leases: &[Lease], lease: Duration) -> Result<Heartbeat> {
        let beats = Beat::without_progress(leases);
        heartbeat_many_in(self.conn(), Scope::Session, &beats, lease)
    }

    /// [`heartbeat_with_progress`], in one round trip.
    pub fn heartbeat_with_progress(
        &mut self,
        beats: &[Beat],
        lease: Duration,
    ) -> Result<Heartbeat> {
        heartbeat_many_in(self.conn(), Scope::Session, beats, lease)
    }
}
