//! The failover scenario's shape and what is measured of it, shared by
//! `jobqueue bench --only failover` and `tests/fault_failover.rs`: a
//! primary and a streaming standby, [`RUNNERS`] runner processes and a
//! producer of [`BATCH`] jobs every [`TICK`] behind one multi-host URL; the
//! fault after [`DONE_BEFORE`] jobs are done, then [`AFTER`] more of the
//! load. Every figure is read from the jobs table of the server asked (the
//! new primary, after the promotion), by its own clock.

use std::time::Duration;

use diesel::sql_types::{Array, BigInt, Double, Text};
use diesel::{PgConnection, QueryResult, RunQueryDsl};
use jobqueue_core::JobId;

use crate::postgres::PrivateCluster;

/// Runner processes.
pub const RUNNERS: usize = 4;
/// Jobs per producer batch: with [`TICK`], about 2,000 jobs/s.
pub const BATCH: usize = 20;
/// How often the producer enqueues a batch.
pub const TICK: Duration = Duration::from_millis(10);
/// Jobs done under the load before the fault (about 5 s of it).
pub const DONE_BEFORE: i64 = 8_000;
/// How long the load goes on after the promotion: the window the pickup
/// figures are taken over.
pub const AFTER: Duration = Duration::from_secs(10);

/// A libpq URL of database `database` listing `primary`, then `standby`,
/// that connects only to the one that takes writes
/// (`target_session_attrs=read-write`), with a connect timeout of
/// `connect_timeout` seconds per host.
pub fn url(
    primary: &PrivateCluster,
    standby: &PrivateCluster,
    database: &str,
    connect_timeout: u32,
) -> String {
    format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{database}\
         ?target_session_attrs=read-write&connect_timeout={connect_timeout}",
        primary.port(),
        standby.port()
    )
}

#[derive(diesel::QueryableByName)]
struct Figure {
    #[diesel(sql_type = Double)]
    value: f64,
}

fn figure(conn: &mut PgConnection, sql: &str) -> QueryResult<f64> {
    Ok(diesel::sql_query(sql).get_result::<Figure>(conn)?.value)
}

/// The server's clock, in seconds since the epoch.
pub fn server_now(conn: &mut PgConnection) -> QueryResult<f64> {
    figure(conn, "SELECT EXTRACT(EPOCH FROM now())::float8 AS value")
}

/// Pickup p95 (ms, creation to first claim, first attempts) of the jobs
/// created between 3 s and 0.5 s ago: the normal before a fault.
pub fn pickup_p95_lately(conn: &mut PgConnection) -> QueryResult<f64> {
    figure(
        conn,
        "SELECT coalesce(percentile_cont(0.95) WITHIN GROUP (
                    ORDER BY EXTRACT(EPOCH FROM claimed_at - created_at) * 1000), 0)::float8
                AS value
         FROM jobqueue_jobs
         WHERE created_at BETWEEN now() - interval '3 s' AND now() - interval '0.5 s'
           AND attempts = 1",
    )
}

/// Pickup p95 (ms) of the first attempts of the jobs created from `from`
/// seconds after `at` (seconds since the epoch) on.
pub fn pickup_p95_from(conn: &mut PgConnection, at: f64, from: i64) -> QueryResult<f64> {
    figure(
        conn,
        &format!(
            "SELECT coalesce(percentile_cont(0.95) WITHIN GROUP (
                        ORDER BY EXTRACT(EPOCH FROM claimed_at - created_at) * 1000), 0)::float8
                    AS value
             FROM jobqueue_jobs
             WHERE EXTRACT(EPOCH FROM created_at) >= {at} + {from} AND attempts = 1"
        ),
    )
}

/// Pickup figures of the jobs created in one second after the promotion.
#[derive(Debug, Clone, diesel::QueryableByName)]
pub struct Second {
    /// Seconds since the promotion (whole, from 0).
    #[diesel(sql_type = BigInt)]
    pub second: i64,
    /// Jobs created in that second (first attempts).
    #[diesel(sql_type = BigInt)]
    pub jobs: i64,
    /// Their pickup p95, creation to first claim (ms).
    #[diesel(sql_type = Double)]
    pub p95_ms: f64,
}

/// Pickup by second since `promoted_at` (seconds since the epoch), first
/// attempts only.
pub fn pickup_by_second(conn: &mut PgConnection, promoted_at: f64) -> QueryResult<Vec<Second>> {
    diesel::sql_query(format!(
        "SELECT floor(EXTRACT(EPOCH FROM created_at) - {promoted_at})::int8 AS second,
                count(*) AS jobs,
                percentile_cont(0.95) WITHIN GROUP (
                    ORDER BY EXTRACT(EPOCH FROM claimed_at - created_at) * 1000)::float8 AS p95_ms
         FROM jobqueue_jobs
         WHERE EXTRACT(EPOCH FROM created_at) >= {promoted_at} AND attempts = 1
         GROUP BY 1 ORDER BY 1"
    ))
    .load(conn)
}

/// The most a pickup p95 after the fault may be and count as normal:
/// 1.5 times the p95 `before` it, plus 5 ms for a small machine running
/// two servers, the runners and the producer.
pub fn normal_pickup_ms(before: f64) -> f64 {
    before * 1.5 + 5.0
}

/// Seconds from `promoted_at` to the first of `seconds` from which the
/// pickup p95 of every later job is normal (see [`normal_pickup_ms`]): one
/// noisy second later on does not move it, a slowness that lasts does.
/// `None` if it never is.
pub fn seconds_to_normal(
    conn: &mut PgConnection,
    promoted_at: f64,
    before_p95: f64,
    seconds: impl IntoIterator<Item = i64>,
) -> QueryResult<Option<i64>> {
    let normal = normal_pickup_ms(before_p95);
    for from in seconds {
        if pickup_p95_from(conn, promoted_at, from)? <= normal {
            return Ok(Some(from));
        }
    }
    Ok(None)
}

/// Runner connections waiting on `LISTEN` in this database.
pub fn listening(conn: &mut PgConnection) -> QueryResult<usize> {
    let sql = "SELECT count(*)::float8 AS value FROM pg_stat_activity
               WHERE datname = current_database() AND query LIKE 'LISTEN %'";
    Ok(figure(conn, sql)? as usize)
}

/// What became of jobs whose enqueue was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    /// Not in the table: the enqueue was lost.
    pub missing: i64,
    /// In the table but not completed.
    pub unfinished: i64,
    /// Claimed more than once: a claim or completion went down with the old
    /// primary, or a lease ran out, and the job ran again.
    pub claimed_again: i64,
}

impl Acked {
    /// Of `ids`, what the table on `conn` says.
    pub fn of(conn: &mut PgConnection, ids: &[JobId]) -> QueryResult<Self> {
        #[derive(diesel::QueryableByName)]
        struct Row {
            #[diesel(sql_type = BigInt)]
            missing: i64,
            #[diesel(sql_type = BigInt)]
            unfinished: i64,
            #[diesel(sql_type = BigInt)]
            claimed_again: i64,
        }
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let row = diesel::sql_query(
            "SELECT count(*) FILTER (WHERE j.id IS NULL) AS missing,
                    count(*) FILTER (WHERE j.status <> 'completed') AS unfinished,
                    count(*) FILTER (WHERE j.claim_count > 1) AS claimed_again
             FROM unnest($1::text[]) AS a(id)
             LEFT JOIN jobqueue_jobs AS j ON j.id = a.id::uuid",
        )
        .bind::<Array<Text>, _>(&ids)
        .get_result::<Row>(conn)?;
        Ok(Acked {
            missing: row.missing,
            unfinished: row.unfinished,
            claimed_again: row.claimed_again,
        })
    }

    /// Missing or not completed.
    pub fn lost(&self) -> i64 {
        self.missing + self.unfinished
    }
}
