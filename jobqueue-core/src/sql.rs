//! Every SQL statement the queue runs against `jobqueue_jobs`, in one place.
//!
//! Statements are named Noun+Verb (`JOB_CLAIM_MANY`, `JOB_COMPLETE_MANY`) so
//! they sort by table. Every value is a bound parameter; nothing is ever
//! interpolated into these strings. Time always comes from the database's
//! `now()`, never from the caller's clock.
//!
//! "Held" means `status IN ('claimed', 'running')`. A write that acts for a
//! worker (complete, fail, heartbeat, progress) names the job AND the fencing
//! token it got from the claim (`claim_count`), and only touches the row while
//! it is still held under that token.

/// The live statuses covered by the unique-key index.
macro_rules! live_predicate {
    () => {
        "unique_key IS NOT NULL AND status IN ('pending', 'claimed', 'running')"
    };
}

/// Appends one entry to the bounded error history of row `j`.
/// `$err` is the SQL expression giving the error text.
macro_rules! push_error {
    ($err:literal) => {
        concat!(
            "(CASE WHEN jsonb_array_length(j.errors) >= 10 THEN j.errors - 0 ELSE j.errors END) \
             || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', ",
            $err,
            "))"
        )
    };
}

/// Wakes idle workers: one `pg_notify(channel, queue)` per distinct queue
/// that just got a due job. PostgreSQL folds identical notifications of one
/// transaction into one, so a transaction wakes each queue at most once.
/// `$10` is the channel ([`crate::NOTIFY_CHANNEL`]), a bound parameter;
/// `$11` false skips the notification (see `enqueue.rs`: debounce).
macro_rules! notify_and_return_ids {
    () => {
        "),
        wake AS (
            SELECT count(pg_notify($10, q.queue)) AS notified
            FROM (SELECT DISTINCT queue FROM inserted WHERE $11 AND run_at <= now()) AS q
        )
        SELECT inserted.id FROM inserted, wake"
    };
}

/// Inserts one job and wakes its queue; returns its id, or no row if a live
/// job holds its unique key.
///
/// `$1` id, `$2` job_type, `$3` queue, `$4` priority, `$5` payload (JSON text),
/// `$6` max_attempts, `$7` run_at (nullable), `$8` delay in seconds (used when
/// `$7` is null), `$9` unique_key (nullable), `$10` notify channel, `$11`
/// whether to notify.
pub(crate) const JOB_INSERT: &str = concat!(
    "WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, unique_key)
        VALUES ($1, $2, $3, $4, CAST($5 AS jsonb), $6,
                COALESCE($7, now() + make_interval(secs => $8)), $9)
        ON CONFLICT (unique_key) WHERE ",
    live_predicate!(),
    " DO NOTHING
        RETURNING id, queue, run_at",
    notify_and_return_ids!()
);

/// Inserts one job without a unique key and without waking anyone (the
/// common case under load, when the notification is debounced): `$1` to
/// `$8` as in [`JOB_INSERT`].
pub(crate) const JOB_INSERT_QUIET: &str = "
    INSERT INTO jobqueue_jobs
        (id, job_type, queue, priority, payload, max_attempts, run_at)
    VALUES ($1, $2, $3, $4, CAST($5 AS jsonb), $6,
            COALESCE($7, now() + make_interval(secs => $8)))";

/// Inserts many jobs in one statement from parallel arrays (same order as
/// [`JOB_INSERT`]'s parameters) and wakes their queues; returns the ids
/// actually inserted.
pub(crate) const JOB_INSERT_MANY: &str = concat!(
    "WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, unique_key)
        SELECT t.id, t.job_type, t.queue, t.priority, CAST(t.payload AS jsonb), t.max_attempts,
               COALESCE(t.run_at, now() + make_interval(secs => t.delay)), t.unique_key
        FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int4[], $5::text[], $6::int4[],
                    $7::timestamptz[], $8::float8[], $9::text[])
             AS t(id, job_type, queue, priority, payload, max_attempts, run_at, delay, unique_key)
        ON CONFLICT (unique_key) WHERE ",
    live_predicate!(),
    " DO NOTHING
        RETURNING id, queue, run_at",
    notify_and_return_ids!()
);

/// Wakes the queues in `$2` (distinct names) on channel `$1`: after a `COPY`.
pub(crate) const JOB_NOTIFY_QUEUES: &str = "SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q";

/// Claims up to `$3` due pending jobs for worker `$4` in one statement.
///
/// `$1` queues and `$2` job types (an empty array means "any"), `$5` lease in
/// seconds. Served by `jobqueue_jobs_fetch_idx`, whose key is this ORDER BY.
/// Each claim uses up an attempt and bumps the fencing token.
pub(crate) const JOB_CLAIM_MANY: &str = "
    WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'pending'
          AND run_at <= now()
          AND (cardinality($1::text[]) = 0 OR queue = ANY($1::text[]))
          AND (cardinality($2::text[]) = 0 OR job_type = ANY($2::text[]))
        ORDER BY priority DESC, run_at, id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    UPDATE jobqueue_jobs AS j
    SET status = 'claimed',
        worker_id = $4,
        attempts = j.attempts + 1,
        claim_count = j.claim_count + 1,
        claimed_at = now(),
        heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => $5),
        started_at = NULL,
        progress = 0,
        current_stage = NULL
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.*";

/// Marks held jobs as started (`claimed` -> `running`). Arrays `$1` ids, `$2` tokens.
pub(crate) const JOB_START_MANY: &str = "
    UPDATE jobqueue_jobs AS j
    SET status = 'running',
        started_at = COALESCE(j.started_at, now())
    FROM unnest($1::uuid[], $2::int4[]) AS l(id, token)
    WHERE j.id = l.id
      AND j.claim_count = l.token
      AND j.status IN ('claimed', 'running')
    RETURNING j.id";

/// Completes held jobs in one statement. Arrays `$1` ids, `$2` tokens; returns
/// the ids it completed (a job whose token no longer matches is left alone).
pub(crate) const JOB_COMPLETE_MANY: &str = "
    UPDATE jobqueue_jobs AS j
    SET status = 'completed',
        finished_at = now(),
        started_at = COALESCE(j.started_at, j.claimed_at),
        progress = 100,
        lease_expires_at = NULL,
        cancel_requested = false
    FROM unnest($1::uuid[], $2::int4[]) AS l(id, token)
    WHERE j.id = l.id
      AND j.claim_count = l.token
      AND j.status IN ('claimed', 'running')
    RETURNING j.id";

/// Records failed attempts of held jobs in one statement.
///
/// Arrays: `$1` ids, `$2` tokens, `$3` retry delay in seconds (null: permanent
/// failure), `$4` error text. A job goes back to `pending` at
/// `now() + delay` while it has attempts left, to `failed` otherwise, and to
/// `cancelled` if a cancel was requested meanwhile. Returns id, new status and
/// run_at of each job it changed.
pub(crate) const JOB_FAIL_MANY: &str = concat!(
    "WITH f AS (
        SELECT j.id, l.delay, l.error,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN l.delay IS NULL OR j.attempts >= j.max_attempts THEN 'failed'
                    ELSE 'pending' END AS next_status
        FROM jobqueue_jobs AS j
        JOIN unnest($1::uuid[], $2::int4[], $3::float8[], $4::text[]) AS l(id, token, delay, error)
          ON j.id = l.id
        WHERE j.claim_count = l.token
          AND j.status IN ('claimed', 'running')
        FOR UPDATE OF j
    )
    UPDATE jobqueue_jobs AS j
    SET status = f.next_status,
        run_at = CASE WHEN f.next_status = 'pending'
                      THEN now() + make_interval(secs => f.delay) ELSE j.run_at END,
        finished_at = CASE WHEN f.next_status = 'pending' THEN NULL ELSE now() END,
        worker_id = CASE WHEN f.next_status = 'pending' THEN NULL ELSE j.worker_id END,
        lease_expires_at = NULL,
        last_error = f.error,
        errors = ",
    push_error!("f.error"),
    "
    FROM f
    WHERE j.id = f.id
    RETURNING j.id, j.status, j.run_at"
);

/// Renews the leases of held jobs. Arrays `$1` ids, `$2` tokens, `$3` lease
/// in seconds. Returns each renewed job with its cancel flag; jobs no longer
/// held under their token are absent.
pub(crate) const JOB_HEARTBEAT_MANY: &str = "
    UPDATE jobqueue_jobs AS j
    SET heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => $3)
    FROM unnest($1::uuid[], $2::int4[]) AS l(id, token)
    WHERE j.id = l.id
      AND j.claim_count = l.token
      AND j.status IN ('claimed', 'running')
    RETURNING j.id, j.cancel_requested";

/// Records progress of one held job: `$1` id, `$2` token, `$3` percent
/// (nullable: unchanged), `$4` stage (nullable: unchanged), `$5` events to add.
/// Marks the job running. Returns its cancel flag.
pub(crate) const JOB_PROGRESS: &str = "
    UPDATE jobqueue_jobs AS j
    SET progress = COALESCE($3, j.progress),
        current_stage = COALESCE($4, j.current_stage),
        events_count = j.events_count + $5,
        status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = $1
      AND j.claim_count = $2
      AND j.status IN ('claimed', 'running')
    RETURNING j.cancel_requested";

/// Cancels job `$1`: a pending job at once, a held one by raising its cancel
/// flag (its handler sees it; its runner finishes it as `cancelled`).
/// Returns the resulting status; no row if the job is finished or unknown.
pub(crate) const JOB_CANCEL: &str = "
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.status = 'pending' THEN 'cancelled' ELSE j.status END,
        finished_at = CASE WHEN j.status = 'pending' THEN now() ELSE j.finished_at END,
        cancel_requested = (j.status <> 'pending')
    WHERE j.id = $1
      AND j.status IN ('pending', 'claimed', 'running')
    RETURNING j.status";

/// Marks held jobs as cancelled (their handler stopped after a cancel request).
/// Arrays `$1` ids, `$2` tokens; returns the ids changed.
pub(crate) const JOB_CANCEL_HELD_MANY: &str = "
    UPDATE jobqueue_jobs AS j
    SET status = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL
    FROM unnest($1::uuid[], $2::int4[]) AS l(id, token)
    WHERE j.id = l.id
      AND j.claim_count = l.token
      AND j.status IN ('claimed', 'running')
    RETURNING j.id";

/// Hands held jobs back without using up an attempt (a runner shutting down
/// before it started them). Arrays `$1` ids, `$2` tokens; returns the ids.
pub(crate) const JOB_RELEASE_MANY: &str = "
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
        finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
        attempts = j.attempts - 1,
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL
    FROM unnest($1::uuid[], $2::int4[]) AS l(id, token)
    WHERE j.id = l.id
      AND j.claim_count = l.token
      AND j.status IN ('claimed', 'running')
    RETURNING j.id";

/// Recovers up to `$1` held jobs whose lease expired before the database's
/// `now()`: back to `pending` while attempts remain, `failed` ("worker lost")
/// on the last attempt, `cancelled` if a cancel was requested. Safe to run
/// from many processes at once (SKIP LOCKED). Returns id and new status.
pub(crate) const JOB_RESCUE_STALE: &str = concat!(
    "WITH stale AS (
        SELECT j.id,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN j.attempts >= j.max_attempts THEN 'failed'
                    ELSE 'pending' END AS next_status,
               format('worker lost: lease of worker %s expired at %s (attempt %s of %s)',
                      j.worker_id, j.lease_expires_at, j.attempts, j.max_attempts) AS error
        FROM jobqueue_jobs AS j
        WHERE j.status IN ('claimed', 'running')
          AND j.lease_expires_at < now()
        ORDER BY j.lease_expires_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    )
    UPDATE jobqueue_jobs AS j
    SET status = stale.next_status,
        finished_at = CASE WHEN stale.next_status = 'pending' THEN NULL ELSE now() END,
        worker_id = CASE WHEN stale.next_status = 'pending' THEN NULL ELSE j.worker_id END,
        lease_expires_at = NULL,
        last_error = stale.error,
        errors = ",
    push_error!("stale.error"),
    "
    FROM stale
    WHERE j.id = stale.id
    RETURNING j.id, j.status"
);

/// Deletes up to `$3` jobs in status `$1` finished more than `$2` seconds ago.
pub(crate) const JOB_PRUNE: &str = "
    WITH doomed AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = $1
          AND finished_at < now() - make_interval(secs => $2)
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jobqueue_jobs AS j
    USING doomed
    WHERE j.id = doomed.id";

/// Counts jobs by queue and status, with the age of the oldest due pending job.
pub(crate) const JOB_STATS: &str = "
    SELECT queue,
           status,
           count(*) AS jobs,
           EXTRACT(EPOCH FROM now() - min(run_at) FILTER (
               WHERE status = 'pending' AND run_at <= now()))::float8 AS oldest_due_secs
    FROM jobqueue_jobs
    GROUP BY queue, status
    ORDER BY queue, status";

/// Counts live jobs (pending, claimed, running) by job type and status: a
/// type nobody handles shows up as pending here.
pub(crate) const JOB_STATS_BY_TYPE: &str = "
    SELECT job_type, status, count(*) AS jobs
    FROM jobqueue_jobs
    WHERE status IN ('pending', 'claimed', 'running')
    GROUP BY job_type, status
    ORDER BY job_type, status";

/// Dead row versions in `jobqueue_jobs`, from the statistics views.
pub(crate) const JOB_DEAD_TUPLES: &str = "
    SELECT coalesce(n_dead_tup, 0) AS dead
    FROM pg_stat_user_tables
    WHERE relid = 'jobqueue_jobs'::regclass";

/// Vacuums the jobs table, unless another session already is.
pub(crate) const JOB_VACUUM: &str = "VACUUM (SKIP_LOCKED) jobqueue_jobs";

/// Reads one job by id.
pub(crate) const JOB_GET: &str = "SELECT * FROM jobqueue_jobs WHERE id = $1";

/// Reads the status of one job by id.
pub(crate) const JOB_GET_STATUS: &str = "SELECT status FROM jobqueue_jobs WHERE id = $1";

/// Puts finished jobs back to `pending`, due now, with their attempts reset
/// (their error history is kept), and wakes their queues. `$1` a job id
/// (failed or cancelled), or null for every failed job; `$2` notify channel.
/// A job whose unique key is held by a live job meanwhile is left alone.
/// Returns the ids requeued.
pub(crate) const JOB_RETRY: &str = "
    WITH requeued AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending',
            run_at = now(),
            attempts = 0,
            finished_at = NULL,
            worker_id = NULL,
            lease_expires_at = NULL,
            cancel_requested = false,
            progress = 0,
            current_stage = NULL
        WHERE CASE WHEN $1::uuid IS NULL THEN j.status = 'failed'
                   ELSE j.id = $1 AND j.status IN ('failed', 'cancelled') END
          AND (j.unique_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM jobqueue_jobs AS live
                WHERE live.unique_key = j.unique_key
                  AND live.status IN ('pending', 'claimed', 'running')))
        RETURNING j.id, j.queue
    ),
    wake AS (
        SELECT count(pg_notify($2, q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM requeued) AS q
    )
    SELECT requeued.id FROM requeued, wake";

// The hot-path statements, run prepared (see `prepared.rs`).
crate::prepared::statements! {
    JobInsert => JOB_INSERT,
    JobInsertQuiet => JOB_INSERT_QUIET,
    JobClaimMany => JOB_CLAIM_MANY,
    JobStartMany => JOB_START_MANY,
    JobCompleteMany => JOB_COMPLETE_MANY,
    JobFailMany => JOB_FAIL_MANY,
    JobReleaseMany => JOB_RELEASE_MANY,
    JobCancelHeldMany => JOB_CANCEL_HELD_MANY,
    JobHeartbeatMany => JOB_HEARTBEAT_MANY,
}
