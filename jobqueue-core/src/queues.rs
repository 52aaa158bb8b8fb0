//! Queue control: pausing, resuming and limiting queues, durably, and the
//! state of every queue (its settings and its jobs by status).
//!
//! A queue comes into being when a job names it. What an operator sets on
//! it lives in `jobqueue_queues`, which every claim reads: a paused queue is
//! claimed from by no runner (its jobs stay `pending`, running ones finish,
//! enqueues go on); a queue with a global limit has at most that many jobs
//! held (claimed or running) by all runners together.

use std::collections::BTreeMap;
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Double, Integer, Nullable, Text};
use serde_json::{Map, Value};

use crate::isolation::read_committed;
use crate::stats::one_per_key;
use crate::{Error, GlobalLimit, JobStatus, KeyLimit, RateLimit, Result, limits, sql};

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

/// What [`list_queues`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Counting {
    /// Live jobs (blocked, waiting, scheduled, pending, unhandled, claimed, running) and
    /// failed ones: cheap at any history size.
    #[default]
    Live,
    /// Every job, completed and cancelled included: a scan of the table,
    /// which grows with the retained history.
    WithHistory,
}

/// One queue as [`list_queues`] sees it: its settings, its jobs by status
/// and the age of its oldest due job.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueInfo {
    /// The queue's name.
    pub queue: String,
    /// Runners claim nothing from it.
    pub paused: bool,
    paused_secs: Option<f64>,
    /// Most jobs held at once by all runners together, if limited.
    pub global_limit: Option<i32>,
    /// Most jobs started per period by all runners together, if limited.
    pub rate_limit: Option<RateLimit>,
    /// Jobs started within the rate limit's current window (0 without one).
    pub rate_used: i64,
    backoff_secs: Option<f64>,
    /// Most jobs of one concurrency key at once, fleet-wide, if limited.
    pub key_limit: Option<KeyLimit>,
    /// Keys with jobs admitted and not finished (0 without a key limit);
    /// the jobs waiting for a key's room are `waiting` in
    /// [`QueueInfo::counts`].
    pub keys_held: i64,
    /// Jobs per status (statuses with no job are absent; completed and
    /// cancelled only with [`Counting::WithHistory`]). Retries waiting out
    /// their backoff are `scheduled`; `failed` is the dead letter, until
    /// pruned.
    pub counts: BTreeMap<JobStatus, i64>,
    oldest_due_secs: Option<f64>,
    /// What the code last declared (`jobqueue_queues.declared`, JSON).
    declared: Option<String>,
}

impl QueueInfo {
    /// The settings the application's code declared ([`crate::QueueConfig`])
    /// that differ now: an operator changed them since the declaration was
    /// applied, and their change stands until the code declares another
    /// value. Empty for a queue no code declared.
    pub fn overrides(&self) -> Vec<Override> {
        overrides(self.declared.as_deref(), self)
    }

    /// Jobs in `status`.
    pub fn count(&self, status: JobStatus) -> i64 {
        self.counts.get(&status).copied().unwrap_or(0)
    }

    /// Jobs held by a runner (`claimed` or `running`).
    pub fn held(&self) -> i64 {
        self.count(JobStatus::Claimed) + self.count(JobStatus::Running)
    }

    /// How long the oldest due job has waited past its `run_at`.
    pub fn oldest_due_age(&self) -> Option<Duration> {
        self.oldest_due_secs
            .map(|secs| Duration::from_secs_f64(secs.max(0.0)))
    }

    /// How long the queue's runners still hold back after a handler's
    /// "rate limited, retry after" (`None`: they don't).
    pub fn backoff_left(&self) -> Option<Duration> {
        self.backoff_secs
            .filter(|secs| *secs > 0.0)
            .map(Duration::from_secs_f64)
    }

    /// How long the queue has been paused.
    pub fn paused_for(&self) -> Option<Duration> {
        self.paused_secs
            .map(|secs| Duration::from_secs_f64(secs.max(0.0)))
    }
}

/// A row of [`sql::QUEUE_LIST`]: one queue and one status counted.
#[derive(QueryableByName)]
struct QueueRow {
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Bool)]
    paused: bool,
    #[diesel(sql_type = Nullable<Double>)]
    paused_secs: Option<f64>,
    #[diesel(sql_type = Nullable<Integer>)]
    global_limit: Option<i32>,
    #[diesel(sql_type = Nullable<Integer>)]
    rate_starts: Option<i32>,
    #[diesel(sql_type = Nullable<Double>)]
    rate_secs: Option<f64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_used: Option<i64>,
    #[diesel(sql_type = Nullable<Double>)]
    backoff_secs: Option<f64>,
    #[diesel(sql_type = Nullable<Integer>)]
    key_limit: Option<i32>,
    #[diesel(sql_type = Bool)]
    key_ordered: bool,
    #[diesel(sql_type = Nullable<Text>)]
    declared: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    keys_held: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    status: Option<JobStatus>,
    #[diesel(sql_type = Nullable<BigInt>)]
    jobs: Option<i64>,
    #[diesel(sql_type = Nullable<Double>)]
    oldest_due_secs: Option<f64>,
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
    limit: Option<GlobalLimit>,
) -> Result<QueueChange> {
    limits::check_queue(queue)?;
    read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::QUEUE_SET_LIMIT)
            .bind::<Text, _>(queue)
            .bind::<Nullable<Integer>, _>(limit.map(|limit| limit.stored()))
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .get_result::<QueueChange>(conn)?)
    })
}

/// Every queue that has settings, jobs (counted as `counting` says), a
/// schedule or a runner that names it, by name, with its settings, its
/// jobs by status and the age of its oldest due job. [`Counting::Live`]
/// reads only the indexes of live and failed jobs: its cost follows them,
/// not the history.
pub fn list_queues(conn: &mut PgConnection, counting: Counting) -> Result<Vec<QueueInfo>> {
    let statement = match counting {
        Counting::Live => sql::QUEUE_LIST,
        Counting::WithHistory => sql::QUEUE_LIST_HISTORY,
    };
    let rows = crate::isolation::report(conn, |conn| {
        Ok(diesel::sql_query(statement).load::<QueueRow>(conn)?)
    })?;
    Ok(one_per_key(
        rows,
        |entry: &QueueInfo, row: &QueueRow| entry.queue == row.queue,
        |row| QueueInfo {
            queue: row.queue.clone(),
            paused: row.paused,
            paused_secs: row.paused_secs,
            global_limit: row.global_limit,
            rate_limit: RateLimit::stored(row.rate_starts, row.rate_secs),
            rate_used: row.rate_used.unwrap_or(0),
            backoff_secs: row.backoff_secs,
            key_limit: KeyLimit::stored(row.key_limit, row.key_ordered),
            keys_held: row.keys_held.unwrap_or(0),
            counts: BTreeMap::new(),
            oldest_due_secs: None,
            declared: row.declared.clone(),
        },
        |entry, row| {
            if let (Some(status), Some(jobs)) = (row.status, row.jobs) {
                entry.counts.insert(status, jobs);
            }
            entry.oldest_due_secs = entry.oldest_due_secs.or(row.oldest_due_secs);
        },
    ))
}

#[derive(QueryableByName)]
struct Limited {
    #[diesel(sql_type = Bool)]
    limited: bool,
}

/// Whether any of `queues` (all if empty) has a global limit or a rate
/// limit: claims from it lock its row.
pub(crate) fn any_global_limit(conn: &mut PgConnection, queues: &[String]) -> Result<bool> {
    Ok(diesel::sql_query(sql::QUEUE_ANY_LIMITED)
        .bind::<diesel::sql_types::Array<Text>, _>(queues)
        .get_result::<Limited>(conn)?
        .limited)
}

/// [`Error::UnknownQueue`] for `queue`, listing the queues known now (the
/// list is best effort: an error reading it leaves it empty).
pub(crate) fn unknown(conn: &mut PgConnection, queue: &str) -> Error {
    let known = list_queues(conn, Counting::Live)
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

/// A setting the code declared that differs now ([`QueueInfo::overrides`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Override {
    /// The setting: `limit`, `rate`, `keys` or `paused`.
    pub setting: &'static str,
    /// Its value now, as `queue list` shows it.
    pub now: String,
    /// Its value as the code declared it.
    pub declared: String,
}

/// The settings of `info` that differ from `declared` (the stored JSON,
/// as `queue_config.rs` writes it: each declared setting as `shown`).
pub(crate) fn overrides(declared: Option<&str>, info: &QueueInfo) -> Vec<Override> {
    let Some(declared) =
        declared.and_then(|text| serde_json::from_str::<Map<String, Value>>(text).ok())
    else {
        return Vec::new();
    };
    let now = [
        ("limit", shown(info.global_limit)),
        ("rate", shown(info.rate_limit)),
        ("keys", shown(info.key_limit)),
        ("paused", paused_word(info.paused).to_owned()),
    ];
    now.into_iter()
        .filter_map(|(setting, now)| match declared.get(setting) {
            Some(Value::String(was)) if *was != now => Some(Override {
                setting,
                now,
                declared: was.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// A setting as `queue list` shows it, and as a declaration stores it:
/// `none` when there is none.
pub(crate) fn shown<T: std::fmt::Display>(setting: Option<T>) -> String {
    setting.map_or_else(|| "none".to_owned(), |value| value.to_string())
}

/// Whether a queue is paused, in the words a declaration stores.
pub(crate) fn paused_word(paused: bool) -> &'static str {
    if paused { "paused" } else { "working" }
}

impl crate::session::QueueSession {
    /// Whether any of `queues` (all queues if empty) has a global limit or
    /// a rate limit (see [`crate::set_queue_limit`],
    /// [`crate::set_queue_rate_limit`]): a claim that may take from such a
    /// queue needs [`crate::claim::GlobalLimits::Honour`].
    pub fn any_global_limit(&mut self, queues: &[String]) -> Result<bool> {
        any_global_limit(self.conn(), queues)
    }
}
