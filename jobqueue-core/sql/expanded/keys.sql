-- Every statement of jobqueue-core/src/sql/keys.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- KEY_LOCK
-- Takes, until the end of the transaction, the admission lock of each
-- queue of arrays `$1` (queues) and `$2` (keys), in name order (so two
-- admissions never wait on each other in a circle), then tries the lock
-- of each key (`key_lock!`). Returns the keys it got: `queue`, `key`.
WITH queues AS MATERIALIZED (
        SELECT count(pg_advisory_xact_lock(1785817977, hashtext(q.queue)))::int8 AS n
        FROM (SELECT DISTINCT queue FROM unnest($1::text[]) AS a(queue) ORDER BY queue) AS q
    ),
    asked AS MATERIALIZED (
        SELECT DISTINCT a.queue, a.key FROM unnest($1::text[], $2::text[]) AS a(queue, key)
        ORDER BY a.queue, a.key
    )
    SELECT asked.queue, asked.key
    FROM queues CROSS JOIN asked
    WHERE queues.n >= 0 AND pg_try_advisory_xact_lock(1785817964, hashtext(asked.queue || '/' || (hashtext(asked.key) & 255)::text))
    ORDER BY asked.queue, asked.key
;

-- KEY_LOCK_FOR_INSERT
-- Of arrays `$1` (queues) and `$2` (keys), the keys of queues with a key
-- limit, each once, with whether this transaction got its lock
-- (`key_lock!`, tried in (queue, key) order): `queue`, `key`, `locked`.
-- None is locked unless the transaction is READ COMMITTED (a later
-- statement of a transaction of another level would not see the
-- admissions committed before the lock). Run before an insert, then
-- [`KEY_ROOM_FOR_INSERT`] of its rows.
WITH limited AS MATERIALIZED (
        SELECT DISTINCT a.queue, a.key
        FROM unnest($1::text[], $2::text[]) AS a(queue, key)
        JOIN jobqueue_queues AS q ON q.name = a.queue AND q.key_limit IS NOT NULL
        WHERE a.key IS NOT NULL
        ORDER BY a.queue, a.key
    )
    SELECT limited.queue, limited.key,
           CASE WHEN current_setting('transaction_isolation') = 'read committed'
                THEN pg_try_advisory_xact_lock(1785817964, hashtext(limited.queue || '/' || (hashtext(limited.key) & 255)::text)) ELSE false END AS locked
    FROM limited
    ORDER BY limited.queue, limited.key
;

-- KEY_ROOM_FOR_INSERT
-- What an enqueue's insert admits by, for each key of arrays `$1`
-- (queues), `$2` (keys) and `$3` (whether the enqueue got the key's lock),
-- the rows of [`KEY_LOCK_FOR_INSERT`], in a later statement of the same
-- transaction (so its snapshot sees every admission committed before the
-- lock): `queue`, `key`; `waits`, whether a due job of the key waits (the
-- new ones line up behind it); and `room`, how many of the key's jobs the
-- insert may admit: null when the enqueue did not get the lock or any job
-- of the key waits; in a queue kept in order, 1 when the key has no
-- holder, else 0; in another, its key limit less its holders.
--
-- Run planned for the table as it is at each run, never kept prepared:
-- a plan kept from a nearly empty table may count a key's holders by
-- reading the whole table for each key. A key's line is probed with a
-- `LATERAL` and a limit, which the planner cannot turn into a hash of
-- every waiting job (an `EXISTS` it can: 400 ms per enqueue of 10,000
-- keys with 190,000 jobs waiting); its due jobs only when it has a line.
SELECT a.queue, a.key, due_line.id IS NOT NULL AS waits,
           (CASE WHEN NOT a.locked OR line.id IS NOT NULL THEN NULL
                 WHEN q.key_ordered THEN (CASE WHEN (SELECT count(*) FROM jobqueue_jobs AS h
              WHERE h.queue = a.queue AND h.concurrency_key = a.key
                AND h.concurrency_key IS NOT NULL
                AND h.status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running')) = 0 THEN 1 ELSE 0 END)
                 ELSE q.key_limit - (SELECT count(*) FROM jobqueue_jobs AS h
              WHERE h.queue = a.queue AND h.concurrency_key = a.key
                AND h.concurrency_key IS NOT NULL
                AND h.status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running')) END)::int4 AS room
    FROM unnest($1::text[], $2::text[], $3::bool[]) AS a(queue, key, locked)
    JOIN jobqueue_queues AS q ON q.name = a.queue AND q.key_limit IS NOT NULL
    LEFT JOIN LATERAL (
        SELECT w.id FROM jobqueue_jobs AS w
        WHERE w.status = 'waiting' AND w.queue = a.queue AND w.concurrency_key = a.key
        LIMIT 1
    ) AS line ON true
    LEFT JOIN LATERAL (
        SELECT w.id FROM jobqueue_jobs AS w
        WHERE line.id IS NOT NULL
          AND w.status = 'waiting' AND w.queue = a.queue AND w.concurrency_key = a.key
          AND w.run_at <= now()
        LIMIT 1
    ) AS due_line ON true
;

-- KEY_RECHECK
-- Marks the first waiting job of each key of arrays `$1` (queues) and
-- `$2` (keys) as not looked at (`key_checked` null): keys an admission
-- did not get the lock of, for the next pass of new jobs to look at.
    UPDATE jobqueue_jobs AS j SET key_checked = NULL
    FROM (SELECT DISTINCT queue, key FROM unnest($1::text[], $2::text[]) AS a(queue, key)) AS a
    CROSS JOIN LATERAL (
        SELECT w.id FROM jobqueue_jobs AS w
        WHERE w.status = 'waiting' AND w.queue = a.queue AND w.concurrency_key = a.key
        ORDER BY w.id
        LIMIT 1
    ) AS head
    WHERE j.id = head.id AND j.key_checked
;

-- KEY_ADMIT
-- Admits, for each key of arrays `$1` (queues) and `$2` (keys), its
-- oldest waiting jobs (by id: enqueue order) up to its queue's key limit
-- less its holders; all of them when the queue has no key limit (any
-- more: it was removed). An ordered queue admits the head of each key's
-- line whatever its `run_at` (the jobs behind it wait for it); another
-- only the due ones. An admitted job becomes `pending`, or `scheduled`
-- while its `run_at` is ahead. Wakes the queues that got due jobs on
-- channel `$3`. Run after [`KEY_LOCK`] of the keys, in the same
-- transaction, and only for keys whose lock it got. Returns how many jobs
-- it admitted.
WITH asked AS (
        SELECT DISTINCT a.queue, a.key FROM unnest($1::text[], $2::text[]) AS a(queue, key)
    ),
    room AS (
        SELECT asked.queue, asked.key, coalesce(c.key_ordered, false) AS ordered,
               CASE WHEN c.key_limit IS NULL THEN 2147483647
                    ELSE c.key_limit - (SELECT count(*) FROM jobqueue_jobs AS h
              WHERE h.queue = asked.queue AND h.concurrency_key = asked.key
                AND h.concurrency_key IS NOT NULL
                AND h.status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running')) END AS n
        FROM asked
        LEFT JOIN jobqueue_queues AS c ON c.name = asked.queue
    ),
    picked AS (
        SELECT w.id
        FROM room
        CROSS JOIN LATERAL (
            SELECT w.id FROM jobqueue_jobs AS w
            WHERE w.status = 'waiting' AND w.queue = room.queue AND w.concurrency_key = room.key
              AND (room.ordered OR w.run_at <= now())
            ORDER BY w.id
            LIMIT greatest(room.n, 0)
        ) AS w
    ),
    admitted AS (
        UPDATE jobqueue_jobs AS j
        SET status = CASE WHEN j.run_at <= now() THEN 'pending' ELSE 'scheduled' END,
            key_checked = NULL
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (CASE WHEN j.status = 'waiting' THEN true END)
        RETURNING j.queue, j.status
    ),
    wake AS (
        SELECT count(pg_notify($3, q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM admitted WHERE status = 'pending') AS q
    )
    SELECT count(*)::int8 AS n FROM admitted, wake
;

-- KEY_MARK_CHECKED
-- Marks the jobs of `$1` (ids) still waiting as looked at by an
-- admission (`key_checked`): after [`KEY_ADMIT`] of their keys, in the
-- same transaction, so the jobs it admitted are no longer waiting.
UPDATE jobqueue_jobs AS j SET key_checked = true
    WHERE j.id = ANY($1::uuid[]) AND (CASE WHEN j.status = 'waiting' THEN true END)
;

-- KEY_WITH_WAITING
-- The keys of arrays `$1` (queues) and `$2` (keys) that have waiting
-- jobs, each once: `queue`, `key`. Read without the admission lock: a job
-- that starts waiting after this read is new, and an admission pass of
-- new jobs looks at it. One probe of a key's line per key (a `LATERAL`
-- with a limit, which the planner cannot turn into a join that reads
-- every waiting job, as it would with statistics that call the table
-- empty).
    SELECT a.queue, a.key
    FROM (SELECT DISTINCT queue, key FROM unnest($1::text[], $2::text[]) AS u(queue, key)) AS a
    CROSS JOIN LATERAL (
        SELECT 1 FROM jobqueue_jobs AS w
        WHERE w.status = 'waiting' AND w.queue = a.queue AND w.concurrency_key = a.key
        LIMIT 1
    ) AS line
;

-- KEY_NEW
-- Up to `$2` waiting jobs no admission looked at yet that are due, of the
-- queues in `$1` (every queue if empty), after the position `$3` (queue),
-- `$4` (due at), `$5` (id) (from the first when they are null): `id`,
-- `queue`, `key`, `run_at`. The position lets a pass page past jobs whose
-- key it could not lock (an enqueue of the key is open): they stay not
-- looked at, and a read from the first would find them again.
--
-- Of every queue, soonest due first (`jobqueue_jobs_key_new_idx`, by
-- `run_at`: the read ends at the first job not due; the queue of the
-- position goes unused); of named queues, queue by queue, each soonest due
-- first (`jobqueue_jobs_key_new_queue_idx`, by queue and `run_at`: one
-- range per named queue, never a read past another queue's new jobs).
-- Only one of the two parts reads anything, as `$1` is empty or not.
    SELECT id, queue, key, run_at FROM (
        (SELECT id, queue, concurrency_key AS key, run_at
         FROM jobqueue_jobs
         WHERE cardinality($1::text[]) = 0
           AND status = 'waiting' AND key_checked IS NOT TRUE AND run_at <= now()
           AND (run_at, id) > (coalesce($4::timestamptz, '-infinity'),
                               coalesce($5::uuid, '00000000-0000-0000-0000-000000000000'))
         ORDER BY run_at, id
         LIMIT $2)
        UNION ALL
        (SELECT n.id, n.queue, n.key, n.run_at
         FROM (SELECT DISTINCT queue FROM unnest($1::text[]) AS u(queue)) AS q
         CROSS JOIN LATERAL (
             SELECT id, queue, concurrency_key AS key, run_at
             FROM jobqueue_jobs
             WHERE queue = q.queue
               AND status = 'waiting' AND key_checked IS NOT TRUE AND run_at <= now()
               AND (queue, run_at, id) > (coalesce($3::text, ''),
                                          coalesce($4::timestamptz, '-infinity'),
                                          coalesce($5::uuid, '00000000-0000-0000-0000-000000000000'))
             ORDER BY run_at, id
             LIMIT $2
         ) AS n)
    ) AS page
    ORDER BY CASE WHEN cardinality($1::text[]) = 0 THEN '' ELSE queue END, run_at, id
    LIMIT $2
;

-- KEY_SWEEP
-- The keys with waiting jobs, of the queues in `$3` (every queue if
-- empty), after key `$2` of queue `$1` (from the first if `$1` is null),
-- at most `$4`, in (queue, key) order: `queue`, `key`, and whether the
-- key has room (fewer holders than its queue's key limit, or no limit).
-- One index descent per key (`next_waiting_key!`, a skip scan, from a
-- first row that is the position itself, left out of the result): a page
-- costs its keys, not the jobs waiting in their lines.
WITH RECURSIVE keys AS (
        SELECT coalesce($1::text, '') AS queue, coalesce($2::text, '') AS key, 0 AS n
        UNION ALL
        SELECT f.queue, f.key, k.n + 1
        FROM keys AS k
        CROSS JOIN LATERAL (SELECT * FROM (
            (SELECT w.queue, w.concurrency_key AS key FROM jobqueue_jobs AS w
             WHERE w.status = 'waiting' AND w.queue = k.queue AND w.concurrency_key > k.key
               AND (cardinality($3::text[]) = 0 OR k.queue = ANY($3::text[]))
             ORDER BY w.concurrency_key LIMIT 1)
            UNION ALL
            (SELECT w.queue, w.concurrency_key FROM jobqueue_jobs AS w
             WHERE cardinality($3::text[]) = 0 AND w.status = 'waiting' AND w.queue > k.queue
             ORDER BY w.queue, w.concurrency_key LIMIT 1)
            UNION ALL
            (SELECT h.queue, h.key
             FROM (SELECT DISTINCT l.queue FROM unnest($3::text[]) AS l(queue)
                   WHERE l.queue > k.queue ORDER BY l.queue) AS l
             CROSS JOIN LATERAL (
                 SELECT w.queue, w.concurrency_key AS key FROM jobqueue_jobs AS w
                 WHERE w.status = 'waiting' AND w.queue = l.queue
                 ORDER BY w.concurrency_key LIMIT 1
             ) AS h
             LIMIT 1)
        ) AS c LIMIT 1) AS f
        WHERE k.n < $4
    )
    SELECT k.queue, k.key,
           (c.key_limit IS NULL OR c.key_limit > (SELECT count(*) FROM jobqueue_jobs AS h
              WHERE h.queue = k.queue AND h.concurrency_key = k.key
                AND h.concurrency_key IS NOT NULL
                AND h.status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running'))) AS has_room
    FROM keys AS k
    LEFT JOIN jobqueue_queues AS c ON c.name = k.queue
    WHERE k.n > 0
    ORDER BY k.queue, k.key
;

-- KEY_ANY_WAITING
-- Whether any job of the queues in `$1` (every queue if empty) waits for
-- its key's room: `waiting`. One probe of the waiting jobs' index.
    SELECT EXISTS (
        SELECT 1 FROM jobqueue_jobs
        WHERE status = 'waiting'
          AND (cardinality($1::text[]) = 0 OR queue = ANY($1::text[]))
    ) AS waiting
;

-- KEY_WAITING_OF_QUEUE
-- The keys of queue `$1` with waiting jobs (`queue`, `key`): what a
-- change of its key limit admits from.
    SELECT DISTINCT queue, concurrency_key AS key
    FROM jobqueue_jobs
    WHERE status = 'waiting' AND queue = $1
;
