//! Queue control: pausing, resuming and limiting queues, durably, and the
//! state of every queue.
//!
//! A queue comes into being when a job names it. What an operator sets on
//! it lives in `jobqueue_queues`, which every claim reads: a paused queue is
//! claimed from by no runner (its jobs stay `pending`, running ones finish,
//! enqueues go on); a queue with a global limit has at most that many jobs
//! held (claimed or running) by all runners together.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Double, Integer, Nullable, Text};

use crate::isolation::read_committed;
use crate::{Error, Result, limits, sql};

/// What a pause, resume or limit change found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, QueryableByName)]
pub struct QueueChange {
    /// The queue was paused before the change.
    #[diesel(sql_type = Bool)]
    pub was_paused: bool,
    /// The queue was known before: it had settings, or jobs (of any
    /// status). Pausing or limiting a queue no job has named yet is allowed
    /// (the setting waits for its first jobs); resuming one is an error.
    #[diesel(sql_type = Bool)]
    pub known: bool,
    #[diesel(sql_type = BigInt)]
    changed: i64,
}

/// One queue as [`list_queues`] sees it.
#[derive(Debug, Clone, PartialEq, QueryableByName)]
pub struct QueueInfo {
    /// The queue's name.
    #[diesel(sql_type = Text)]
    pub queue: String,
    /// Runners claim nothing from it.
    #[diesel(sql_type = Bool)]
    pub paused: bool,
    #[diesel(sql_type = Nullable<Double>)]
    paused_secs: Option<f64>,
    /// Most jobs held at once by all runners together, if limited.
    #[diesel(sql_type = Nullable<Integer>)]
    pub global_limit: Option<i32>,
    /// Jobs due (`pending`).
    #[diesel(sql_type = BigInt)]
    pub due: i64,
    /// Jobs not due yet (`scheduled`, retries waiting out their backoff
    /// included).
    #[diesel(sql_type = BigInt)]
    pub scheduled: i64,
    /// Jobs set aside for want of a handler (`unhandled`).
    #[diesel(sql_type = BigInt)]
    pub unhandled: i64,
    /// Jobs held by a runner (`claimed` or `running`).
    #[diesel(sql_type = BigInt)]
    pub held: i64,
    /// Jobs that failed for good (the dead letter), until pruned.
    #[diesel(sql_type = BigInt)]
    pub failed: i64,
    #[diesel(sql_type = Nullable<Double>)]
    oldest_due_secs: Option<f64>,
}

impl QueueInfo {
    /// How long the oldest due job has waited past its `run_at`.
    pub fn oldest_due_age(&self) -> Option<Duration> {
        self.oldest_due_secs
            .map(|secs| Duration::from_secs_f64(secs.max(0.0)))
    }

    /// How long the queue has been paused.
    pub fn paused_for(&self) -> Option<Duration> {
        self.paused_secs
            .map(|secs| Duration::from_secs_f64(secs.max(0.0)))
    }
}

/// Pauses `queue`: within a claim's round trip, no runner claims from it
/// (this survives restarts of every runner and of the database). Its jobs
/// stay `pending`; held ones run to their end; enqueues into it go on.
/// Pausing a queue no job has named yet is allowed (see
/// [`QueueChange::known`]); pausing a paused queue changes nothing.
pub fn pause_queue(conn: &mut PgConnection, queue: &str) -> Result<QueueChange> {
    limits::check_queue(queue)?;
    read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::QUEUE_PAUSE)
            .bind::<Text, _>(queue)
            .get_result::<QueueChange>(conn)?)
    })
}

/// Resumes a paused `queue` and wakes its runners. Resuming a queue that is
/// not paused changes nothing; resuming one nothing names is
/// [`Error::UnknownQueue`] (with the known queues, since it is most likely
/// a typo).
pub fn resume_queue(conn: &mut PgConnection, queue: &str) -> Result<QueueChange> {
    limits::check_queue(queue)?;
    let change = read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::QUEUE_RESUME)
            .bind::<Text, _>(queue)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .get_result::<QueueChange>(conn)?)
    })?;
    if change.known {
        Ok(change)
    } else {
        Err(unknown(conn, queue))
    }
}

/// Sets `queue`'s global limit: at most `limit` of its jobs held (claimed
/// or running) at once by all runners together; `None` removes it. A
/// lowered limit takes no job back: claims stop until fewer are held.
/// Jobs held by a runner that died count until their lease expires and
/// they are recovered, so a dead runner can delay the queue, never push it
/// over its limit.
pub fn set_queue_limit(
    conn: &mut PgConnection,
    queue: &str,
    limit: Option<i32>,
) -> Result<QueueChange> {
    limits::check_queue(queue)?;
    if let Some(limit) = limit
        && limit < 1
    {
        return Err(Error::invalid(
            "queue limit",
            format!(
                "{limit} is not a limit: give at least 1 (to stop a queue, pause it; \
                 to lift the limit, remove it)"
            ),
        ));
    }
    read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::QUEUE_SET_LIMIT)
            .bind::<Text, _>(queue)
            .bind::<Nullable<Integer>, _>(limit)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .get_result::<QueueChange>(conn)?)
    })
}

/// Every queue that has settings or live jobs, by name, with its settings,
/// its live counts and the age of its oldest due job. Reads only the
/// indexes of live jobs: its cost follows the live jobs, not the history.
pub fn list_queues(conn: &mut PgConnection) -> Result<Vec<QueueInfo>> {
    crate::isolation::report(conn, |conn| {
        Ok(diesel::sql_query(sql::QUEUE_LIST).load::<QueueInfo>(conn)?)
    })
}

#[derive(QueryableByName)]
struct Limited {
    #[diesel(sql_type = Bool)]
    limited: bool,
}

/// Whether any of `queues` (all if empty) has a global limit.
pub(crate) fn any_global_limit(conn: &mut PgConnection, queues: &[String]) -> Result<bool> {
    Ok(diesel::sql_query(sql::QUEUE_ANY_LIMITED)
        .bind::<diesel::sql_types::Array<Text>, _>(queues)
        .get_result::<Limited>(conn)?
        .limited)
}

/// [`Error::UnknownQueue`] for `queue`, listing the queues known now (the
/// list is best effort: an error reading it leaves it empty).
fn unknown(conn: &mut PgConnection, queue: &str) -> Error {
    let known = list_queues(conn)
        .map(|queues| queues.into_iter().map(|q| q.queue).collect())
        .unwrap_or_default();
    Error::UnknownQueue {
        queue: queue.to_owned(),
        known,
    }
}

impl QueueChange {
    /// Whether the call wrote anything: always for a pause or a limit; for
    /// a resume, whether the queue was paused (its runners were woken).
    pub fn changed(&self) -> bool {
        self.changed > 0
    }
}
