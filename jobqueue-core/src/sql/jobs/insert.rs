//! Inserting jobs (one, one without its row back, many), the live holders
//! of unique keys, and the wake-up of queues.

/// The `key_checked` of a keyed job inserted due (`$run_at`) with key
/// `$key`, `$rank`-th of its key's due jobs in its batch, `$waits` whether
/// a due job of its key already waits (SQL expressions; `$waits` as the
/// enqueue found it, see `KEY_ROOM_FOR_INSERT` in `keys.rs`): true when a
/// due job of its key is in line ahead of it (earlier in the batch, or
/// already waiting). Such a job needs no admission pass of its own: the
/// one ahead of it is admitted first (by a pass, or when a job of the key
/// finishes), and the admission that admits it looks at the rest of the
/// line. Read only while the job is `waiting`.
macro_rules! key_checked_at_insert {
    ($run_at:literal, $key:literal, $rank:literal, $waits:literal) => {
        concat!(
            "CASE WHEN ",
            $key,
            " IS NOT NULL AND ",
            $run_at,
            " <= now() AND (",
            $rank,
            " > 1 OR ",
            $waits,
            ") THEN true END"
        )
    };
}

/// Wakes idle workers: one `pg_notify(channel, queue)` per distinct queue
/// that just got a due job, and one `pg_notify(channel, 'waiting ' ||
/// queue)` per queue that got a job waiting for its key (for the runners'
/// admission of keyed jobs; never debounced). PostgreSQL folds identical
/// notifications of one transaction into one, so a transaction wakes each
/// queue at most once. `$10` is the channel (`NOTIFY_CHANNEL`), a bound
/// parameter; `$11` false skips the notification of due jobs (see
/// `enqueue.rs`: debounce). Each row also names the database and server,
/// which the debounce is kept by.
macro_rules! notify_and_return_ids {
    () => {
        "),
        wake AS (
            SELECT count(pg_notify($10, q.queue)) AS notified
            FROM (SELECT DISTINCT queue FROM inserted WHERE $11 AND status = 'pending'
                  UNION
                  SELECT DISTINCT 'waiting ' || queue FROM inserted WHERE status = 'waiting')
                 AS q
        )
        SELECT inserted.id, (current_database() || '@'
                             || coalesce(host(inet_server_addr()), 'socket') || ':'
                             || coalesce(inet_server_port(), 0)) AS database
        FROM inserted, wake"
    };
}

/// The end of an insert of jobs that may have unique keys: none whose key
/// a live job holds; the others wake their queues
/// (`notify_and_return_ids!`).
macro_rules! unless_key_held {
    () => {
        concat!(
            "
        ON CONFLICT (unique_key) WHERE ",
            live_predicate!(),
            " DO NOTHING
        RETURNING id, queue, status",
            notify_and_return_ids!()
        )
    };
}

/// Inserts one job and wakes its queue; returns its id, or no row if a live
/// job holds its unique key.
///
/// `$1` id, `$2` job_type, `$3` queue, `$4` priority, `$5` payload (JSON text),
/// `$6` max_attempts, `$7` run_at (nullable), `$8` delay in seconds (used when
/// `$7` is null), `$9` unique_key (nullable), `$10` notify channel, `$11`
/// whether to notify, `$12` traceparent (nullable), `$13` concurrency key
/// (nullable), `$14` whether a due job of its key waits, `$15` its key's
/// room (nullable; both as the enqueue found them, see
/// `KEY_ROOM_FOR_INSERT` in `keys.rs`, and `status_at_insert!`), `$16`
/// tags (nullable), `$17` metadata (JSON object text, nullable).
pub(crate) const JOB_INSERT: &str = concat!(
    "WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, unique_key,
             traceparent, concurrency_key, key_checked, tags, metadata)
        SELECT $1, $2, $3, $4, CAST($5 AS jsonb), $6, t.run_at, ",
    status_at_insert!("t.run_at", "$3", "$13::text", "$15::int4", "1", "1"),
    ", $9, $12, $13, ",
    key_checked_at_insert!("t.run_at", "$13::text", "1", "$14::bool"),
    ", $16::text[], CAST($17::text AS jsonb)
        FROM (SELECT COALESCE($7, now() + make_interval(secs => $8)) AS run_at) AS t",
    unless_key_held!()
);

/// Inserts one job without a unique key, tags or metadata and without
/// waking anyone (the common case under load, when the notification is
/// debounced): `$1` to `$8` as in [`JOB_INSERT`], `$9` traceparent
/// (nullable).
pub(crate) const JOB_INSERT_QUIET: &str = concat!(
    "INSERT INTO jobqueue_jobs
        (id, job_type, queue, priority, payload, max_attempts, run_at, status, traceparent)
    SELECT $1, $2, $3, $4, CAST($5 AS jsonb), $6, t.run_at, ",
    status_for_run_at!("t.run_at"),
    ", $9
    FROM (SELECT COALESCE($7, now() + make_interval(secs => $8)) AS run_at) AS t"
);

/// Inserts many jobs in one statement from parallel arrays (same order as
/// [`JOB_INSERT`]'s parameters; `$12`, the one traceparent of them all;
/// `$13` the concurrency keys; `$14` and `$15` each job's key's waiting and
/// room; `$16` each job's tags as an array literal, `$17` its metadata as
/// JSON text, each nullable) and wakes their queues; returns the ids
/// actually inserted.
pub(crate) const JOB_INSERT_MANY: &str = concat!(
    "WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, unique_key,
             traceparent, concurrency_key, key_checked, tags, metadata)
        SELECT t.id, t.job_type, t.queue, t.priority, CAST(t.payload AS jsonb), t.max_attempts,
               t.run_at, ",
    status_at_insert!(
        "t.run_at",
        "t.queue",
        "t.concurrency_key",
        "t.key_room",
        "t.key_rank",
        "t.key_seat"
    ),
    ", t.unique_key, $12::text, t.concurrency_key, ",
    key_checked_at_insert!("t.run_at", "t.concurrency_key", "t.key_rank", "t.key_waits"),
    ", CAST(t.tags AS text[]), CAST(t.metadata AS jsonb)
        FROM (SELECT r.*,
                     row_number() OVER (PARTITION BY r.queue, r.concurrency_key,
                                                     r.run_at <= now()
                                        ORDER BY r.id) AS key_rank,
                     row_number() OVER (PARTITION BY r.queue, r.concurrency_key
                                        ORDER BY r.id) AS key_seat
              FROM (SELECT u.id, u.job_type, u.queue, u.priority, u.payload, u.max_attempts,
                           COALESCE(u.run_at, now() + make_interval(secs => u.delay)) AS run_at,
                           u.unique_key, u.concurrency_key, u.key_waits, u.key_room, u.tags,
                           u.metadata
                    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int4[], $5::text[],
                                $6::int4[], $7::timestamptz[], $8::float8[], $9::text[],
                                $13::text[], $14::bool[], $15::int4[], $16::text[], $17::text[])
                         AS u(id, job_type, queue, priority, payload, max_attempts, run_at, delay,
                              unique_key, concurrency_key, key_waits, key_room, tags, metadata))
                   AS r) AS t",
    unless_key_held!()
);

/// The live jobs holding the unique keys in `$1`: `(unique_key, id)`, one
/// row per key held (through the partial unique index on live keys).
pub(crate) const JOB_LIVE_HOLDERS: &str = concat!(
    "SELECT unique_key, id FROM jobqueue_jobs WHERE unique_key = ANY($1) AND ",
    live_predicate!()
);

/// Wakes the queues in `$2` (distinct names) on channel `$1`: after a `COPY`.
pub(crate) const JOB_NOTIFY_QUEUES: &str = "SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q";
