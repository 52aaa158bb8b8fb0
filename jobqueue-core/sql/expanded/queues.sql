-- Every statement of jobqueue-core/src/sql/queues.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- QUEUE_LOCK_FOR_COUNT
-- Locks the `jobqueue_queues` rows of queues `$1`, in name order (as a
-- claim that honours limits locks them), for the rest of the transaction:
-- the first statement of a count of their held jobs.
    SELECT c.name FROM jobqueue_queues AS c
    WHERE c.name = ANY($1::text[])
    ORDER BY c.name
    FOR NO KEY UPDATE OF c
;

-- QUEUE_COUNT_HELD
-- Counts the held jobs of limited queues `$1` (their rows locked by an
-- earlier statement of the transaction, [`QUEUE_LOCK_FOR_COUNT`], so
-- the count sees every claim of them committed) and keeps the count, with
-- nothing claimed since.
    UPDATE jobqueue_queues AS c
    SET held_counted = (SELECT count(*) FROM jobqueue_jobs AS h
                        WHERE h.queue = c.name AND h.lease_expires_at IS NOT NULL),
        claimed_since = 0
    WHERE c.name = ANY($1::text[])
;

-- QUEUE_ANY_LIMITED
-- Whether any queue among `$1` (all queues if empty) has a global limit
-- or a rate limit: a runner asks every poll interval, to know whether its
-- claims must lock.
    SELECT EXISTS (
        SELECT 1 FROM jobqueue_queues AS c
        WHERE (c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
          AND (cardinality($1::text[]) = 0 OR c.name = ANY($1::text[]))) AS limited
;

-- QUEUE_PAUSE
-- Pauses queue `$1` (creating its row): runners claim nothing from it
-- until it is resumed. Returns whether it was paused already, and whether
-- the queue was known (a row, or a job of any status, names it).
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
    SELECT coalesce((SELECT paused FROM before), false) AS was_paused,
                    (EXISTS (SELECT 1 FROM before)
                     OR EXISTS (SELECT 1 FROM jobqueue_jobs WHERE queue = $1)) AS known,
                    (SELECT count(*) FROM upsert) AS changed
;

-- QUEUE_RESUME
-- Resumes queue `$1` if it has a row, and wakes its runners on channel
-- `$2`. Returns whether it was paused, and whether the queue was known.
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
    SELECT coalesce((SELECT paused FROM before), false) AS was_paused,
                    (EXISTS (SELECT 1 FROM before)
                     OR EXISTS (SELECT 1 FROM jobqueue_jobs WHERE queue = $1)) AS known,
                    (SELECT count(*) FROM wake) AS changed
;

-- QUEUE_SET_LIMIT
-- Sets (or with NULL removes) the global limit `$2` of queue `$1`,
-- creating its row; a lowered limit takes no job back, it only stops
-- claims until fewer are held. Returns whether the queue was known.
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
    SELECT coalesce((SELECT paused FROM before), false) AS was_paused,
                    (EXISTS (SELECT 1 FROM before)
                     OR EXISTS (SELECT 1 FROM jobqueue_jobs WHERE queue = $1)) AS known,
                    (SELECT count(*) FROM wake) AS changed
;

-- QUEUE_SET_RATE
-- Sets (or with NULL `$2` and `$3` removes) the rate limit of queue `$1`,
-- `$2` starts per `$3`, known or not (`known`: a row, a job of any
-- status, a schedule or a runner names it; a setting on a queue nothing
-- names yet waits for its first jobs, as a pause does), and wakes its
-- runners on channel `$4`. The window of recent starts is kept across a change (a lowered
-- limit waits for it to empty) and cleared with the limit. Returns
-- whether the queue was paused, whether it was known, and whether the
-- setting was written.
    WITH before AS (
        SELECT paused FROM jobqueue_queues WHERE name = $1
    ),
    known AS (
        SELECT EXISTS (SELECT 1 FROM before)
               OR EXISTS (SELECT 1 FROM jobqueue_jobs WHERE queue = $1)
               OR EXISTS (SELECT 1 FROM jobqueue_schedules WHERE queue = $1)
               OR EXISTS (SELECT 1 FROM jobqueue_runners WHERE $1 = ANY(queues)) AS known
    ),
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
    )
    SELECT coalesce((SELECT paused FROM before), false) AS was_paused,
           (SELECT known FROM known) AS known,
           (SELECT count(*) FROM wake) AS changed
;

-- QUEUE_SET_KEY_LIMIT
-- Sets (or with NULL `$2` removes) the key limit of queue `$1`: `$2` jobs
-- of one concurrency key admitted at once, one at a time in enqueue order
-- if `$3`, known or not (as [`QUEUE_SET_RATE`]). The jobs its
-- new limit admits are the caller's to admit, in the same transaction
-- (`keys.rs`). Returns whether the queue was paused, whether it was
-- known, and whether the setting was written.
    WITH before AS (
        SELECT paused FROM jobqueue_queues WHERE name = $1
    ),
    known AS (
        SELECT EXISTS (SELECT 1 FROM before)
               OR EXISTS (SELECT 1 FROM jobqueue_jobs WHERE queue = $1)
               OR EXISTS (SELECT 1 FROM jobqueue_schedules WHERE queue = $1)
               OR EXISTS (SELECT 1 FROM jobqueue_runners WHERE $1 = ANY(queues)) AS known
    ),
    upsert AS (
        INSERT INTO jobqueue_queues AS c (name, key_limit, key_ordered)
        VALUES ($1, $2, $3)
        ON CONFLICT (name) DO UPDATE
        SET key_limit = $2, key_ordered = $3, updated_at = now()
        RETURNING c.name
    )
    SELECT coalesce((SELECT paused FROM before), false) AS was_paused,
           (SELECT known FROM known) AS known,
           (SELECT count(*) FROM upsert) AS changed
;

-- QUEUE_LIST
-- Every known queue with its settings, its live jobs (scheduled, pending,
-- unhandled, claimed, running) and its failed ones (the dead letter) by
-- status, and the age of its oldest due job (see `live_counts` and
-- `queue_list`): reads only the indexes of those statuses.
WITH counts AS (SELECT queue, 'pending' AS kind, count(*) AS n,
                EXTRACT(EPOCH FROM now() - min(run_at))::float8 AS oldest_due_secs
         FROM jobqueue_jobs WHERE status = 'pending' GROUP BY queue
         UNION ALL
         SELECT queue, 'scheduled', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'scheduled' GROUP BY queue
         UNION ALL
         SELECT queue, 'waiting', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'waiting' GROUP BY queue
         UNION ALL
         SELECT queue, 'blocked', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'blocked' GROUP BY queue
         UNION ALL
         SELECT queue, 'unhandled', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'unhandled' GROUP BY queue
         UNION ALL
         SELECT queue, status, count(*), NULL
         FROM jobqueue_jobs WHERE lease_expires_at IS NOT NULL GROUP BY queue, status
         UNION ALL
         SELECT queue, 'failed', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'failed' GROUP BY queue),
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
            ORDER BY names.name, counts.kind
;

-- QUEUE_LIST_HISTORY
-- [`QUEUE_LIST`] with every job counted, the finished history included:
-- a scan of the whole table (`jobqueue stats --history`).
WITH counts AS (SELECT queue, status AS kind, count(*) AS n,
            EXTRACT(EPOCH FROM now() - min(run_at) FILTER (
                WHERE status = 'pending'))::float8 AS oldest_due_secs
     FROM jobqueue_jobs
     GROUP BY queue, status),
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
            ORDER BY names.name, counts.kind
;

-- QUEUE_DECLARE_ROW
-- Gives queue `$1` a row unless it has one, so that the next statement
-- can lock it (a declared queue is known from then on).
    INSERT INTO jobqueue_queues (name) VALUES ($1)
    ON CONFLICT (name) DO NOTHING
;

-- QUEUE_DECLARED_LOCK
-- Locks queue `$1`'s row for the rest of the transaction and reads what
-- the code last declared of its settings (`declared`, as text): two
-- runners that start at once apply a changed declaration once.
    SELECT declared::text AS declared FROM jobqueue_queues
    WHERE name = $1
    FOR NO KEY UPDATE
;

-- QUEUE_DECLARED_SET
-- Records `$2` (JSON) as what the code declared of queue `$1`'s settings.
    UPDATE jobqueue_queues SET declared = $2::jsonb, updated_at = now()
    WHERE name = $1
;
