//! The admission of keyed jobs: moving `waiting` jobs (keyed jobs of a
//! queue with a key limit) to `pending` when their key has room.
//!
//! Three passes admit, each safe to run from any number of processes at
//! once (the statements are in `sql/keys.rs`):
//!
//! - [`admit_keys`]: after jobs of some keys finished (a runner's
//!   completions), the next jobs of those keys;
//! - [`admit_new`]: the waiting jobs no admission looked at yet (new
//!   enqueues, jobs that came due), each of whose key may have room;
//! - [`sweep_keys`]: a walk through every key with waiting jobs, for the
//!   room no completion announced (a holder cancelled or recovered as
//!   failed by another process, a raised limit, a runner that died between
//!   a completion and its admission).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Text, Timestamptz, Uuid};

use crate::isolation::read_committed;
use crate::prepared::{Prepared, prepared};
pub use crate::queue_key::QueueKey;
use crate::{JobId, Result, limits, sql};

/// What [`sweep_keys`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Keys with waiting jobs it looked at.
    pub keys: usize,
    /// Jobs it admitted.
    pub admitted: i64,
    /// Where the next sweep starts (`None`: the walk reached the last key,
    /// the next one starts from the first).
    pub next: Option<QueueKey>,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Where a walk of the new waiting jobs ([`admit_new`]) goes on from: the
/// last job a page looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCursor {
    queue: String,
    run_at: DateTime<Utc>,
    id: JobId,
}

/// What a page of [`admit_new`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewAdmitted {
    /// Jobs admitted.
    pub admitted: i64,
    /// Jobs looked at.
    pub looked: usize,
    /// Jobs of those whose key's lock another transaction held (an enqueue
    /// of the key is open): neither admitted nor marked, left to a later
    /// pass.
    pub busy: usize,
    /// Where the next page starts, when this one was full (`None`: no new
    /// job after it, as of this read).
    pub next: Option<NewCursor>,
}

#[derive(QueryableByName)]
struct NewRow {
    #[diesel(sql_type = Uuid)]
    id: JobId,
    #[diesel(embed)]
    key: QueueKey,
    #[diesel(sql_type = Timestamptz)]
    run_at: DateTime<Utc>,
}

/// What [`admit`] did: jobs admitted, and the jobs of its `checked` whose
/// key it did not get.
struct Admitted {
    jobs: i64,
    busy: usize,
}

#[derive(QueryableByName)]
struct SweepRow {
    #[diesel(embed)]
    key: QueueKey,
    #[diesel(sql_type = Bool)]
    has_room: bool,
}

/// Admits the next waiting jobs of `keys`, up to each key's room, in a
/// transaction of its own (or the caller's, which must be READ
/// COMMITTED); returns how many it admitted. Keys of queues without a key
/// limit (any more) have all their waiting jobs admitted. Keys without
/// waiting jobs are left out first, without a lock (the common case when
/// the limit does not bind: no transaction at all).
pub fn admit_keys(conn: &mut PgConnection, keys: &[QueueKey]) -> Result<i64> {
    let waiting = with_waiting_query(keys).load::<QueueKey>(conn)?;
    if waiting.is_empty() {
        return Ok(0);
    }
    Ok(admit(conn, &waiting, &[])?.jobs)
}

/// [`admit_keys`] without the look for keys with waiting jobs first: for a
/// caller that expects most of `keys` to have some (its last admission
/// admitted jobs, as when keys run one job at a time). One read less; a key
/// without waiting jobs costs a probe under the queue's admission lock.
pub fn admit_keys_in_line(conn: &mut PgConnection, keys: &[QueueKey]) -> Result<i64> {
    if keys.is_empty() {
        return Ok(0);
    }
    Ok(admit(conn, keys, &[])?.jobs)
}

/// Whether any job of `queues` (every queue if empty) waits for its key's
/// room. A runner that finds none, and hears of no waiting job after, can
/// leave out the admission after its completions (see [`admit_keys`]).
pub fn any_waiting(conn: &mut PgConnection, queues: &[String]) -> Result<bool> {
    #[derive(QueryableByName)]
    struct Waiting {
        #[diesel(sql_type = Bool)]
        waiting: bool,
    }
    Ok(prepared::<sql::KeyAnyWaiting>()
        .bind::<Array<Text>, _>(queues)
        .get_result::<Waiting>(conn)?
        .waiting)
}

/// Admits what it can of a page of up to `limit` due waiting jobs no
/// admission looked at yet, of `queues` (every queue if empty), after
/// `after` (from the first if `None`), and marks the others as looked at:
/// they wait for a holder of their key to finish. Jobs of keys whose lock
/// an open enqueue holds are left as they are ([`NewAdmitted::busy`]); the
/// page's [`NewAdmitted::next`] goes on past them, so a caller that walks
/// the pages ends however long that enqueue stays open.
pub fn admit_new(
    conn: &mut PgConnection,
    queues: &[String],
    after: Option<&NewCursor>,
    limit: i64,
) -> Result<NewAdmitted> {
    limits::check_batch(limit)?;
    let rows = new_query(queues, after, limit).load::<NewRow>(conn)?;
    let Some(last) = rows.last() else {
        return Ok(NewAdmitted::default());
    };
    let next = (rows.len() as i64 >= limit).then(|| NewCursor {
        queue: last.key.queue.clone(),
        run_at: last.run_at,
        id: last.id,
    });
    let mut keys: Vec<QueueKey> = rows.iter().map(|row| row.key.clone()).collect();
    keys.sort_unstable();
    keys.dedup();
    let done = admit(conn, &keys, &rows)?;
    Ok(NewAdmitted {
        admitted: done.jobs,
        looked: rows.len(),
        busy: done.busy,
        next,
    })
}

/// Looks at up to `limit` keys with waiting jobs of `queues` (every queue
/// if empty), after `after` (from the first if `None`), and admits the
/// jobs of those with room.
pub fn sweep_keys(
    conn: &mut PgConnection,
    queues: &[String],
    after: Option<&QueueKey>,
    limit: i64,
) -> Result<Sweep> {
    limits::check_batch(limit)?;
    let rows = diesel::sql_query(sql::KEY_SWEEP)
        .bind::<Nullable<Text>, _>(after.map(|at| at.queue.as_str()))
        .bind::<Nullable<Text>, _>(after.map(|at| at.key.as_str()))
        .bind::<Array<Text>, _>(queues)
        .bind::<BigInt, _>(limit)
        .load::<SweepRow>(conn)?;
    let looked = rows.len();
    let next = (looked as i64 >= limit)
        .then(|| rows.last())
        .flatten()
        .map(|row| row.key.clone());
    let with_room: Vec<QueueKey> = rows
        .into_iter()
        .filter(|row| row.has_room)
        .map(|row| row.key)
        .collect();
    let admitted = if with_room.is_empty() {
        0
    } else {
        admit(conn, &with_room, &[])?.jobs
    };
    Ok(Sweep {
        keys: looked,
        admitted,
        next,
    })
}

/// Admits the waiting jobs of queue `queue` that its key limit (as now
/// stored) has room for: after the limit changed.
pub(crate) fn admit_queue(conn: &mut PgConnection, queue: &str) -> Result<i64> {
    let keys = diesel::sql_query(sql::KEY_WAITING_OF_QUEUE)
        .bind::<Text, _>(queue)
        .load::<QueueKey>(conn)?;
    if keys.is_empty() {
        return Ok(0);
    }
    Ok(admit(conn, &keys, &[])?.jobs)
}

/// Takes the admission locks of the queues of `keys` and tries those of
/// the keys ([`sql::KEY_LOCK`]), then admits the next jobs of the keys it
/// got (see [`sql::KEY_ADMIT`]) and marks their jobs of `checked` still
/// waiting as looked at. A key it did not get (an enqueue of the key is
/// open) has its first waiting job marked not looked at: the next pass of
/// new jobs admits it.
fn admit(conn: &mut PgConnection, keys: &[QueueKey], checked: &[NewRow]) -> Result<Admitted> {
    read_committed(conn, |conn| {
        let locked: HashSet<QueueKey> = lock_query(keys)
            .load::<QueueKey>(conn)?
            .into_iter()
            .collect();
        if locked.len() < keys.len() {
            let skipped: Vec<QueueKey> = keys
                .iter()
                .filter(|key| !locked.contains(*key))
                .cloned()
                .collect();
            let (queues, names) = key_columns(&skipped);
            diesel::sql_query(sql::KEY_RECHECK)
                .bind::<Array<Text>, _>(queues)
                .bind::<Array<Text>, _>(names)
                .execute(conn)?;
        }
        let busy = checked
            .iter()
            .filter(|row| !locked.contains(&row.key))
            .count();
        if locked.is_empty() {
            return Ok(Admitted { jobs: 0, busy });
        }
        let locked_keys: Vec<QueueKey> = keys
            .iter()
            .filter(|key| locked.contains(*key))
            .cloned()
            .collect();
        let admitted = admit_query(&locked_keys).get_result::<Count>(conn)?.n;
        let ids: Vec<JobId> = checked
            .iter()
            .filter(|row| locked.contains(&row.key))
            .map(|row| row.id)
            .collect();
        if !ids.is_empty() {
            mark_checked_query(&ids).execute(conn)?;
        }
        Ok(Admitted {
            jobs: admitted,
            busy,
        })
    })
}

/// [`sql::KEY_LOCK`], bound: the queues' admission locks, and the locks of
/// `keys` that were free.
pub(crate) fn lock_query(keys: &[QueueKey]) -> Prepared<'_, sql::KeyLock> {
    let (queues, names) = key_columns(keys);
    prepared::<sql::KeyLock>()
        .bind::<Array<Text>, _>(queues)
        .bind::<Array<Text>, _>(names)
}

/// [`sql::KEY_NEW`], bound: up to `limit` new waiting jobs of `queues`,
/// after `after`.
pub(crate) fn new_query<'a>(
    queues: &'a [String],
    after: Option<&'a NewCursor>,
    limit: i64,
) -> Prepared<'a, sql::KeyNew> {
    prepared::<sql::KeyNew>()
        .bind::<Array<Text>, _>(queues)
        .bind::<BigInt, _>(limit)
        .bind::<Nullable<Text>, _>(after.map(|at| at.queue.as_str()))
        .bind::<Nullable<Timestamptz>, _>(after.map(|at| at.run_at))
        .bind::<Nullable<Uuid>, _>(after.map(|at| at.id))
}

/// [`sql::KEY_WITH_WAITING`], bound: which of `keys` have waiting jobs.
pub(crate) fn with_waiting_query(keys: &[QueueKey]) -> Prepared<'_, sql::KeyWithWaiting> {
    let (queues, names) = key_columns(keys);
    prepared::<sql::KeyWithWaiting>()
        .bind::<Array<Text>, _>(queues)
        .bind::<Array<Text>, _>(names)
}

/// [`sql::KEY_ADMIT`], bound: the next waiting jobs of `keys`, their
/// queues woken on the enqueue channel.
pub(crate) fn admit_query(keys: &[QueueKey]) -> Prepared<'_, sql::KeyAdmit> {
    let (queues, names) = key_columns(keys);
    prepared::<sql::KeyAdmit>()
        .bind::<Array<Text>, _>(queues)
        .bind::<Array<Text>, _>(names)
        .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
}

/// [`sql::KEY_MARK_CHECKED`], bound: `ids` marked as looked at.
pub(crate) fn mark_checked_query(ids: &[JobId]) -> Prepared<'_, sql::KeyMarkChecked> {
    prepared::<sql::KeyMarkChecked>().bind::<Array<Uuid>, _>(ids)
}

/// The queues and the keys of `keys`, as the admission statements take
/// them (two arrays).
fn key_columns(keys: &[QueueKey]) -> (Vec<&str>, Vec<&str>) {
    keys.iter()
        .map(|k| (k.queue.as_str(), k.key.as_str()))
        .unzip()
}

impl crate::session::QueueSession {
    /// [`admit_keys`]: one transaction.
    pub fn admit_keys(&mut self, keys: &[QueueKey]) -> Result<i64> {
        admit_keys(self.conn(), keys)
    }

    /// [`admit_keys_in_line`]: one transaction.
    pub fn admit_keys_in_line(&mut self, keys: &[QueueKey]) -> Result<i64> {
        admit_keys_in_line(self.conn(), keys)
    }

    /// [`any_waiting`]: one read.
    pub fn any_waiting(&mut self, queues: &[String]) -> Result<bool> {
        any_waiting(self.conn(), queues)
    }

    /// [`admit_new`]: a read, then one transaction if
    /// it found jobs.
    pub fn admit_new(
        &mut self,
        queues: &[String],
        after: Option<&NewCursor>,
        limit: i64,
    ) -> Result<NewAdmitted> {
        admit_new(self.conn(), queues, after, limit)
    }

    /// [`sweep_keys`]: a read, then one transaction if
    /// some key has room.
    pub fn sweep_keys(
        &mut self,
        queues: &[String],
        after: Option<&QueueKey>,
        limit: i64,
    ) -> Result<Sweep> {
        sweep_keys(self.conn(), queues, after, limit)
    }
}
