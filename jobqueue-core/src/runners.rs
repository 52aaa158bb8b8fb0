//! Live runners: each registers itself (id, host, pid, version, queues,
//! job types, concurrency), refreshes `last_seen` at every lease beat and
//! removes itself when it stops; one not seen for three of its leases died.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, Double, Integer, Nullable, Text, Timestamptz};

use crate::isolation::read_committed;
use crate::{Result, sql};

/// What a runner says of itself when it registers.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerInfo {
    /// Its worker id (stored on the jobs it claims).
    pub worker_id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The runner library's version.
    pub version: String,
    /// The queues it works (empty: all).
    pub queues: Vec<String>,
    /// The job types it handles.
    pub job_types: Vec<String>,
    /// Its worker threads.
    pub concurrency: usize,
    /// Its lease.
    pub lease: Duration,
}

/// Registers (or registers again) a runner, seen now.
pub fn register_runner(conn: &mut PgConnection, info: &RunnerInfo) -> Result<()> {
    read_committed(conn, |conn| {
        diesel::sql_query(sql::RUNNER_REGISTER)
            .bind::<Text, _>(&info.worker_id)
            .bind::<Text, _>(&info.host)
            .bind::<Integer, _>(i32::try_from(info.pid).unwrap_or(i32::MAX))
            .bind::<Text, _>(&info.version)
            .bind::<Array<Text>, _>(&info.queues)
            .bind::<Array<Text>, _>(&info.job_types)
            .bind::<Integer, _>(i32::try_from(info.concurrency).unwrap_or(i32::MAX))
            .bind::<Double, _>(info.lease.as_secs_f64())
            .execute(conn)?;
        Ok(())
    })
}

/// Where a runner's maintenance is, as it reports it when it is seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintenanceBeat<'a> {
    /// How long since its last maintenance pass (of any service) ended, or
    /// since it started if none has.
    pub since_pass: Duration,
    /// The pass under way, if one is (the service's name).
    pub in_pass: Option<&'a str>,
}

/// Notes that runner `worker_id` is alive, and where its maintenance is;
/// false if it has no row (never registered, or deleted): register it
/// again.
pub fn runner_seen(
    conn: &mut PgConnection,
    worker_id: &str,
    maintenance: &MaintenanceBeat<'_>,
) -> Result<bool> {
    Ok(diesel::sql_query(sql::RUNNER_SEEN)
        .bind::<Text, _>(worker_id)
        .bind::<Double, _>(maintenance.since_pass.as_secs_f64())
        .bind::<Nullable<Text>, _>(maintenance.in_pass)
        .execute(conn)?
        > 0)
}

/// The job types that another live runner of a queue of `queues` (every
/// queue when empty) has handlers for and `own` does not: what a claim of
/// runner `worker_id` leaves for them ([`crate::claim::Claim::handled_elsewhere`])
/// instead of setting it aside. A runner is live while it was seen within
/// its lease.
pub fn types_handled_elsewhere(
    conn: &mut PgConnection,
    worker_id: &str,
    queues: &[String],
    own: &[String],
) -> Result<Vec<String>> {
    #[derive(QueryableByName)]
    struct TypeRow {
        #[diesel(sql_type = Text)]
        job_type: String,
    }
    Ok(diesel::sql_query(sql::RUNNER_TYPES_ELSEWHERE)
        .bind::<Text, _>(worker_id)
        .bind::<Array<Text>, _>(queues)
        .bind::<Array<Text>, _>(own)
        .load::<TypeRow>(conn)?
        .into_iter()
        .map(|row| row.job_type)
        .collect())
}

/// Removes runner `worker_id` (it stopped).
pub fn deregister_runner(conn: &mut PgConnection, worker_id: &str) -> Result<()> {
    diesel::sql_query(sql::RUNNER_DEREGISTER)
        .bind::<Text, _>(worker_id)
        .execute(conn)?;
    Ok(())
}

/// A registered runner, as [`list_runners`] sees it.
#[derive(Debug, Clone, PartialEq, QueryableByName)]
pub struct RunnerRow {
    /// Its worker id.
    #[diesel(sql_type = Text)]
    pub worker_id: String,
    /// Its host.
    #[diesel(sql_type = Text)]
    pub host: String,
    /// Its process id.
    #[diesel(sql_type = Integer)]
    pub pid: i32,
    /// Its runner library's version.
    #[diesel(sql_type = Text)]
    pub version: String,
    /// The queues it works (empty: all).
    #[diesel(sql_type = Array<Text>)]
    pub queues: Vec<String>,
    /// The job types it handles.
    #[diesel(sql_type = Array<Text>)]
    pub job_types: Vec<String>,
    /// Its worker threads.
    #[diesel(sql_type = Integer)]
    pub concurrency: i32,
    #[diesel(sql_type = Double)]
    lease_secs: f64,
    /// When it started.
    #[diesel(sql_type = Timestamptz)]
    pub started_at: DateTime<Utc>,
    /// When it was last seen.
    #[diesel(sql_type = Timestamptz)]
    pub last_seen: DateTime<Utc>,
    #[diesel(sql_type = Double)]
    silent_secs: f64,
    #[diesel(sql_type = Nullable<Double>)]
    maintenance_silent_secs: Option<f64>,
    /// The maintenance pass it was in when last seen (a service's name),
    /// if one was under way.
    #[diesel(sql_type = Nullable<Text>)]
    pub maintenance_pass: Option<String>,
}

impl RunnerRow {
    /// How long since it was last seen (database clock).
    pub fn silent_for(&self) -> Duration {
        Duration::from_secs_f64(self.silent_secs.max(0.0))
    }

    /// How long its maintenance had gone without finishing a pass, as of
    /// now by what it said when last seen (`None` before it said: a runner
    /// of an older version, or one that just started).
    pub fn maintenance_silent_for(&self) -> Option<Duration> {
        self.maintenance_silent_secs
            .map(|secs| Duration::from_secs_f64(secs.max(0.0)))
    }

    /// Not seen for three of its leases: it died (its held jobs are
    /// recovered when their leases expire).
    pub fn is_gone(&self) -> bool {
        self.silent_secs > 3.0 * self.lease_secs
    }

    /// Whether it works `queue` and handles `job_type`.
    pub fn handles(&self, queue: &str, job_type: &str) -> bool {
        (self.queues.is_empty() || self.queues.iter().any(|q| q == queue))
            && self.job_types.iter().any(|t| t == job_type)
    }
}

/// Every registered runner, oldest first.
pub fn list_runners(conn: &mut PgConnection) -> Result<Vec<RunnerRow>> {
    Ok(diesel::sql_query(sql::RUNNER_LIST).load::<RunnerRow>(conn)?)
}

#[derive(QueryableByName)]
struct Leading {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    leading: bool,
}

/// Makes this connection's runner the one that computes the table-wide
/// queue gauges (an advisory lock held until the session ends: a runner
/// that dies or loses its connection hands the role on by itself); false
/// if another runner has it. Call it again only on a new connection: each
/// success takes the lock once more.
pub fn try_lead_queue_gauges(conn: &mut PgConnection) -> Result<bool> {
    Ok(diesel::sql_query(sql::RUNNER_LEAD_GAUGES)
        .get_result::<Leading>(conn)?
        .leading)
}
