//! Enqueue on diesel-async's [`AsyncPgConnection`] (feature `async`): the
//! same statements, validation and outcomes as the blocking enqueue
//! ([`crate::enqueue`], [`crate::enqueue_many`]), awaited instead of
//! blocked on.
//!
//! It runs on the caller's connection and inside the caller's open
//! transaction, if any (`conn.transaction(async |conn| ...)`, diesel-async 0.9):
//! the jobs exist if and only if it commits. A unique-key clash is an
//! outcome ([`EnqueueOutcome::Duplicate`]), never an error that aborts the
//! transaction. A batch is one multi-row `INSERT ... SELECT FROM unnest(...)`
//! whatever its size (diesel-async has no `COPY`).

use diesel::OptionalExtension;
use diesel::sql_types::{Nullable, Text};
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, RunQueryDsl, TransactionManager};

use crate::enqueue::{
    BatchColumns, BatchRest, HolderRow, InsertedRow, Slot, UNIQUE_RETRIES, by_key, duplicate,
    insert_one_statement, job_columns, key_kept_changing, live_holders_query, needs_full_insert,
    notified, notify_now,
};
use crate::enqueue_keys::{
    JIT_FREE_KEYS, JitSetting, KeyFound, KeyLocks, jit_off, jit_restore, key_columns,
};
use crate::id_rows::IdRow;
use crate::trace_context::EnqueueTrace;
use crate::{EnqueueOutcome, Enqueued, Error, JobId, NewJob, Result, sql};

/// Inserts one job on an [`AsyncPgConnection`], or finds the live job
/// already holding its unique key: [`crate::enqueue`], awaited.
///
/// A duplicate key is an outcome ([`EnqueueOutcome::Duplicate`], naming the
/// holder), not an error: the caller's transaction goes on either way. Fails
/// with [`Error::UniqueConflict`] only if the key's holder finished, and the
/// key was taken again by another enqueue, three times in a row while this
/// one looked.
pub async fn enqueue_async(conn: &mut AsyncPgConnection, job: &NewJob) -> Result<EnqueueOutcome> {
    let job = crate::enqueue_hooks::applied(job)?;
    let trace = EnqueueTrace::start(&job, 1);
    let enqueue = enqueue_traced(conn, &job, trace.traceparent.as_deref());
    #[cfg(feature = "tracing")]
    let enqueue = tracing::Instrument::instrument(enqueue, trace.span());
    enqueue.await
}

/// [`enqueue_async`] of `job`, which carries `traceparent`: in a
/// transaction with its key's admission lock tried first if it has a
/// concurrency key (see [`KeyLocks`]).
async fn enqueue_traced(
    conn: &mut AsyncPgConnection,
    job: &NewJob,
    traceparent: Option<&str>,
) -> Result<EnqueueOutcome> {
    if job.concurrency_key.is_none() {
        return enqueue_locked(conn, job, traceparent, KeyFound::default()).await;
    }
    in_transaction(conn, async |conn| {
        let locks = take_locks(conn, std::slice::from_ref(job)).await?;
        enqueue_locked(conn, job, traceparent, locks.of_job(job)).await
    })
    .await
}

/// [`enqueue_async`] of `job`, admitted by what its enqueue found of its
/// key, `found` (see [`KeyLocks`]).
async fn enqueue_locked(
    conn: &mut AsyncPgConnection,
    job: &NewJob,
    traceparent: Option<&str>,
    found: KeyFound,
) -> Result<EnqueueOutcome> {
    let notify = notify_now(&*conn, job);
    let Some(key) = &job.unique_key else {
        if needs_full_insert(job, notify) {
            insert_one(conn, job, notify, traceparent, found).await?;
        } else {
            job_columns::<sql::JobInsertQuiet>(job)
                .bind::<Nullable<Text>, _>(traceparent)
                .execute(conn)
                .await?;
        }
        return Ok(EnqueueOutcome::Inserted(job.id));
    };
    for _ in 0..UNIQUE_RETRIES {
        if let Some(id) = insert_one(conn, job, notify, traceparent, found).await? {
            return Ok(EnqueueOutcome::Inserted(id));
        }
        let keys = [key.as_str()];
        let holders = by_key(live_holders_query(&keys).load::<HolderRow>(conn).await?);
        if let Some(existing) = holders.get(key) {
            return Ok(duplicate(job, key, *existing));
        }
        // The holder finished in between: its key is free again, try once more.
    }
    Err(key_kept_changing(key))
}

/// [`sql::JOB_INSERT`] of one job: its id, or `None` if a live job holds
/// its unique key.
async fn insert_one(
    conn: &mut AsyncPgConnection,
    job: &NewJob,
    notify: bool,
    traceparent: Option<&str>,
    found: KeyFound,
) -> Result<Option<JobId>> {
    let inserted = insert_one_statement(job, notify, traceparent, found)
        .get_result::<InsertedRow>(conn)
        .await
        .optional()?;
    Ok(inserted.map(|row| {
        if notify {
            notified(&*conn, row.database, &job.queue);
        }
        row.id
    }))
}

/// Inserts many jobs on an [`AsyncPgConnection`] in ONE multi-row
/// `INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING`:
/// [`crate::enqueue_many`], awaited, without its `COPY` path.
///
/// A job whose unique key is held by a live job, or by an earlier job of
/// the same batch, is not inserted and is reported in
/// [`Enqueued::duplicates`]; the others are inserted. Runs inside the
/// caller's open transaction, if any (else, for a batch with unique or
/// concurrency keys, in one of its own): all of the batch or none of it.
pub async fn enqueue_many_async(conn: &mut AsyncPgConnection, jobs: &[NewJob]) -> Result<Enqueued> {
    let hooked = crate::enqueue_hooks::applied_many(jobs)?;
    let jobs: &[NewJob] = &hooked;
    let Some(first) = jobs.first() else {
        return Ok(Enqueued::default());
    };
    let trace = EnqueueTrace::start(first, jobs.len());
    let enqueue = enqueue_many_traced(conn, jobs, trace.traceparent.as_deref());
    #[cfg(feature = "tracing")]
    let enqueue = tracing::Instrument::instrument(enqueue, trace.span());
    enqueue.await
}

/// [`enqueue_many_async`] of `jobs` (at least one), which carry
/// `traceparent`.
async fn enqueue_many_traced(
    conn: &mut AsyncPgConnection,
    jobs: &[NewJob],
    traceparent: Option<&str>,
) -> Result<Enqueued> {
    let keyed = jobs.iter().any(|job| job.unique_key.is_some());
    let limited = jobs.iter().any(|job| job.concurrency_key.is_some());
    if !keyed && !limited {
        return insert_many(conn, jobs, traceparent, &KeyLocks::default()).await;
    }
    // Duplicates are looked up after the insert, and key locks held until
    // the end, in the same transaction.
    in_transaction(conn, async |conn| {
        let locks = take_locks(conn, jobs).await?;
        insert_many(conn, jobs, traceparent, &locks).await
    })
    .await
}

/// Runs `f` in a transaction of its own, or, when `conn` is already inside
/// a transaction, in that one as it is.
async fn in_transaction<T>(
    conn: &mut AsyncPgConnection,
    f: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T>,
) -> Result<T> {
    let open = AnsiTransactionManager::transaction_manager_status_mut(conn)
        .transaction_depth()
        .map_err(Error::Database)?
        .is_some();
    if open {
        return f(conn).await;
    }
    AnsiTransactionManager::begin_transaction(conn).await?;
    match f(conn).await {
        Ok(done) => {
            AnsiTransactionManager::commit_transaction(conn).await?;
            Ok(done)
        }
        Err(e) => {
            // The error that ended the transaction is the one to report.
            let _ = AnsiTransactionManager::rollback_transaction(conn).await;
            Err(e)
        }
    }
}

/// [`KeyLocks::take`], awaited.
async fn take_locks(conn: &mut AsyncPgConnection, jobs: &[NewJob]) -> Result<KeyLocks> {
    let (queues, keys) = key_columns(jobs);
    if keys.is_empty() {
        return Ok(KeyLocks::default());
    }
    let locked = KeyLocks::query(&queues, &keys).load(conn).await?;
    if locked.is_empty() {
        return Ok(KeyLocks::default());
    }
    let (queues, keys, got) = KeyLocks::lock_columns(&locked);
    let room = KeyLocks::room_query(&queues, &keys, &got);
    if keys.len() <= JIT_FREE_KEYS {
        return Ok(KeyLocks::of(room.load(conn).await?));
    }
    let prior = jit_off().get_result::<JitSetting>(conn).await?.prior;
    let rows = room.load(conn).await?;
    jit_restore(&prior).execute(conn).await?;
    Ok(KeyLocks::of(rows))
}

/// [`sql::JOB_INSERT_MANY`] of the jobs, then the holders of the keys it
/// found taken.
async fn insert_many(
    conn: &mut AsyncPgConnection,
    jobs: &[NewJob],
    traceparent: Option<&str>,
    locks: &KeyLocks,
) -> Result<Enqueued> {
    let columns = BatchColumns::of(jobs, traceparent, locks);
    let rows = columns.statement().load::<IdRow>(conn).await?;
    let Some(missing) = BatchRest::after(jobs, rows) else {
        return Ok(Enqueued {
            inserted: columns.ids,
            duplicates: Vec::new(),
        });
    };
    let keys = missing.keys();
    let holders = by_key(live_holders_query(&keys).load::<HolderRow>(conn).await?);
    let mut outcomes = Vec::with_capacity(jobs.len());
    for slot in missing.sort(&holders) {
        outcomes.push(match slot {
            Slot::Done(outcome) => outcome,
            // The holder finished between the insert and the look-up.
            Slot::Again(job) => {
                Box::pin(enqueue_locked(
                    conn,
                    job,
                    traceparent,
                    locks.of_job_left_out(job),
                ))
                .await?
            }
        });
    }
    Ok(Enqueued::from_outcomes(outcomes))
}
