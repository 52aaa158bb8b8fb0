//! The statements of `jobqueue_queues`: a queue's pause and global limit,
//! and the claim's bookkeeping of its limited queues.
//!
//! A queue has a row only once something was set on it (paused, limited);
//! a queue without one is running and unlimited. The statements rely on
//! the primary key `name`, on `paused`/`paused_at`, and on `global_limit`
//! with `held_counted` and `claimed_since` (what bounds a limited queue's
//! held jobs between counts). They count held jobs through
//! `jobqueue_jobs_lease_idx` (`queue, lease_expires_at` of the held jobs).
//! [`QUEUE_LIST`] also names the queues of `jobqueue_schedules` and
//! `jobqueue_runners`. The claims lock and note their limited queues' rows
//! themselves (`lock_limited!` and `note_limited!` in `jobs/claim.rs`).

/// Locks the `jobqueue_queues` rows of queues `$1`, in name order (as a
/// claim that honours limits locks them), for the rest of the transaction:
/// the first statement of a count of their held jobs.
pub(crate) const QUEUE_LOCK_FOR_COUNT: &str = "
    SELECT c.name FROM jobqueue_queues AS c
    WHERE c.name = ANY($1::text[])
    ORDER BY c.name
    FOR NO KEY UPDATE OF c";

/// Counts the held jobs of limited queues `$1` (their rows locked by an
/// earlier statement of the transaction, [`QUEUE_LOCK_FOR_COUNT`], so
/// the count sees every claim of them committed) and keeps the count, with
/// nothing claimed since.
pub(crate) const QUEUE_COUNT_HELD: &str = "
    UPDATE jobqueue_queues AS c
    SET held_counted = (SELECT count(*) FROM jobqueue_jobs AS h
                        WHERE h.queue = c.name AND h.lease_expires_at IS NOT NULL),
        claimed_since = 0
    WHERE c.name = ANY($1::text[])";

/// Whether any queue among `$1` (all queues if empty) has a global limit
/// or a rate limit: a runner asks every poll interval, to know whether its
/// claims must lock.
pub(crate) const QUEUE_ANY_LIMITED: &str = "
    SELECT EXISTS (
        SELECT 1 FROM jobqueue_queues AS c
        WHERE (c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
          AND (cardinality($1::text[]) = 0 OR c.name = ANY($1::text[]))) AS limited";

/// The end of the queue-settings statements: whether queue `$1` was
/// paused before (CTE `before`: its row, if any), whether it was known (a
/// row, or a job of any status), and how many rows CTE `$written` wrote.
macro_rules! queue_change {
    ($written:literal) => {
        concat!(
            "SELECT coalesce((SELECT paused FROM before), false) AS was_paused,
                    (EXISTS (SELECT 1 FROM before)
                     OR EXISTS (SELECT 1 FROM jobqueue_jobs WHERE queue = $1)) AS known,
                    (SELECT count(*) FROM ",
            $written,
            ") AS changed"
        )
    };
}

/// Pauses queue `$1` (creating its row): runners claim nothing from it
/// until it is resumed. Returns whether it was paused already, and whether
/// the queue was known (a row, or a job of any status, names it).
pub(crate) const QUEUE_PAUSE: &str = concat!(
    "
    WITH before AS (
        SELECT paused FROM jobqueue_queues WHERE name = $1
    ),
    upsert AS (
        INSERT INTO jobqueue_queues AS c (name, paused, paused_at)
        VALUES ($1, true, now())
        ON CONFLICT (name) DO UPDATE
        SET paused = true,
            paused_at = CASE WHEN c.paused THEN c.paused_at ELSE now() END,
            updated_at = now()
        RETURNING c.name
    )
    ",
    queue_change!("upsert")
);

/// Resumes queue `$1` if it has a row, and wakes its runners on channel
/// `$2`. Returns whether it was paused, and whether the queue was known.
pub(crate) const QUEUE_RESUME: &str = concat!(
    "
    WITH before AS (
        SELECT paused FROM jobqueue_queues WHERE name = $1 FOR UPDATE
    ),
    updated AS (
        UPDATE jobqueue_queues AS c
        SET paused = false, paused_at = NULL, updated_at = now()
        WHERE c.name = $1 AND c.paused
        RETURNING c.name
    ),
    wake AS (
        SELECT pg_notify($2, name) FROM updated
    )
    ",
    queue_change!("wake")
);

/// Sets (or with NULL removes) the global limit `$2` of queue `$1`,
/// creating its row; a lowered limit takes no job back, it only stops
/// claims until fewer are held. Returns whether the queue was known.
pub(crate) const QUEUE_SET_LIMIT: &str = concat!(
    "
    WITH before AS (
        SELECT paused FROM jobqueue_queues WHERE name = $1
    ),
    upsert AS (
        INSERT INTO jobqueue_queues AS c (name, global_limit)
        VALUES ($1, $2)
        ON CONFLICT (name) DO UPDATE
        SET global_limit = $2, held_counted = NULL, claimed_since = 0, updated_at = now()
        RETURNING c.name
    ),
    wake AS (
        SELECT pg_notify($3, name) FROM upsert
    )
    ",
    queue_change!("wake")
);

/// The start of a setting that needs queue `$1` known: CTEs `before`
/// (its row, if any) and `known` (a row, a job of any status, a schedule
/// or a runner names it), and a comma.
macro_rules! known_queue {
    () => {
        "
    WITH before AS (
        SELECT paused FROM jobqueue_queues WHERE name = $1
    ),
    known AS (
        SELECT EXISTS (SELECT 1 FROM before)
               OR EXISTS (SELECT 1 FROM jobqueue_jobs WHERE queue = $1)
               OR EXISTS (SELECT 1 FROM jobqueue_schedules WHERE queue = $1)
               OR EXISTS (SELECT 1 FROM jobqueue_runners WHERE $1 = ANY(queues)) AS known
    ),"
    };
}

/// The end of a `known_queue!` setting: whether the queue was paused,
/// whether it was known, and how many rows CTE `$written` wrote.
macro_rules! known_queue_change {
    ($written:literal) => {
        concat!(
            "
    SELECT coalesce((SELECT paused FROM before), false) AS was_paused,
           (SELECT known FROM known) AS known,
           (SELECT count(*) FROM ",
            $written,
            ") AS changed"
        )
    };
}

/// Sets (or with NULL `$2` and `$3` removes) the rate limit of queue `$1`,
/// `$2` starts per `$3`, known or not (`known`: a row, a job of any
/// status, a schedule or a runner names it; a setting on a queue nothing
/// names yet waits for its first jobs, as a pause does), and wakes its
/// runners on channel `$4`. The window of recent starts is kept across a change (a lowered
/// limit waits for it to empty) and cleared with the limit. Returns
/// whether the queue was paused, whether it was known, and whether the
/// setting was written.
pub(crate) const QUEUE_SET_RATE: &str = concat!(
    known_queue!(),
    "
    upsert AS (
        INSERT INTO jobqueue_queues AS c (name, rate_starts, rate_period)
        VALUES ($1, $2, $3)
        ON CONFLICT (name) DO UPDATE
        SET rate_starts = $2, rate_period = $3,
            rate_at = CASE WHEN $2 IS NULL THEN '{}' ELSE c.rate_at END,
            rate_jobs = CASE WHEN $2 IS NULL THEN '{}' ELSE c.rate_jobs END,
            updated_at = now()
        RETURNING c.name
    ),
    wake AS (
        SELECT pg_notify($4, name) FROM upsert
    )",
    known_queue_change!("wake")
);

/// Sets (or with NULL `$2` removes) the key limit of queue `$1`: `$2` jobs
/// of one concurrency key admitted at once, one at a time in enqueue order
/// if `$3`, known or not (as [`QUEUE_SET_RATE`]). The jobs its
/// new limit admits are the caller's to admit, in the same transaction
/// (`keys.rs`). Returns whether the queue was paused, whether it was
/// known, and whether the setting was written.
pub(crate) const QUEUE_SET_KEY_LIMIT: &str = concat!(
    known_queue!(),
    "
    upsert AS (
        INSERT INTO jobqueue_queues AS c (name, key_limit, key_ordered)
        VALUES ($1, $2, $3)
        ON CONFLICT (name) DO UPDATE
        SET key_limit = $2, key_ordered = $3, updated_at = now()
        RETURNING c.name
    )",
    known_queue_change!("upsert")
);

/// Every known queue (with a row, jobs counted by `$counts`, a schedule,
/// or a runner that names it), with its settings: one row per queue and
/// status counted (`status`, `jobs`, and on the `pending` row
/// `oldest_due_secs`), or one row with a null status for a queue with
/// none. A queue with a key limit also counts its keys with admitted,
/// unfinished jobs (`keys_held`, through `jobqueue_jobs_key_held_idx`).
/// `$counts` gives rows of `queue`, `kind` (a status), `n` and
/// `oldest_due_secs`, as `live_counts` does.
macro_rules! queue_list {
    ($($counts:tt)+) => {
        concat!(
            "WITH counts AS (",
            $($counts)+,
            "),
            names AS (
                SELECT name FROM jobqueue_queues
                UNION
                SELECT queue FROM counts
                UNION
                SELECT queue FROM jobqueue_schedules
                UNION
                SELECT unnest(queues) FROM jobqueue_runners
            )
            SELECT names.name AS queue,
                   coalesce(c.paused, false) AS paused,
                   EXTRACT(EPOCH FROM now() - c.paused_at)::float8 AS paused_secs,
                   c.global_limit,
                   c.rate_starts,
                   EXTRACT(EPOCH FROM c.rate_period)::float8 AS rate_secs,
                   (SELECT sum(r.jobs) FROM unnest(c.rate_at, c.rate_jobs) AS r(at, jobs)
                    WHERE r.at > now() - c.rate_period)::int8 AS rate_used,
                   EXTRACT(EPOCH FROM c.backoff_until - now())::float8 AS backoff_secs,
                   c.key_limit,
                   coalesce(c.key_ordered, false) AS key_ordered,
                   c.declared::text AS declared,
                   (SELECT count(DISTINCT h.concurrency_key) FROM jobqueue_jobs AS h
                    WHERE c.key_limit IS NOT NULL AND h.queue = names.name
                      AND h.concurrency_key IS NOT NULL
                      AND h.status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running')
                   )::int8 AS keys_held,
                   counts.kind AS status,
                   counts.n AS jobs,
                   counts.oldest_due_secs
            FROM names
            LEFT JOIN jobqueue_queues AS c ON c.name = names.name
            LEFT JOIN counts ON counts.queue = names.name
            ORDER BY names.name, counts.kind"
        )
    };
}

/// Every known queue with its settings, its live jobs (scheduled, pending,
/// unhandled, claimed, running) and its failed ones (the dead letter) by
/// status, and the age of its oldest due job (see `live_counts` and
/// `queue_list`): reads only the indexes of those statuses.
pub(crate) const QUEUE_LIST: &str = queue_list!(live_counts!());

/// [`QUEUE_LIST`] with every job counted, the finished history included:
/// a scan of the whole table (`jobqueue stats --history`).
pub(crate) const QUEUE_LIST_HISTORY: &str = queue_list!(
    "SELECT queue, status AS kind, count(*) AS n,
            EXTRACT(EPOCH FROM now() - min(run_at) FILTER (
                WHERE status = 'pending'))::float8 AS oldest_due_secs
     FROM jobqueue_jobs
     GROUP BY queue, status"
);

/// Gives queue `$1` a row unless it has one, so that the next statement
/// can lock it (a declared queue is known from then on).
pub(crate) const QUEUE_DECLARE_ROW: &str = "
    INSERT INTO jobqueue_queues (name) VALUES ($1)
    ON CONFLICT (name) DO NOTHING";

/// Locks queue `$1`'s row for the rest of the transaction and reads what
/// the code last declared of its settings (`declared`, as text): two
/// runners that start at once apply a changed declaration once.
pub(crate) const QUEUE_DECLARED_LOCK: &str = "
    SELECT declared::text AS declared FROM jobqueue_queues
    WHERE name = $1
    FOR NO KEY UPDATE";

/// Records `$2` (JSON) as what the code declared of queue `$1`'s settings.
pub(crate) const QUEUE_DECLARED_SET: &str = "
    UPDATE jobqueue_queues SET declared = $2::jsonb, updated_at = now()
    WHERE name = $1";
