//! Inserting jobs: one at a time or many in one statement.
//!
//! Each insert also wakes idle workers with `pg_notify` (see
//! [`NOTIFY_CHANNEL`]); the notification is delivered when, and only
//! if, the transaction commits.
//!
//! NOTIFY serializes the commits of notifying transactions (PostgreSQL takes
//! a database-wide lock from pre-commit to the end of commit, WAL flush
//! included), so one notification per enqueue would cap transactional
//! enqueue at one commit per disk flush. A process therefore notifies a
//! queue of a database at most once per [`NOTIFY_DEBOUNCE`]; the enqueues in
//! between ride on that wake-up: a runner that found work re-polls at most
//! 8 ms apart for the next 250 ms before it backs off to its slow poll, so
//! it also finds jobs whose transactions commit after the one that notified
//! (the application's work in them delays their commit, not their insert). The
//! debounce is kept per database and server (learned from each connection's
//! first notifying insert): enqueues into another database are never held
//! back by this one's.
//!
//! Enqueue runs on the caller's connection and inside the caller's open
//! transaction, if any: the jobs exist if and only if it commits. A unique-key
//! clash is resolved with `ON CONFLICT DO NOTHING` and reported as an
//! outcome ([`EnqueueOutcome::Duplicate`]), so it never aborts the caller's
//! transaction.
//!
//! A job with a concurrency key, in a queue with a key limit, is admitted
//! by its enqueue when its key has room (see `enqueue_keys.rs`): the
//! enqueue first tries the key's admission lock, never waiting for it, and
//! looks up the key's room, then inserts. It goes `waiting`, for the
//! runners' admission, when another open enqueue or admission holds the
//! lock, when jobs of its key already wait, or when the caller's
//! transaction is not READ COMMITTED. Such an enqueue runs in a
//! transaction (the caller's, or one of its own): the lock is held until
//! it commits.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Double, Integer, Nullable, Text, Timestamptz, Uuid};

use crate::enqueue_keys::{KeyFound, KeyLocks};
use crate::id_rows::IdRow;
use crate::prepared::{Prepared, Statement, prepared};
use crate::trace_context::EnqueueTrace;
use crate::{Error, JobId, NewJob, Result, sql};

/// The `LISTEN`/`NOTIFY` channel on which enqueues announce available jobs.
pub const NOTIFY_CHANNEL: &str = "jobqueue_jobs";

/// Least time between two notifications of one queue of one database from
/// this process.
pub const NOTIFY_DEBOUNCE: Duration = Duration::from_millis(5);

/// The debounce's memory.
#[derive(Default)]
struct Debounce {
    /// The database and server of each connection (by address) that has
    /// notified, as `db@host:port`.
    database_of: HashMap<usize, String>,
    /// When each queue of each database was last notified.
    last: HashMap<(String, String), Instant>,
}

static DEBOUNCE: Mutex<Option<Debounce>> = Mutex::new(None);

/// Entries kept in each map before the stale ones are dropped.
const DEBOUNCE_KEPT: usize = 1024;

/// A connection, known by its address (one opened where a dropped one was
/// may inherit its database for one debounce window, until its own first
/// notifying insert corrects it).
fn connection_key<C>(conn: &C) -> usize {
    std::ptr::from_ref(conn) as usize
}

/// Whether an enqueue into `queue` on `conn` should notify now (and, if
/// so, notes it). A connection whose database is not known yet notifies.
fn should_notify<C>(conn: &C, queue: &str) -> bool {
    let now = Instant::now();
    let mut guard = DEBOUNCE.lock().unwrap_or_else(PoisonError::into_inner);
    let debounce = guard.get_or_insert_with(Debounce::default);
    let Some(database) = debounce.database_of.get(&connection_key(conn)) else {
        return true;
    };
    let key = (database.clone(), queue.to_owned());
    if debounce.last.len() >= DEBOUNCE_KEPT {
        debounce
            .last
            .retain(|_, at| now.duration_since(*at) < NOTIFY_DEBOUNCE);
    }
    match debounce.last.get_mut(&key) {
        Some(at) if now.duration_since(*at) < NOTIFY_DEBOUNCE => false,
        Some(at) => {
            *at = now;
            true
        }
        None => {
            debounce.last.insert(key, now);
            true
        }
    }
}

/// Notes that `conn` notified `queue` of `database` now.
pub(crate) fn notified<C>(conn: &C, database: String, queue: &str) {
    let mut guard = DEBOUNCE.lock().unwrap_or_else(PoisonError::into_inner);
    let debounce = guard.get_or_insert_with(Debounce::default);
    if debounce.database_of.len() >= DEBOUNCE_KEPT {
        debounce.database_of.clear();
    }
    debounce
        .last
        .insert((database.clone(), queue.to_owned()), Instant::now());
    debounce.database_of.insert(connection_key(conn), database);
}

/// How often an enqueue retries when the job holding its unique key finished
/// between the insert and the look-up of that job.
pub(crate) const UNIQUE_RETRIES: usize = 3;

/// A row of [`sql::JOB_LIVE_HOLDERS`].
#[derive(QueryableByName)]
pub(crate) struct HolderRow {
    #[diesel(sql_type = Text)]
    pub(crate) unique_key: String,
    #[diesel(sql_type = Uuid)]
    pub(crate) id: JobId,
}

/// A row of [`sql::JOB_INSERT`].
#[derive(QueryableByName)]
pub(crate) struct InsertedRow {
    #[diesel(sql_type = Uuid)]
    pub(crate) id: JobId,
    #[diesel(sql_type = Text)]
    pub(crate) database: String,
}

/// A job that was not inserted because a live job already held its unique
/// key: a normal outcome of an enqueue with a key, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Duplicate {
    /// The id the job would have had (its [`NewJob::id`]); no row has it.
    pub job: JobId,
    /// The key it asked for.
    pub unique_key: String,
    /// The live job holding the key (in a batch, possibly an earlier job of
    /// the same batch).
    pub existing: JobId,
}

/// What one enqueue did: inserted the job, or found a live job holding its
/// unique key and inserted nothing. Either way the caller's transaction goes
/// on.
///
/// ```no_run
/// # use jobqueue_core::{EnqueueOutcome, Job};
/// # #[derive(serde::Serialize, serde::Deserialize, Job)]
/// # #[job(type = "report.build")]
/// # struct Report { day: u32 }
/// # fn run(conn: &mut diesel::PgConnection) -> jobqueue_core::Result<()> {
/// match (Report { day: 25 }).options().unique_key("report:25").enqueue(conn)? {
///     EnqueueOutcome::Inserted(id) => println!("enqueued {id}"),
///     EnqueueOutcome::Duplicate(dup) => println!("already queued as {}", dup.existing),
///     // Outcomes a later version adds (the enum is `#[non_exhaustive]`).
///     other => println!("{other:?}"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnqueueOutcome {
    /// The job was inserted under this id.
    Inserted(JobId),
    /// A live job already holds the job's unique key; nothing was inserted.
    Duplicate(Duplicate),
}

impl EnqueueOutcome {
    /// The job that now stands for this enqueue: the one inserted, or the
    /// live job holding the unique key.
    pub fn id(&self) -> JobId {
        match self {
            EnqueueOutcome::Inserted(id) => *id,
            EnqueueOutcome::Duplicate(duplicate) => duplicate.existing,
        }
    }

    /// The inserted job's id; `None` for a duplicate.
    pub fn inserted(&self) -> Option<JobId> {
        match self {
            EnqueueOutcome::Inserted(id) => Some(*id),
            EnqueueOutcome::Duplicate(_) => None,
        }
    }

    /// Whether a live job already held the unique key (nothing inserted).
    pub fn is_duplicate(&self) -> bool {
        matches!(self, EnqueueOutcome::Duplicate(_))
    }
}

/// What [`enqueue_many`] did: the same two outcomes as [`EnqueueOutcome`],
/// for a whole batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Enqueued {
    /// Ids of the jobs inserted, in the batch's order.
    pub inserted: Vec<JobId>,
    /// The jobs not inserted because a live job already held their unique
    /// key (or an earlier job of the same batch did), in the batch's order.
    pub duplicates: Vec<Duplicate>,
}

/// Statement `S` with the job's columns bound as `$1` to `$8` (the order of
/// [`sql::JOB_INSERT`]; its `traceparent` is bound last, by the caller).
pub(crate) fn job_columns<S: Statement>(job: &NewJob) -> Prepared<'_, S> {
    prepared::<S>()
        .bind::<Uuid, _>(job.id)
        .bind::<Text, _>(&job.job_type)
        .bind::<Text, _>(&job.queue)
        .bind::<Integer, _>(job.priority)
        .bind::<Text, _>(&job.payload)
        .bind::<Integer, _>(job.max_attempts)
        .bind::<Nullable<Timestamptz>, _>(job.run_at)
        .bind::<Double, _>(job.delay_secs)
}

/// Inserts one job, or finds the live job already holding its unique key.
///
/// A duplicate key is an outcome ([`EnqueueOutcome::Duplicate`], naming
/// the holder), not an error: the insert is `ON CONFLICT DO NOTHING`, so the
/// caller's transaction goes on either way. Fails with
/// [`Error::UniqueConflict`] only if the key's holder finished, and the key
/// was taken again by another enqueue, three times in a row while this one
/// looked (a transient state: retrying the enqueue resolves it).
pub fn enqueue(conn: &mut PgConnection, job: &NewJob) -> Result<EnqueueOutcome> {
    let job = crate::enqueue_hooks::applied(job)?;
    let trace = EnqueueTrace::start(&job, 1);
    trace.in_scope(|| enqueue_traced(conn, &job, trace.traceparent.as_deref()))
}

/// [`enqueue`] of `job`, which carries `traceparent`: in a transaction
/// with its key's admission lock tried first if it has a concurrency key.
fn enqueue_traced(
    conn: &mut PgConnection,
    job: &NewJob,
    traceparent: Option<&str>,
) -> Result<EnqueueOutcome> {
    if job.concurrency_key.is_none() {
        return enqueue_locked(conn, job, traceparent, KeyFound::default());
    }
    crate::isolation::in_transaction(conn, "BEGIN", |conn| {
        let locks = KeyLocks::take(conn, std::slice::from_ref(job))?;
        enqueue_locked(conn, job, traceparent, locks.of_job(job))
    })
}

/// [`enqueue`] of `job`, admitted by what its enqueue found of its key,
/// `found` (see [`KeyLocks`]).
fn enqueue_locked(
    conn: &mut PgConnection,
    job: &NewJob,
    traceparent: Option<&str>,
    found: KeyFound,
) -> Result<EnqueueOutcome> {
    let notify = notify_now(&*conn, job);
    let Some(key) = &job.unique_key else {
        if needs_full_insert(job, notify) {
            insert_one(conn, job, notify, traceparent, found)?;
        } else {
            job_columns::<sql::JobInsertQuiet>(job)
                .bind::<Nullable<Text>, _>(traceparent)
                .execute(conn)?;
        }
        return Ok(EnqueueOutcome::Inserted(job.id));
    };
    for _ in 0..UNIQUE_RETRIES {
        if let Some(id) = insert_one(conn, job, notify, traceparent, found)? {
            return Ok(EnqueueOutcome::Inserted(id));
        }
        let keys = [key.as_str()];
        if let Some(existing) = live_holders(conn, &keys)?.remove(key) {
            return Ok(duplicate(job, key, existing));
        }
        // The holder finished in between: its key is free again, try once more.
    }
    Err(key_kept_changing(key))
}

/// Whether an enqueue of `job` on `conn` wakes its queue now: a job due
/// later is announced when it becomes due (`promote_due`), and the
/// notification is debounced (see the module's documentation).
pub(crate) fn notify_now<C>(conn: &C, job: &NewJob) -> bool {
    let due_later = job.delay_secs > 0.0 || job.run_at.is_some_and(|at| at > Utc::now());
    !due_later && should_notify(conn, &job.queue)
}

/// Whether an enqueue of `job` without a unique key takes
/// [`sql::JOB_INSERT`] rather than the quiet insert: when it wakes its
/// queue (`notify`), for a keyed job, which may be inserted `waiting`
/// and always wakes the runners' admission, and for a job with tags or
/// metadata (the quiet insert, the common case under load, binds neither).
pub(crate) fn needs_full_insert(job: &NewJob, notify: bool) -> bool {
    notify || job.concurrency_key.is_some() || !job.tags.is_empty() || job.metadata.is_some()
}

/// The outcome of `job`, whose unique `key` the live job `existing` holds.
pub(crate) fn duplicate(job: &NewJob, key: &str, existing: JobId) -> EnqueueOutcome {
    EnqueueOutcome::Duplicate(Duplicate {
        job: job.id,
        unique_key: key.to_owned(),
        existing,
    })
}

/// The error of an enqueue whose key's holder finished, and the key was
/// taken again, each time it looked.
pub(crate) fn key_kept_changing(key: &str) -> Error {
    Error::UniqueConflict {
        unique_key: key.to_owned(),
        existing: None,
    }
}

/// [`sql::JOB_INSERT`] of one job: its id, or `None` if a live job holds
/// its unique key.
fn insert_one(
    conn: &mut PgConnection,
    job: &NewJob,
    notify: bool,
    traceparent: Option<&str>,
    found: KeyFound,
) -> Result<Option<JobId>> {
    let inserted = insert_one_statement(job, notify, traceparent, found)
        .get_result::<InsertedRow>(conn)
        .optional()?;
    Ok(inserted.map(|row| {
        if notify {
            notified(conn, row.database, &job.queue);
        }
        row.id
    }))
}

/// [`sql::JOB_INSERT`] of `job`, which wakes its queue if `notify`, by an
/// enqueue that found `found` of its key.
pub(crate) fn insert_one_statement<'j>(
    job: &'j NewJob,
    notify: bool,
    traceparent: Option<&'j str>,
    found: KeyFound,
) -> Prepared<'j, sql::JobInsert> {
    job_columns::<sql::JobInsert>(job)
        .bind::<Nullable<Text>, _>(job.unique_key.as_deref())
        .bind::<Text, _>(NOTIFY_CHANNEL)
        .bind::<Bool, _>(notify)
        .bind::<Nullable<Text>, _>(traceparent)
        .bind::<Nullable<Text>, _>(job.concurrency_key.as_deref())
        .bind::<Bool, _>(found.waits)
        .bind::<Nullable<Integer>, _>(found.room)
        .bind::<Nullable<Array<Text>>, _>((!job.tags.is_empty()).then_some(&job.tags))
        .bind::<Nullable<Text>, _>(job.metadata.as_deref())
}

/// The live jobs holding `keys`, by key.
fn live_holders(conn: &mut PgConnection, keys: &[&str]) -> Result<HashMap<String, JobId>> {
    Ok(by_key(live_holders_query(keys).load::<HolderRow>(conn)?))
}

/// [`sql::JOB_LIVE_HOLDERS`] of `keys`.
pub(crate) fn live_holders_query<'k>(keys: &'k [&'k str]) -> Prepared<'k, sql::JobLiveHolders> {
    prepared::<sql::JobLiveHolders>().bind::<Array<Text>, _>(keys)
}

/// The holders of [`sql::JOB_LIVE_HOLDERS`]'s rows, by key.
pub(crate) fn by_key(rows: Vec<HolderRow>) -> HashMap<String, JobId> {
    rows.into_iter()
        .map(|row| (row.unique_key, row.id))
        .collect()
}

/// Smallest batch that goes through `COPY` instead of `INSERT ... unnest`.
const COPY_THRESHOLD: usize = 256;

/// Inserts many jobs in ONE statement.
///
/// A large batch of jobs due now without unique or concurrency keys streams through
/// `COPY ... FROM STDIN` (the fastest way into PostgreSQL), followed by one
/// `pg_notify` per distinct queue; any other batch is one
/// `INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING`. A job whose
/// unique key is held by a live job, or by an earlier job of the same batch,
/// is not inserted and is reported in [`Enqueued::duplicates`] with the
/// holder, as [`enqueue`] reports one; the others are inserted. Runs inside
/// the caller's open transaction, if any (else in one of its own): all of
/// the batch or none of it.
pub fn enqueue_many(conn: &mut PgConnection, jobs: &[NewJob]) -> Result<Enqueued> {
    let hooked = crate::enqueue_hooks::applied_many(jobs)?;
    let jobs: &[NewJob] = &hooked;
    let Some(first) = jobs.first() else {
        return Ok(Enqueued::default());
    };
    let trace = EnqueueTrace::start(first, jobs.len());
    trace.in_scope(|| enqueue_many_traced(conn, jobs, trace.traceparent.as_deref()))
}

/// [`enqueue_many`] of `jobs` (at least one), which carry `traceparent`.
fn enqueue_many_traced(
    conn: &mut PgConnection,
    jobs: &[NewJob],
    traceparent: Option<&str>,
) -> Result<Enqueued> {
    let keyed = jobs.iter().any(|job| job.unique_key.is_some());
    let limited = jobs.iter().any(|job| job.concurrency_key.is_some());
    let copyable = jobs.len() >= COPY_THRESHOLD
        && !keyed
        && !limited
        && jobs
            .iter()
            .all(|job| job.run_at.is_none() && job.delay_secs == 0.0);
    if copyable {
        return crate::isolation::in_transaction(conn, "BEGIN", |conn| {
            copy_many(conn, jobs, traceparent)
        });
    }
    if keyed || limited {
        // Duplicates are looked up after the insert, and key locks held
        // until the end, in the same transaction.
        return crate::isolation::in_transaction(conn, "BEGIN", |conn| {
            let locks = KeyLocks::take(conn, jobs)?;
            insert_many(conn, jobs, traceparent, &locks)
        });
    }
    insert_many(conn, jobs, traceparent, &KeyLocks::default())
}

/// Appends `field` to a `COPY` text-format line, escaped.
fn push_field(line: &mut String, field: &str) {
    for c in field.chars() {
        match c {
            '\\' => line.push_str("\\\\"),
            '\t' => line.push_str("\\t"),
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            c => line.push(c),
        }
    }
}

/// `COPY` the jobs (all due now, none with a unique or concurrency key),
/// then wake their queues.
fn copy_many(
    conn: &mut PgConnection,
    jobs: &[NewJob],
    traceparent: Option<&str>,
) -> Result<Enqueued> {
    use diesel::ExecuteCopyFromDsl;

    use crate::schema::jobqueue_jobs::dsl;
    let mut data = String::with_capacity(jobs.len() * 96);
    // `\N` is COPY's NULL.
    let mut trace = String::from("\\N");
    if let Some(traceparent) = traceparent {
        trace.clear();
        push_field(&mut trace, traceparent);
    }
    for job in jobs {
        use std::fmt::Write as _;
        let _ = write!(data, "{}\t", job.id);
        push_field(&mut data, &job.job_type);
        data.push('\t');
        push_field(&mut data, &job.queue);
        let _ = write!(data, "\t{}\t", job.priority);
        push_field(&mut data, &job.payload);
        let _ = write!(data, "\t{}\t{trace}\t", job.max_attempts);
        match job.tags_literal() {
            Some(tags) => push_field(&mut data, &tags),
            None => data.push_str("\\N"),
        }
        data.push('\t');
        match &job.metadata {
            Some(metadata) => push_field(&mut data, metadata),
            None => data.push_str("\\N"),
        }
        data.push('\n');
    }
    diesel::copy_from(dsl::jobqueue_jobs)
        .from_raw_data(
            (
                dsl::id,
                dsl::job_type,
                dsl::queue,
                dsl::priority,
                dsl::payload,
                dsl::max_attempts,
                dsl::traceparent,
                dsl::tags,
                dsl::metadata,
            ),
            |out: &mut dyn std::io::Write| -> Result<()> {
                out.write_all(data.as_bytes()).map_err(|e| {
                    Error::Database(diesel::result::Error::SerializationError(Box::new(e)))
                })
            },
        )
        .execute(conn)?;
    let mut queues: Vec<&str> = jobs.iter().map(|job| job.queue.as_str()).collect();
    queues.sort_unstable();
    queues.dedup();
    diesel::sql_query(sql::JOB_NOTIFY_QUEUES)
        .bind::<Text, _>(NOTIFY_CHANNEL)
        .bind::<Array<Text>, _>(&queues)
        .execute(conn)?;
    Ok(Enqueued {
        inserted: jobs.iter().map(|job| job.id).collect(),
        duplicates: Vec::new(),
    })
}

/// `INSERT ... SELECT FROM unnest(...)` of the jobs.
fn insert_many(
    conn: &mut PgConnection,
    jobs: &[NewJob],
    traceparent: Option<&str>,
    locks: &KeyLocks,
) -> Result<Enqueued> {
    let columns = BatchColumns::of(jobs, traceparent, locks);
    let rows = columns.statement().load::<IdRow>(conn)?;
    let Some(missing) = BatchRest::after(jobs, rows) else {
        return Ok(Enqueued {
            inserted: columns.ids,
            duplicates: Vec::new(),
        });
    };
    let holders = live_holders(conn, &missing.keys())?;
    let mut outcomes = Vec::with_capacity(jobs.len());
    for slot in missing.sort(&holders) {
        outcomes.push(match slot {
            Slot::Done(outcome) => outcome,
            // The holder finished between the insert and the look-up.
            Slot::Again(job) => enqueue_locked(conn, job, traceparent, locks.of_job_left_out(job))?,
        });
    }
    Ok(Enqueued::from_outcomes(outcomes))
}

/// A batch's columns as parallel arrays, the parameters of
/// [`sql::JOB_INSERT_MANY`].
pub(crate) struct BatchColumns<'j> {
    pub(crate) ids: Vec<JobId>,
    types: Vec<&'j str>,
    queues: Vec<&'j str>,
    priorities: Vec<i32>,
    payloads: Vec<&'j str>,
    max_attempts: Vec<i32>,
    run_ats: Vec<Option<DateTime<Utc>>>,
    delays: Vec<f64>,
    keys: Vec<Option<&'j str>>,
    traceparent: Option<&'j str>,
    concurrency_keys: Vec<Option<&'j str>>,
    key_waits: Vec<bool>,
    key_room: Vec<Option<i32>>,
    tags: Vec<Option<String>>,
    metadata: Vec<Option<&'j str>>,
}

impl<'j> BatchColumns<'j> {
    /// The columns of `jobs`, which all carry `traceparent`, enqueued
    /// holding `locks`.
    pub(crate) fn of(jobs: &'j [NewJob], traceparent: Option<&'j str>, locks: &KeyLocks) -> Self {
        let found: Vec<KeyFound> = jobs.iter().map(|job| locks.of_job(job)).collect();
        BatchColumns {
            ids: jobs.iter().map(|job| job.id).collect(),
            types: jobs.iter().map(|job| job.job_type.as_str()).collect(),
            queues: jobs.iter().map(|job| job.queue.as_str()).collect(),
            priorities: jobs.iter().map(|job| job.priority).collect(),
            payloads: jobs.iter().map(|job| job.payload.as_str()).collect(),
            max_attempts: jobs.iter().map(|job| job.max_attempts).collect(),
            run_ats: jobs.iter().map(|job| job.run_at).collect(),
            delays: jobs.iter().map(|job| job.delay_secs).collect(),
            keys: jobs.iter().map(|job| job.unique_key.as_deref()).collect(),
            traceparent,
            concurrency_keys: jobs
                .iter()
                .map(|job| job.concurrency_key.as_deref())
                .collect(),
            key_waits: found.iter().map(|found| found.waits).collect(),
            key_room: found.iter().map(|found| found.room).collect(),
            tags: jobs.iter().map(NewJob::tags_literal).collect(),
            metadata: jobs.iter().map(|job| job.metadata.as_deref()).collect(),
        }
    }

    /// [`sql::JOB_INSERT_MANY`] of these columns, waking their queues.
    pub(crate) fn statement(&self) -> Prepared<'_, sql::JobInsertMany> {
        prepared::<sql::JobInsertMany>()
            .bind::<Array<Uuid>, _>(&self.ids)
            .bind::<Array<Text>, _>(&self.types)
            .bind::<Array<Text>, _>(&self.queues)
            .bind::<Array<Integer>, _>(&self.priorities)
            .bind::<Array<Text>, _>(&self.payloads)
            .bind::<Array<Integer>, _>(&self.max_attempts)
            .bind::<Array<Nullable<Timestamptz>>, _>(&self.run_ats)
            .bind::<Array<Double>, _>(&self.delays)
            .bind::<Array<Nullable<Text>>, _>(&self.keys)
            .bind::<Text, _>(NOTIFY_CHANNEL)
            .bind::<Bool, _>(true)
            .bind::<Nullable<Text>, _>(self.traceparent)
            .bind::<Array<Nullable<Text>>, _>(&self.concurrency_keys)
            .bind::<Array<Bool>, _>(&self.key_waits)
            .bind::<Array<Nullable<Integer>>, _>(&self.key_room)
            .bind::<Array<Nullable<Text>>, _>(&self.tags)
            .bind::<Array<Nullable<Text>>, _>(&self.metadata)
    }
}

/// A batch some of whose jobs [`sql::JOB_INSERT_MANY`] did not insert.
pub(crate) struct BatchRest<'j> {
    jobs: &'j [NewJob],
    inserted: HashSet<JobId>,
}

/// Where one job of a batch stands once its unique key's holders are known.
pub(crate) enum Slot<'j> {
    /// Inserted, or a duplicate of a live holder.
    Done(EnqueueOutcome),
    /// Not inserted, and its key's holder finished since: to enqueue alone.
    Again(&'j NewJob),
}

impl<'j> BatchRest<'j> {
    /// The batch `jobs` after the insert returned `rows`; `None` if every
    /// job was inserted.
    pub(crate) fn after(jobs: &'j [NewJob], rows: Vec<IdRow>) -> Option<Self> {
        let inserted: HashSet<JobId> = rows.into_iter().map(|row| row.id).collect();
        (inserted.len() != jobs.len()).then_some(BatchRest { jobs, inserted })
    }

    /// The unique keys of the jobs not inserted.
    pub(crate) fn keys(&self) -> Vec<&'j str> {
        self.jobs
            .iter()
            .filter(|job| !self.inserted.contains(&job.id))
            .filter_map(|job| job.unique_key.as_deref())
            .collect()
    }

    /// Each job's standing, in the batch's order, given the live `holders`
    /// of [`BatchRest::keys`].
    pub(crate) fn sort(&self, holders: &HashMap<String, JobId>) -> Vec<Slot<'j>> {
        self.jobs
            .iter()
            .map(|job| {
                if self.inserted.contains(&job.id) {
                    return Slot::Done(EnqueueOutcome::Inserted(job.id));
                }
                let held = job
                    .unique_key
                    .as_deref()
                    .and_then(|key| Some((key, *holders.get(key)?)));
                match held {
                    Some((key, existing)) => Slot::Done(duplicate(job, key, existing)),
                    None => Slot::Again(job),
                }
            })
            .collect()
    }
}

impl Enqueued {
    /// A batch's outcomes, in its order, sorted into inserted and duplicates.
    pub(crate) fn from_outcomes(outcomes: Vec<EnqueueOutcome>) -> Self {
        let mut done = Enqueued::default();
        for outcome in outcomes {
            match outcome {
                EnqueueOutcome::Inserted(id) => done.inserted.push(id),
                EnqueueOutcome::Duplicate(duplicate) => done.duplicates.push(duplicate),
            }
        }
        done
    }
}
