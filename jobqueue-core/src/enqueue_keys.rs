//! What an enqueue of keyed jobs finds out before its insert: for each
//! key of a queue with a key limit, whether it got the key's admission
//! lock (tried, never waited for: [`sql::KEY_LOCK_FOR_INSERT`]), then, in a
//! later statement planned afresh at each run, whether a due job of the
//! key waits and how many of its jobs the insert may admit
//! ([`sql::KEY_ROOM_FOR_INSERT`]). The insert (`enqueue.rs`) admits by
//! that and reads no other job.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Integer, Nullable, Text};

use crate::prepared::{Prepared, prepared};
use crate::queue_key::QueueKey;
use crate::{NewJob, Result, sql};

/// What an enqueue found of the keys of its jobs in queues with a key
/// limit before inserting them: whether a due job of each key waits, and
/// the room its insert may admit within (null when it did not get the
/// key's admission lock, tried and never waited for, or a job of the key
/// waits). See [`sql::KEY_LOCK_FOR_INSERT`] and
/// [`sql::KEY_ROOM_FOR_INSERT`].
#[derive(Debug, Default)]
pub(crate) struct KeyLocks(HashMap<QueueKey, KeyFound>);

/// A row of [`sql::KEY_LOCK_FOR_INSERT`]: a key of a queue with a key
/// limit, and whether the enqueue got its lock.
#[derive(QueryableByName)]
pub(crate) struct LockedKey {
    #[diesel(embed)]
    key: QueueKey,
    #[diesel(sql_type = Bool)]
    locked: bool,
}

/// A row of [`sql::KEY_ROOM_FOR_INSERT`]: what the insert admits the jobs
/// of a key by.
#[derive(QueryableByName)]
pub(crate) struct KeyRoom {
    #[diesel(embed)]
    key: QueueKey,
    #[diesel(sql_type = Bool)]
    waits: bool,
    #[diesel(sql_type = Nullable<Integer>)]
    room: Option<i32>,
}

impl KeyLocks {
    /// Tries the locks of the keys of `jobs` (those of queues with a key
    /// limit) and counts the room of those it got, in the connection's
    /// open transaction.
    pub(crate) fn take(conn: &mut PgConnection, jobs: &[NewJob]) -> Result<Self> {
        let (queues, keys) = key_columns(jobs);
        if keys.is_empty() {
            return Ok(KeyLocks::default());
        }
        let locked = Self::query(&queues, &keys).load(conn)?;
        if locked.is_empty() {
            return Ok(KeyLocks::default());
        }
        let (queues, keys, got) = Self::lock_columns(&locked);
        let room = Self::room_query(&queues, &keys, &got);
        if keys.len() <= JIT_FREE_KEYS {
            return Ok(Self::of(room.load(conn)?));
        }
        let prior = jit_off().get_result::<JitSetting>(conn)?.prior;
        let rows = room.load(conn)?;
        jit_restore(&prior).execute(conn)?;
        Ok(Self::of(rows))
    }

    /// [`sql::KEY_LOCK_FOR_INSERT`] of the keys in `keys`, with their
    /// queues in `queues`.
    pub(crate) fn query<'a>(
        queues: &'a [&'a str],
        keys: &'a [&'a str],
    ) -> Prepared<'a, sql::KeyLockForInsert> {
        prepared::<sql::KeyLockForInsert>()
            .bind::<Array<Text>, _>(queues)
            .bind::<Array<Text>, _>(keys)
    }

    /// The columns of `rows`, the rows of [`KeyLocks::query`], as
    /// [`KeyLocks::room_query`] takes them.
    pub(crate) fn lock_columns(rows: &[LockedKey]) -> (Vec<&str>, Vec<&str>, Vec<bool>) {
        let mut columns = (Vec::new(), Vec::new(), Vec::new());
        for row in rows {
            columns.0.push(row.key.queue.as_str());
            columns.1.push(row.key.key.as_str());
            columns.2.push(row.locked);
        }
        columns
    }

    /// [`sql::KEY_ROOM_FOR_INSERT`] of the keys in `keys`, with their
    /// queues in `queues` and whether their lock was got in `locked`:
    /// planned each time (see the statement).
    pub(crate) fn room_query<'a>(
        queues: &'a [&'a str],
        keys: &'a [&'a str],
        locked: &'a [bool],
    ) -> Prepared<'a, sql::KeyRoomForInsert> {
        prepared::<sql::KeyRoomForInsert>()
            .planned_each_time()
            .bind::<Array<Text>, _>(queues)
            .bind::<Array<Text>, _>(keys)
            .bind::<Array<Bool>, _>(locked)
    }

    /// The keys of `rows`, the rows of [`KeyLocks::room_query`].
    pub(crate) fn of(rows: Vec<KeyRoom>) -> Self {
        KeyLocks(
            rows.into_iter()
                .map(|row| {
                    let found = KeyFound {
                        waits: row.waits,
                        room: row.room,
                    };
                    (row.key, found)
                })
                .collect(),
        )
    }

    /// What the insert of `job` admits it by: nothing waits and no room
    /// for a job without a key or of a queue without a key limit.
    pub(crate) fn of_job(&self, job: &NewJob) -> KeyFound {
        let Some(key) = job.concurrency_key.as_ref().filter(|_| !self.0.is_empty()) else {
            return KeyFound::default();
        };
        let key = QueueKey {
            queue: job.queue.clone(),
            key: key.clone(),
        };
        self.0.get(&key).copied().unwrap_or_default()
    }

    /// What a job a batch's insert left out (its unique key was held) is
    /// admitted by when it is inserted alone after that insert, its holder
    /// having finished: no room, so a keyed job of a limited queue waits
    /// for an admission pass. The room [`KeyLocks::of_job`] counted before
    /// the batch may be what the batch's own jobs of the key took.
    pub(crate) fn of_job_left_out(&self, job: &NewJob) -> KeyFound {
        KeyFound {
            room: None,
            ..self.of_job(job)
        }
    }
}

/// Keys of an enqueue past which [`sql::KEY_ROOM_FOR_INSERT`] runs with JIT
/// compilation off ([`sql::JIT_OFF_LOCAL`]): its cost estimate, about 25 a
/// key, crosses the server's default `jit_above_cost` (100,000) at about
/// 4,000 keys, and a compilation costs more than the look-up.
pub(crate) const JIT_FREE_KEYS: usize = 500;

/// A row of [`sql::JIT_OFF_LOCAL`]: the session's JIT setting before.
#[derive(QueryableByName)]
pub(crate) struct JitSetting {
    #[diesel(sql_type = Text)]
    pub(crate) prior: String,
}

/// [`sql::JIT_OFF_LOCAL`]: JIT off until [`jit_restore`] of the setting
/// it returns.
pub(crate) fn jit_off() -> Prepared<'static, sql::JitOffLocal> {
    prepared::<sql::JitOffLocal>()
}

/// [`sql::JIT_RESTORE`] of `prior`, the setting [`jit_off`] returned.
pub(crate) fn jit_restore(prior: &str) -> Prepared<'_, sql::JitRestore> {
    prepared::<sql::JitRestore>().bind::<Text, _>(prior)
}

/// What an insert admits a keyed job by ([`KeyLocks::of_job`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KeyFound {
    /// Whether a due job of its key waits.
    pub(crate) waits: bool,
    /// How many of its key's jobs the insert may admit (see [`KeyRoom`]).
    pub(crate) room: Option<i32>,
}

/// The queues and the concurrency keys of the keyed jobs of `jobs`, as
/// [`KeyLocks::query`] takes them.
pub(crate) fn key_columns(jobs: &[NewJob]) -> (Vec<&str>, Vec<&str>) {
    jobs.iter()
        .filter_map(|job| Some((job.queue.as_str(), job.concurrency_key.as_deref()?)))
        .unzip()
}
