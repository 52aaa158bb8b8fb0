-- Every statement of jobqueue-core/src/sql/jobs.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- JOB_INSERT
-- Inserts one job and wakes its queue; returns its id, or no row if a live
-- job holds its unique key.
--
-- `$1` id, `$2` job_type, `$3` queue, `$4` priority, `$5` payload (JSON text),
-- `$6` max_attempts, `$7` run_at (nullable), `$8` delay in seconds (used when
-- `$7` is null), `$9` unique_key (nullable), `$10` notify channel, `$11`
-- whether to notify, `$12` traceparent (nullable), `$13` concurrency key
-- (nullable), `$14` whether a due job of its key waits, `$15` its key's
-- room (nullable; both as the enqueue found them, see
-- `KEY_ROOM_FOR_INSERT` in `keys.rs`, and `status_at_insert!`).
WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, unique_key,
             traceparent, concurrency_key, key_checked)
        SELECT $1, $2, $3, $4, CAST($5 AS jsonb), $6, t.run_at, CASE WHEN $13::text IS NULL OR NOT EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = $3 AND kq.key_limit IS NOT NULL)
                  THEN (CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END)
              WHEN $15::int4 IS NOT NULL
                   AND (SELECT CASE WHEN kq.key_ordered THEN 1 <= $15::int4
                                    ELSE t.run_at <= now() AND 1 <= $15::int4 END
                        FROM jobqueue_queues AS kq WHERE kq.name = $3)
                  THEN (CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END)
              ELSE 'waiting' END, $9, $12, $13, CASE WHEN $13::text IS NOT NULL AND t.run_at <= now() AND (1 > 1 OR $14::bool) THEN true END
        FROM (SELECT COALESCE($7, now() + make_interval(secs => $8)) AS run_at) AS t
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running') DO NOTHING
        RETURNING id, queue, status),
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
        FROM inserted, wake
;

-- JOB_INSERT_QUIET
-- Inserts one job without a unique key and without waking anyone (the
-- common case under load, when the notification is debounced): `$1` to
-- `$8` as in [`JOB_INSERT`], `$9` traceparent (nullable).
INSERT INTO jobqueue_jobs
        (id, job_type, queue, priority, payload, max_attempts, run_at, status, traceparent)
    SELECT $1, $2, $3, $4, CAST($5 AS jsonb), $6, t.run_at, CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END, $9
    FROM (SELECT COALESCE($7, now() + make_interval(secs => $8)) AS run_at) AS t
;

-- JOB_INSERT_MANY
-- Inserts many jobs in one statement from parallel arrays (same order as
-- [`JOB_INSERT`]'s parameters; `$12`, the one traceparent of them all;
-- `$13` the concurrency keys; `$14` and `$15` each job's key's waiting and
-- room) and wakes their queues; returns the ids actually inserted.
WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, unique_key,
             traceparent, concurrency_key, key_checked)
        SELECT t.id, t.job_type, t.queue, t.priority, CAST(t.payload AS jsonb), t.max_attempts,
               t.run_at, CASE WHEN t.concurrency_key IS NULL OR NOT EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = t.queue AND kq.key_limit IS NOT NULL)
                  THEN (CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END)
              WHEN t.key_room IS NOT NULL
                   AND (SELECT CASE WHEN kq.key_ordered THEN t.key_seat <= t.key_room
                                    ELSE t.run_at <= now() AND t.key_rank <= t.key_room END
                        FROM jobqueue_queues AS kq WHERE kq.name = t.queue)
                  THEN (CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END)
              ELSE 'waiting' END, t.unique_key, $12::text, t.concurrency_key, CASE WHEN t.concurrency_key IS NOT NULL AND t.run_at <= now() AND (t.key_rank > 1 OR t.key_waits) THEN true END
        FROM (SELECT r.*,
                     row_number() OVER (PARTITION BY r.queue, r.concurrency_key,
                                                     r.run_at <= now()
                                        ORDER BY r.id) AS key_rank,
                     row_number() OVER (PARTITION BY r.queue, r.concurrency_key
                                        ORDER BY r.id) AS key_seat
              FROM (SELECT u.id, u.job_type, u.queue, u.priority, u.payload, u.max_attempts,
                           COALESCE(u.run_at, now() + make_interval(secs => u.delay)) AS run_at,
                           u.unique_key, u.concurrency_key, u.key_waits, u.key_room
                    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int4[], $5::text[],
                                $6::int4[], $7::timestamptz[], $8::float8[], $9::text[],
                                $13::text[], $14::bool[], $15::int4[])
                         AS u(id, job_type, queue, priority, payload, max_attempts, run_at, delay,
                              unique_key, concurrency_key, key_waits, key_room)) AS r) AS t
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running') DO NOTHING
        RETURNING id, queue, status),
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
        FROM inserted, wake
;

-- JOB_LIVE_HOLDERS
-- The live jobs holding the unique keys in `$1`: `(unique_key, id)`, one
-- row per key held (through the partial unique index on live keys).
SELECT unique_key, id FROM jobqueue_jobs WHERE unique_key = ANY($1) AND unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running')
;

-- JOB_NOTIFY_QUEUES
-- Wakes the queues in `$2` (distinct names) on channel `$1`: after a `COPY`.
SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q
;

-- JOB_CLAIM_QUEUES
-- Claims up to `$2` due jobs from the queues named in `$1` (distinct
-- names), for worker `$3`, lease `$4` seconds: see `claim_from_ready!`.
-- Queues without due jobs take no part of the claim. `$7` to `$10`
-- (queue, priority, run_at, id) are resume points, at most one per queue:
-- whether a queue that has one has due jobs is looked up in the same
-- three ranges.
WITH limited AS (SELECT NULL::text AS name, NULL::int8 AS room WHERE false),
    named AS (
        SELECT q.queue, w.priority AS after_priority, w.run_at AS after_run_at,
               w.id AS after_id
        FROM unnest($1::text[]) AS q(queue)
        LEFT JOIN unnest($7::text[], $8::int4[], $9::timestamptz[], $10::uuid[])
                  AS w(queue, priority, run_at, id)
               ON w.queue = q.queue
    ),
    found AS (
        SELECT n.* FROM named AS n
        WHERE EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE n.after_priority IS NULL
                        AND p.status = 'pending' AND p.queue = n.queue)
           OR EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue = n.queue
                        AND p.priority > n.after_priority)
           OR EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue = n.queue
                        AND p.priority = n.after_priority
                        AND (p.run_at, p.id) > (n.after_run_at, n.after_id))
           OR EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue = n.queue
                        AND p.priority < n.after_priority)
    ),
    ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room
            FROM found AS f
            LEFT JOIN jobqueue_queues AS c ON c.name = f.queue
            LEFT JOIN unnest($5::text[], $6::int8[]) AS r(queue, room) ON r.queue = f.queue
            LEFT JOIN limited AS l ON l.name = f.queue
            WHERE c.paused IS NOT TRUE
              AND NOT coalesce(c.backoff_until > now(), false)
              AND least($2::int8, r.room, l.room) > 0
              AND ((c.global_limit IS NULL AND c.rate_starts IS NULL) OR l.name IS NOT NULL)
        ),
        share AS (
            SELECT ceil($2::float8 / greatest(count(*), 1))::int8 AS n FROM ready
        ),
        quota AS (
            SELECT ready.queue, ready.after_priority, ready.after_run_at, ready.after_id,
                   least(share.n, ready.room) AS n
            FROM ready CROSS JOIN share
        ),
        picked AS (
            SELECT c.id,
                   cardinality($12::text[]) = 0 OR c.job_type = ANY($12::text[]) AS handled
            FROM quota
            CROSS JOIN LATERAL (
                SELECT from_start.id, from_start.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND quota.after_priority IS NULL
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS from_start
                UNION ALL
                SELECT higher.id, higher.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority > quota.after_priority
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS higher
                UNION ALL
                SELECT after_point.id, after_point.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority = quota.after_priority
                      AND (p.run_at, p.id) > (quota.after_run_at, quota.after_id)
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS after_point
                UNION ALL
                SELECT lower.id, lower.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority < quota.after_priority
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS lower
                LIMIT quota.n
            ) AS c
            LIMIT $2
        ),
        claimed AS (
            UPDATE jobqueue_jobs AS j
            SET status = 'claimed',
                worker_id = $3,
                attempts = j.attempts + 1,
                claim_count = j.claim_count + 1,
                claimed_at = statement_timestamp(),
                heartbeat_at = statement_timestamp(),
                lease_expires_at = statement_timestamp() + make_interval(secs => $4),
                started_at = NULL,
                progress = 0,
                current_stage = NULL
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE handled))
            RETURNING j.*
        ),
        set_aside AS (
            UPDATE jobqueue_jobs AS j
            SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; set aside until a runner that handles it starts', j.job_type, $3, j.queue)
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE NOT handled))
            RETURNING j.*
        )
        SELECT * FROM claimed UNION ALL SELECT * FROM set_aside
;

-- JOB_CLAIM_QUEUES_LIMITED
-- [`JOB_CLAIM_QUEUES`], honouring global and rate limits: locks the
-- limited queues' rows first and notes what it took from them
-- (`lock_limited!`, `note_limited!`).
WITH locked AS MATERIALIZED (
        SELECT c.name, c.global_limit, c.held_counted, c.claimed_since, c.rate_starts,
               c.rate_period, c.rate_at, c.rate_jobs
        FROM jobqueue_queues AS c
        WHERE (c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
          AND (cardinality($1::text[]) = 0 OR c.name = ANY($1::text[]))
          AND current_setting('transaction_isolation') = 'read committed'
          AND (SELECT true FROM jobqueue_jobs AS p
               WHERE p.status = 'pending' AND p.queue = c.name LIMIT 1)
        ORDER BY c.name
        FOR NO KEY UPDATE OF c
    ),
    clock AS MATERIALIZED (
        SELECT clock_timestamp() AS now FROM (SELECT count(*) FROM locked) AS every_lock
    ),
    used AS (
        SELECT k.name,
               CASE WHEN h.recount
                    THEN greatest(k.global_limit - coalesce(h.bound, k.global_limit), 0)
                    ELSE $2::int8
               END AS held_room,
               h.recount,
               CASE WHEN k.rate_starts IS NOT NULL
                    THEN greatest(k.rate_starts - w.starts, 0)::int8
               END AS rate_room,
               CASE WHEN k.rate_starts IS NOT NULL THEN $14::int8 END AS start_room,
               k.rate_starts,
               CASE WHEN k.rate_starts IS NOT NULL THEN greatest(k.rate_period / 40, interval '25 milliseconds') END AS margin,
               w.first + (k.rate_period + greatest(k.rate_period / 40, interval '25 milliseconds')) - clock.now AS room_in
        FROM locked AS k
        CROSS JOIN clock
        CROSS JOIN LATERAL (
            SELECT b.bound,
                   k.global_limit IS NOT NULL
                   AND coalesce(b.bound + $2::int8 > k.global_limit, true) AS recount
            FROM (SELECT k.held_counted::int8 + k.claimed_since AS bound) AS b
        ) AS h
        CROSS JOIN LATERAL (
            SELECT (SELECT coalesce(sum(n), 0) FROM unnest(k.rate_jobs[g.gone + 1:]) AS n)
                       AS starts,
                   k.rate_at[g.gone + 1] AS first
            FROM (SELECT width_bucket(clock.now - (k.rate_period + greatest(k.rate_period / 40, interval '25 milliseconds')), k.rate_at) AS gone)
                 AS g
        ) AS w
    ),
    limited AS (
        SELECT u.name, least(u.held_room, u.rate_room, u.start_room) AS room
        FROM used AS u
    ),
    named AS (
        SELECT q.queue, w.priority AS after_priority, w.run_at AS after_run_at,
               w.id AS after_id
        FROM unnest($1::text[]) AS q(queue)
        LEFT JOIN unnest($7::text[], $8::int4[], $9::timestamptz[], $10::uuid[])
                  AS w(queue, priority, run_at, id)
               ON w.queue = q.queue
    ),
    found AS (
        SELECT n.* FROM named AS n
        WHERE EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE n.after_priority IS NULL
                        AND p.status = 'pending' AND p.queue = n.queue)
           OR EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue = n.queue
                        AND p.priority > n.after_priority)
           OR EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue = n.queue
                        AND p.priority = n.after_priority
                        AND (p.run_at, p.id) > (n.after_run_at, n.after_id))
           OR EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue = n.queue
                        AND p.priority < n.after_priority)
    ),
    ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room
            FROM found AS f
            LEFT JOIN jobqueue_queues AS c ON c.name = f.queue
            LEFT JOIN unnest($5::text[], $6::int8[]) AS r(queue, room) ON r.queue = f.queue
            LEFT JOIN limited AS l ON l.name = f.queue
            WHERE c.paused IS NOT TRUE
              AND NOT coalesce(c.backoff_until > now(), false)
              AND least($2::int8, r.room, l.room) > 0
              AND ((c.global_limit IS NULL AND c.rate_starts IS NULL) OR l.name IS NOT NULL)
        ),
        share AS (
            SELECT ceil($2::float8 / greatest(count(*), 1))::int8 AS n FROM ready
        ),
        quota AS (
            SELECT ready.queue, ready.after_priority, ready.after_run_at, ready.after_id,
                   least(share.n, ready.room) AS n
            FROM ready CROSS JOIN share
        ),
        picked AS (
            SELECT c.id,
                   cardinality($12::text[]) = 0 OR c.job_type = ANY($12::text[]) AS handled
            FROM quota
            CROSS JOIN LATERAL (
                SELECT from_start.id, from_start.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND quota.after_priority IS NULL
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS from_start
                UNION ALL
                SELECT higher.id, higher.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority > quota.after_priority
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS higher
                UNION ALL
                SELECT after_point.id, after_point.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority = quota.after_priority
                      AND (p.run_at, p.id) > (quota.after_run_at, quota.after_id)
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS after_point
                UNION ALL
                SELECT lower.id, lower.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority < quota.after_priority
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS lower
                LIMIT quota.n
            ) AS c
            LIMIT $2
        ),
        claimed AS (
            UPDATE jobqueue_jobs AS j
            SET status = 'claimed',
                worker_id = $3,
                attempts = j.attempts + 1,
                claim_count = j.claim_count + 1,
                claimed_at = (SELECT now FROM clock),
                heartbeat_at = (SELECT now FROM clock),
                lease_expires_at = (SELECT now FROM clock) + make_interval(secs => $4),
                started_at = NULL,
                progress = 0,
                current_stage = NULL
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE handled))
            RETURNING j.*
        ),
        set_aside AS (
            UPDATE jobqueue_jobs AS j
            SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; set aside until a runner that handles it starts', j.job_type, $3, j.queue)
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE NOT handled))
            RETURNING j.*
        ),
    took AS (
        SELECT j.queue, count(*)::int4 AS n
        FROM claimed AS j
        JOIN limited AS l ON l.name = j.queue
        GROUP BY j.queue
    ),
    noted AS (
        UPDATE jobqueue_queues AS c
        SET claimed_since = c.claimed_since
                            + CASE WHEN c.global_limit IS NULL THEN 0 ELSE t.n END,
            (rate_at, rate_jobs) = (
                SELECT CASE WHEN c.rate_starts IS NULL THEN c.rate_at
                            WHEN w.last >= w.entry THEN w.at
                            ELSE w.at || w.entry
                       END,
                       CASE WHEN c.rate_starts IS NULL THEN c.rate_jobs
                            WHEN w.last >= w.entry
                            THEN w.jobs[:cardinality(w.jobs) - 1]
                                 || (w.jobs[cardinality(w.jobs)] + t.n)
                            ELSE w.jobs || t.n
                       END
                FROM (
                    SELECT k.at, k.jobs, k.at[cardinality(k.at)] AS last,
                           'epoch'::timestamptz
                               + interval '1 microsecond' * ((e.now + e.slot - 1) / e.slot * e.slot)
                               AS entry
                    FROM (SELECT c.rate_at[g.gone + 1:] AS at, c.rate_jobs[g.gone + 1:] AS jobs
                          FROM (SELECT width_bucket(clock.now - (c.rate_period + greatest(c.rate_period / 40, interval '25 milliseconds')), c.rate_at) AS gone) AS g) AS k,
                         (SELECT (EXTRACT(EPOCH FROM clock.now) * 1000000)::int8
                                     AS now,
                                 greatest((EXTRACT(EPOCH FROM c.rate_period) * 1000000)::int8
                                          / 1000, 1) AS slot) AS e
                ) AS w
            )
        FROM took AS t, clock
        WHERE c.name = t.queue
    ),
    summary AS (
        SELECT coalesce(array_agg(u.name ORDER BY u.name) FILTER (WHERE u.recount), '{}')
                   AS recount,
               (EXTRACT(EPOCH FROM min(u.room_in) FILTER (
                    WHERE u.rate_room < u.held_room)) * 1000000)::int8
                   AS rate_room_in_micros,
               coalesce(array_agg(u.name ORDER BY u.name) FILTER (WHERE u.near_full),
                        '{}') AS rated,
               coalesce(array_agg((EXTRACT(EPOCH FROM u.margin + (clock.now - statement_timestamp()))
                                   * 1000000)::int8
                                  ORDER BY u.name) FILTER (WHERE u.near_full),
                        '{}') AS rated_margin_micros
        FROM (SELECT u.*,
                     u.margin IS NOT NULL
                     AND 2 * (u.rate_room - coalesce(t.n, 0)) < u.rate_starts AS near_full
              FROM used AS u LEFT JOIN took AS t ON t.queue = u.name) AS u
        CROSS JOIN clock
    )
    SELECT s.recount, s.rate_room_in_micros, s.rated, s.rated_margin_micros, j.*
    FROM summary AS s
    LEFT JOIN (SELECT * FROM claimed UNION ALL SELECT * FROM set_aside) AS j ON true
;

-- JOB_CLAIM_ANY
-- Claims up to `$2` due jobs from the queues that have some, for worker
-- `$3`, lease `$4` seconds: see `claim_from_ready!`. The queues are found
-- by a walk through `jobqueue_jobs_fetch_idx`, one queue name at a time
-- (one index descent per queue, whatever each queue's backlog), that
-- starts after queue `$11` (`''`: at the first queue), wraps around to
-- the first queue, and stops once it found `walk_limit!` queues that
-- may be claimed from: a claim's cost grows with its limit, not with the
-- number of queues that have due jobs, and claims that each start after
-- the last queue the one before took from go round every queue in turn.
-- `$1` (the claim's queues) is empty, which `lock_limited!` reads as
-- every queue, and there are no resume points (`$7` to `$10` go unused),
-- so every claim binds the same parameters.
WITH RECURSIVE limited AS (SELECT NULL::text AS name, NULL::int8 AS room WHERE false),
    after_start AS (
        SELECT first.queue,
               0 + CASE WHEN first.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = first.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT EXISTS (SELECT 1 FROM limited AS l
                                                    WHERE l.name = first.queue))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = first.queue LIMIT 1), 1) > 0
              AND coalesce((SELECT l.room FROM limited AS l WHERE l.name = first.queue), 1) > 0) THEN 1 ELSE 0 END AS n
        FROM (SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue > $11::text
                        AND true
                      ORDER BY p.queue LIMIT 1) AS queue
              WHERE 0 < least($2::int8, $13::int8)
              OFFSET 0) AS first
        UNION ALL
        SELECT next.queue,
               w.n + CASE WHEN next.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = next.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT EXISTS (SELECT 1 FROM limited AS l
                                                    WHERE l.name = next.queue))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = next.queue LIMIT 1), 1) > 0
              AND coalesce((SELECT l.room FROM limited AS l WHERE l.name = next.queue), 1) > 0) THEN 1 ELSE 0 END
        FROM after_start AS w
        CROSS JOIN LATERAL (
            SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue > w.queue
                      AND true
                    ORDER BY p.queue LIMIT 1) AS queue
            OFFSET 0
        ) AS next
        WHERE w.queue IS NOT NULL AND w.n < least($2::int8, $13::int8)
    ),
    wrapped AS (
        SELECT first.queue,
               (SELECT coalesce(max(a.n), 0) FROM after_start AS a) + CASE WHEN first.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = first.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT EXISTS (SELECT 1 FROM limited AS l
                                                    WHERE l.name = first.queue))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = first.queue LIMIT 1), 1) > 0
              AND coalesce((SELECT l.room FROM limited AS l WHERE l.name = first.queue), 1) > 0) THEN 1 ELSE 0 END AS n
        FROM (SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue > ''
                        AND p.queue <= $11::text
                      ORDER BY p.queue LIMIT 1) AS queue
              WHERE (SELECT coalesce(max(a.n), 0) FROM after_start AS a) < least($2::int8, $13::int8)
              OFFSET 0) AS first
        UNION ALL
        SELECT next.queue,
               w.n + CASE WHEN next.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = next.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT EXISTS (SELECT 1 FROM limited AS l
                                                    WHERE l.name = next.queue))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = next.queue LIMIT 1), 1) > 0
              AND coalesce((SELECT l.room FROM limited AS l WHERE l.name = next.queue), 1) > 0) THEN 1 ELSE 0 END
        FROM wrapped AS w
        CROSS JOIN LATERAL (
            SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue > w.queue
                      AND p.queue <= $11::text
                    ORDER BY p.queue LIMIT 1) AS queue
            OFFSET 0
        ) AS next
        WHERE w.queue IS NOT NULL AND w.n < least($2::int8, $13::int8)
    ),
    found AS (
        SELECT queue, NULL::int4 AS after_priority, NULL::timestamptz AS after_run_at,
               NULL::uuid AS after_id
        FROM (SELECT queue FROM after_start UNION ALL SELECT queue FROM wrapped) AS walked
        WHERE queue IS NOT NULL
    ),
    ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room
            FROM found AS f
            LEFT JOIN jobqueue_queues AS c ON c.name = f.queue
            LEFT JOIN unnest($5::text[], $6::int8[]) AS r(queue, room) ON r.queue = f.queue
            LEFT JOIN limited AS l ON l.name = f.queue
            WHERE c.paused IS NOT TRUE
              AND NOT coalesce(c.backoff_until > now(), false)
              AND least($2::int8, r.room, l.room) > 0
              AND ((c.global_limit IS NULL AND c.rate_starts IS NULL) OR l.name IS NOT NULL)
        ),
        share AS (
            SELECT ceil($2::float8 / greatest(count(*), 1))::int8 AS n FROM ready
        ),
        quota AS (
            SELECT ready.queue, ready.after_priority, ready.after_run_at, ready.after_id,
                   least(share.n, ready.room) AS n
            FROM ready CROSS JOIN share
        ),
        picked AS (
            SELECT c.id,
                   cardinality($12::text[]) = 0 OR c.job_type = ANY($12::text[]) AS handled
            FROM quota
            CROSS JOIN LATERAL (
                SELECT from_start.id, from_start.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND quota.after_priority IS NULL
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS from_start
                UNION ALL
                SELECT higher.id, higher.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority > quota.after_priority
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS higher
                UNION ALL
                SELECT after_point.id, after_point.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority = quota.after_priority
                      AND (p.run_at, p.id) > (quota.after_run_at, quota.after_id)
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS after_point
                UNION ALL
                SELECT lower.id, lower.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority < quota.after_priority
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS lower
                LIMIT quota.n
            ) AS c
            LIMIT $2
        ),
        claimed AS (
            UPDATE jobqueue_jobs AS j
            SET status = 'claimed',
                worker_id = $3,
                attempts = j.attempts + 1,
                claim_count = j.claim_count + 1,
                claimed_at = statement_timestamp(),
                heartbeat_at = statement_timestamp(),
                lease_expires_at = statement_timestamp() + make_interval(secs => $4),
                started_at = NULL,
                progress = 0,
                current_stage = NULL
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE handled))
            RETURNING j.*
        ),
        set_aside AS (
            UPDATE jobqueue_jobs AS j
            SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; set aside until a runner that handles it starts', j.job_type, $3, j.queue)
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE NOT handled))
            RETURNING j.*
        )
        SELECT * FROM claimed UNION ALL SELECT * FROM set_aside
;

-- JOB_CLAIM_ANY_LIMITED
-- [`JOB_CLAIM_ANY`], honouring global and rate limits, as
-- [`JOB_CLAIM_QUEUES_LIMITED`] does.
WITH RECURSIVE locked AS MATERIALIZED (
        SELECT c.name, c.global_limit, c.held_counted, c.claimed_since, c.rate_starts,
               c.rate_period, c.rate_at, c.rate_jobs
        FROM jobqueue_queues AS c
        WHERE (c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
          AND (cardinality($1::text[]) = 0 OR c.name = ANY($1::text[]))
          AND current_setting('transaction_isolation') = 'read committed'
          AND (SELECT true FROM jobqueue_jobs AS p
               WHERE p.status = 'pending' AND p.queue = c.name LIMIT 1)
        ORDER BY c.name
        FOR NO KEY UPDATE OF c
    ),
    clock AS MATERIALIZED (
        SELECT clock_timestamp() AS now FROM (SELECT count(*) FROM locked) AS every_lock
    ),
    used AS (
        SELECT k.name,
               CASE WHEN h.recount
                    THEN greatest(k.global_limit - coalesce(h.bound, k.global_limit), 0)
                    ELSE $2::int8
               END AS held_room,
               h.recount,
               CASE WHEN k.rate_starts IS NOT NULL
                    THEN greatest(k.rate_starts - w.starts, 0)::int8
               END AS rate_room,
               CASE WHEN k.rate_starts IS NOT NULL THEN $14::int8 END AS start_room,
               k.rate_starts,
               CASE WHEN k.rate_starts IS NOT NULL THEN greatest(k.rate_period / 40, interval '25 milliseconds') END AS margin,
               w.first + (k.rate_period + greatest(k.rate_period / 40, interval '25 milliseconds')) - clock.now AS room_in
        FROM locked AS k
        CROSS JOIN clock
        CROSS JOIN LATERAL (
            SELECT b.bound,
                   k.global_limit IS NOT NULL
                   AND coalesce(b.bound + $2::int8 > k.global_limit, true) AS recount
            FROM (SELECT k.held_counted::int8 + k.claimed_since AS bound) AS b
        ) AS h
        CROSS JOIN LATERAL (
            SELECT (SELECT coalesce(sum(n), 0) FROM unnest(k.rate_jobs[g.gone + 1:]) AS n)
                       AS starts,
                   k.rate_at[g.gone + 1] AS first
            FROM (SELECT width_bucket(clock.now - (k.rate_period + greatest(k.rate_period / 40, interval '25 milliseconds')), k.rate_at) AS gone)
                 AS g
        ) AS w
    ),
    limited AS (
        SELECT u.name, least(u.held_room, u.rate_room, u.start_room) AS room
        FROM used AS u
    ),
    after_start AS (
        SELECT first.queue,
               0 + CASE WHEN first.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = first.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT EXISTS (SELECT 1 FROM limited AS l
                                                    WHERE l.name = first.queue))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = first.queue LIMIT 1), 1) > 0
              AND coalesce((SELECT l.room FROM limited AS l WHERE l.name = first.queue), 1) > 0) THEN 1 ELSE 0 END AS n
        FROM (SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue > $11::text
                        AND true
                      ORDER BY p.queue LIMIT 1) AS queue
              WHERE 0 < least($2::int8, $13::int8)
              OFFSET 0) AS first
        UNION ALL
        SELECT next.queue,
               w.n + CASE WHEN next.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = next.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT EXISTS (SELECT 1 FROM limited AS l
                                                    WHERE l.name = next.queue))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = next.queue LIMIT 1), 1) > 0
              AND coalesce((SELECT l.room FROM limited AS l WHERE l.name = next.queue), 1) > 0) THEN 1 ELSE 0 END
        FROM after_start AS w
        CROSS JOIN LATERAL (
            SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue > w.queue
                      AND true
                    ORDER BY p.queue LIMIT 1) AS queue
            OFFSET 0
        ) AS next
        WHERE w.queue IS NOT NULL AND w.n < least($2::int8, $13::int8)
    ),
    wrapped AS (
        SELECT first.queue,
               (SELECT coalesce(max(a.n), 0) FROM after_start AS a) + CASE WHEN first.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = first.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT EXISTS (SELECT 1 FROM limited AS l
                                                    WHERE l.name = first.queue))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = first.queue LIMIT 1), 1) > 0
              AND coalesce((SELECT l.room FROM limited AS l WHERE l.name = first.queue), 1) > 0) THEN 1 ELSE 0 END AS n
        FROM (SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue > ''
                        AND p.queue <= $11::text
                      ORDER BY p.queue LIMIT 1) AS queue
              WHERE (SELECT coalesce(max(a.n), 0) FROM after_start AS a) < least($2::int8, $13::int8)
              OFFSET 0) AS first
        UNION ALL
        SELECT next.queue,
               w.n + CASE WHEN next.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = next.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT EXISTS (SELECT 1 FROM limited AS l
                                                    WHERE l.name = next.queue))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = next.queue LIMIT 1), 1) > 0
              AND coalesce((SELECT l.room FROM limited AS l WHERE l.name = next.queue), 1) > 0) THEN 1 ELSE 0 END
        FROM wrapped AS w
        CROSS JOIN LATERAL (
            SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue > w.queue
                      AND p.queue <= $11::text
                    ORDER BY p.queue LIMIT 1) AS queue
            OFFSET 0
        ) AS next
        WHERE w.queue IS NOT NULL AND w.n < least($2::int8, $13::int8)
    ),
    found AS (
        SELECT queue, NULL::int4 AS after_priority, NULL::timestamptz AS after_run_at,
               NULL::uuid AS after_id
        FROM (SELECT queue FROM after_start UNION ALL SELECT queue FROM wrapped) AS walked
        WHERE queue IS NOT NULL
    ),
    ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room
            FROM found AS f
            LEFT JOIN jobqueue_queues AS c ON c.name = f.queue
            LEFT JOIN unnest($5::text[], $6::int8[]) AS r(queue, room) ON r.queue = f.queue
            LEFT JOIN limited AS l ON l.name = f.queue
            WHERE c.paused IS NOT TRUE
              AND NOT coalesce(c.backoff_until > now(), false)
              AND least($2::int8, r.room, l.room) > 0
              AND ((c.global_limit IS NULL AND c.rate_starts IS NULL) OR l.name IS NOT NULL)
        ),
        share AS (
            SELECT ceil($2::float8 / greatest(count(*), 1))::int8 AS n FROM ready
        ),
        quota AS (
            SELECT ready.queue, ready.after_priority, ready.after_run_at, ready.after_id,
                   least(share.n, ready.room) AS n
            FROM ready CROSS JOIN share
        ),
        picked AS (
            SELECT c.id,
                   cardinality($12::text[]) = 0 OR c.job_type = ANY($12::text[]) AS handled
            FROM quota
            CROSS JOIN LATERAL (
                SELECT from_start.id, from_start.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND quota.after_priority IS NULL
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS from_start
                UNION ALL
                SELECT higher.id, higher.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority > quota.after_priority
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS higher
                UNION ALL
                SELECT after_point.id, after_point.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority = quota.after_priority
                      AND (p.run_at, p.id) > (quota.after_run_at, quota.after_id)
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS after_point
                UNION ALL
                SELECT lower.id, lower.job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND p.priority < quota.after_priority
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS lower
                LIMIT quota.n
            ) AS c
            LIMIT $2
        ),
        claimed AS (
            UPDATE jobqueue_jobs AS j
            SET status = 'claimed',
                worker_id = $3,
                attempts = j.attempts + 1,
                claim_count = j.claim_count + 1,
                claimed_at = (SELECT now FROM clock),
                heartbeat_at = (SELECT now FROM clock),
                lease_expires_at = (SELECT now FROM clock) + make_interval(secs => $4),
                started_at = NULL,
                progress = 0,
                current_stage = NULL
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE handled))
            RETURNING j.*
        ),
        set_aside AS (
            UPDATE jobqueue_jobs AS j
            SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; set aside until a runner that handles it starts', j.job_type, $3, j.queue)
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE NOT handled))
            RETURNING j.*
        ),
    took AS (
        SELECT j.queue, count(*)::int4 AS n
        FROM claimed AS j
        JOIN limited AS l ON l.name = j.queue
        GROUP BY j.queue
    ),
    noted AS (
        UPDATE jobqueue_queues AS c
        SET claimed_since = c.claimed_since
                            + CASE WHEN c.global_limit IS NULL THEN 0 ELSE t.n END,
            (rate_at, rate_jobs) = (
                SELECT CASE WHEN c.rate_starts IS NULL THEN c.rate_at
                            WHEN w.last >= w.entry THEN w.at
                            ELSE w.at || w.entry
                       END,
                       CASE WHEN c.rate_starts IS NULL THEN c.rate_jobs
                            WHEN w.last >= w.entry
                            THEN w.jobs[:cardinality(w.jobs) - 1]
                                 || (w.jobs[cardinality(w.jobs)] + t.n)
                            ELSE w.jobs || t.n
                       END
                FROM (
                    SELECT k.at, k.jobs, k.at[cardinality(k.at)] AS last,
                           'epoch'::timestamptz
                               + interval '1 microsecond' * ((e.now + e.slot - 1) / e.slot * e.slot)
                               AS entry
                    FROM (SELECT c.rate_at[g.gone + 1:] AS at, c.rate_jobs[g.gone + 1:] AS jobs
                          FROM (SELECT width_bucket(clock.now - (c.rate_period + greatest(c.rate_period / 40, interval '25 milliseconds')), c.rate_at) AS gone) AS g) AS k,
                         (SELECT (EXTRACT(EPOCH FROM clock.now) * 1000000)::int8
                                     AS now,
                                 greatest((EXTRACT(EPOCH FROM c.rate_period) * 1000000)::int8
                                          / 1000, 1) AS slot) AS e
                ) AS w
            )
        FROM took AS t, clock
        WHERE c.name = t.queue
    ),
    summary AS (
        SELECT coalesce(array_agg(u.name ORDER BY u.name) FILTER (WHERE u.recount), '{}')
                   AS recount,
               (EXTRACT(EPOCH FROM min(u.room_in) FILTER (
                    WHERE u.rate_room < u.held_room)) * 1000000)::int8
                   AS rate_room_in_micros,
               coalesce(array_agg(u.name ORDER BY u.name) FILTER (WHERE u.near_full),
                        '{}') AS rated,
               coalesce(array_agg((EXTRACT(EPOCH FROM u.margin + (clock.now - statement_timestamp()))
                                   * 1000000)::int8
                                  ORDER BY u.name) FILTER (WHERE u.near_full),
                        '{}') AS rated_margin_micros
        FROM (SELECT u.*,
                     u.margin IS NOT NULL
                     AND 2 * (u.rate_room - coalesce(t.n, 0)) < u.rate_starts AS near_full
              FROM used AS u LEFT JOIN took AS t ON t.queue = u.name) AS u
        CROSS JOIN clock
    )
    SELECT s.recount, s.rate_room_in_micros, s.rated, s.rated_margin_micros, j.*
    FROM summary AS s
    LEFT JOIN (SELECT * FROM claimed UNION ALL SELECT * FROM set_aside) AS j ON true
;

-- JOB_QUEUE_HEADS
-- Looks for the first due job of each queue in `$1` (distinct names)
-- from the start of its range of `jobqueue_jobs_fetch_idx`, as a claim
-- without a resume point does, and counts the index entries each look
-- read to get there (this session's count of entries the index returned,
-- before and after it: each lateral step depends on the one before, so
-- they run in that order, queue by queue): one when nothing is in the
-- way, more for every job claimed since the oldest open snapshot began.
-- Returns per queue that count and the job's place in the claim order
-- (null when the queue has no due job).
    SELECT q.queue, (after.n - before.n)::int8 AS entries_read,
           head.priority, head.run_at, head.id
    FROM unnest($1::text[]) WITH ORDINALITY AS q(queue, i)
    CROSS JOIN LATERAL (
        SELECT pg_stat_get_xact_tuples_returned('jobqueue_jobs_fetch_idx'::regclass)
               + 0 * q.i AS n
    ) AS before
    LEFT JOIN LATERAL (
        SELECT p.priority, p.run_at, p.id
        FROM jobqueue_jobs AS p
        WHERE p.status = 'pending' AND p.queue = q.queue AND before.n IS NOT NULL
        ORDER BY p.priority DESC, p.run_at, p.id
        LIMIT 1
    ) AS head ON true
    CROSS JOIN LATERAL (
        SELECT pg_stat_get_xact_tuples_returned('jobqueue_jobs_fetch_idx'::regclass)
               + 0 * coalesce(head.priority, 0) AS n
    ) AS after
    ORDER BY q.i
;

-- JOB_START_MANY
-- Marks held jobs as started (`claimed` -> `running`). Arrays `$1` ids, `$2` tokens.
    UPDATE jobqueue_jobs AS j
    SET status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id
;

-- JOB_COMPLETE_MANY
-- Completes held jobs in one statement, keeping their rows as `completed`
-- (a retention above zero for completed jobs), and counts them. Arrays
-- `$1` ids, `$2` tokens; returns the ids it completed (a job whose token no
-- longer matches is left alone).
    WITH done AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'completed',
            finished_at = now(),
            started_at = COALESCE(j.started_at, j.claimed_at),
            progress = 100,
            lease_expires_at = NULL,
            cancel_requested = false

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    )
    SELECT id FROM done
;

-- JOB_COMPLETE_DELETE_MANY
-- Completes held jobs by deleting them, and counts them, in one statement:
-- for completed jobs kept for no time (`Retention::completed` of zero).
-- A delete writes no new row version and no index entry, and
-- leaves nothing to prune. Arrays `$1` ids, `$2` tokens; returns the ids it
-- completed.
    WITH done AS (
        DELETE FROM jobqueue_jobs AS j

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    )
    SELECT id FROM done
;

-- JOB_COMPLETE_STEPS_MANY
-- [`JOB_COMPLETE_MANY`] of jobs of workflows: their steps completed and
-- their children released in the same statement (`complete_steps!`).
    WITH done AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'completed',
            finished_at = now(),
            started_at = COALESCE(j.started_at, j.claimed_at),
            progress = 100,
            lease_expires_at = NULL,
            cancel_requested = false

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    ),
    ended AS (
        UPDATE jobqueue_workflow_steps AS s
        SET state = 'completed',
            ended_at = now(),
            result = CAST(($3::text[])[width_bucket(s.job_id, $1::uuid[])] AS jsonb)
        FROM done
        WHERE s.job_id = done.id AND s.state <> 'completed'
        RETURNING s.job_id
    ),
    settled AS (
        UPDATE jobqueue_workflow_edges AS e
        SET settled = true
        FROM ended
        WHERE e.parent_id = ended.job_id AND NOT e.settled AND (true)
        RETURNING e.child_id
    ),
    counts AS (
        SELECT array_agg(g.child_id ORDER BY g.child_id) AS ids,
               array_agg(g.n ORDER BY g.child_id) AS n
        FROM (SELECT child_id, count(*)::int4 AS n FROM settled GROUP BY child_id) AS g
    ),
    counted_down AS (
        UPDATE jobqueue_workflow_steps AS s
        SET parents_left = s.parents_left - counts.n[width_bucket(s.job_id, counts.ids)]
        FROM counts
        WHERE s.job_id = ANY(counts.ids)
        RETURNING s.job_id, s.parents_left
    ),
    released AS (
        UPDATE jobqueue_jobs AS j
        SET status = CASE WHEN j.status = 'blocked' THEN CASE WHEN j.concurrency_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = j.queue AND kq.key_limit IS NOT NULL) THEN 'waiting' WHEN j.run_at <= now() THEN 'pending' ELSE 'scheduled' END ELSE j.status END
        FROM counted_down AS c
        WHERE j.id = c.job_id AND c.parents_left = 0
          AND j.status IN ('blocked', 'failed', 'cancelled')
        RETURNING j.id, j.queue, j.status
    ),
    wake AS (
        SELECT count(pg_notify($4, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM released WHERE status IN ('pending', 'waiting')) AS q
    )
    SELECT done.id FROM done LEFT JOIN wake ON true
;

-- JOB_COMPLETE_DELETE_STEPS_MANY
-- [`JOB_COMPLETE_DELETE_MANY`] of jobs of workflows: their steps
-- completed and their children released in the same statement
-- (`complete_steps!`).
    WITH done AS (
        DELETE FROM jobqueue_jobs AS j

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    ),
    ended AS (
        UPDATE jobqueue_workflow_steps AS s
        SET state = 'completed',
            ended_at = now(),
            result = CAST(($3::text[])[width_bucket(s.job_id, $1::uuid[])] AS jsonb)
        FROM done
        WHERE s.job_id = done.id AND s.state <> 'completed'
        RETURNING s.job_id
    ),
    settled AS (
        UPDATE jobqueue_workflow_edges AS e
        SET settled = true
        FROM ended
        WHERE e.parent_id = ended.job_id AND NOT e.settled AND (true)
        RETURNING e.child_id
    ),
    counts AS (
        SELECT array_agg(g.child_id ORDER BY g.child_id) AS ids,
               array_agg(g.n ORDER BY g.child_id) AS n
        FROM (SELECT child_id, count(*)::int4 AS n FROM settled GROUP BY child_id) AS g
    ),
    counted_down AS (
        UPDATE jobqueue_workflow_steps AS s
        SET parents_left = s.parents_left - counts.n[width_bucket(s.job_id, counts.ids)]
        FROM counts
        WHERE s.job_id = ANY(counts.ids)
        RETURNING s.job_id, s.parents_left
    ),
    released AS (
        UPDATE jobqueue_jobs AS j
        SET status = CASE WHEN j.status = 'blocked' THEN CASE WHEN j.concurrency_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = j.queue AND kq.key_limit IS NOT NULL) THEN 'waiting' WHEN j.run_at <= now() THEN 'pending' ELSE 'scheduled' END ELSE j.status END
        FROM counted_down AS c
        WHERE j.id = c.job_id AND c.parents_left = 0
          AND j.status IN ('blocked', 'failed', 'cancelled')
        RETURNING j.id, j.queue, j.status
    ),
    wake AS (
        SELECT count(pg_notify($4, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM released WHERE status IN ('pending', 'waiting')) AS q
    )
    SELECT done.id FROM done LEFT JOIN wake ON true
;

-- JOB_FAIL_MANY
-- Records failed attempts of held jobs in one statement.
--
-- Arrays: `$1` ids, `$2` tokens, `$3` retry delay in seconds (null: permanent
-- failure), `$4` error text. A job goes back to `scheduled` (`pending` if
-- the delay is zero) at `now() + delay` while it has attempts left, to `failed` otherwise, and to
-- `cancelled` if a cancel was requested meanwhile. Returns id, new status and
-- run_at of each job it changed.
WITH next AS (
        SELECT j.id, l.delay, l.error,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN l.delay IS NULL OR j.attempts >= j.max_attempts THEN 'failed'
                    WHEN l.delay <= 0 THEN 'pending'
                    ELSE 'scheduled' END AS next_status
        FROM jobqueue_jobs AS j
        CROSS JOIN LATERAL (
            SELECT ($2::int4[])[i] AS token, ($3::float8[])[i] AS delay, ($4::text[])[i] AS error
            FROM width_bucket(j.id, $1::uuid[]) AS i
        ) AS l
        WHERE j.id = ANY($1::uuid[])
          AND j.claim_count = l.token
          AND j.status IN ('claimed', 'running')
        FOR UPDATE OF j
    ),
    by_id AS (
        SELECT array_agg(id ORDER BY id) AS ids,
               array_agg(next_status ORDER BY id) AS next_status,
               array_agg(delay ORDER BY id) AS delay,
               array_agg(error ORDER BY id) AS error
        FROM next
    )
    UPDATE jobqueue_jobs AS j
    SET status = by_id.next_status[width_bucket(j.id, by_id.ids)],
        run_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                      THEN now() + make_interval(secs => by_id.delay[width_bucket(j.id, by_id.ids)]) ELSE j.run_at END,
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.worker_id END,
        lease_expires_at = NULL,
        last_error = by_id.error[width_bucket(j.id, by_id.ids)],
        errors = (CASE WHEN jsonb_array_length(j.errors) >= 10 THEN j.errors - 0 ELSE j.errors END) || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', by_id.error[width_bucket(j.id, by_id.ids)]))
    FROM by_id
    WHERE j.id = ANY(by_id.ids)
    RETURNING j.id, j.status, j.run_at
;

-- JOB_HEARTBEAT_MANY
-- Renews the leases of held jobs, and writes the progress their handlers
-- reported since the last renewal. Arrays `$1` ids, `$2` tokens, `$3`
-- lease in seconds; arrays parallel to the ids (or empty, when no job of
-- the batch reported any): `$4` percent (null: unchanged), `$5` stage
-- (null: unchanged), `$6` events to add (null: the job reported nothing,
-- else it marks it `running`). The event count stops at the column's
-- largest value rather than fail the batch. Returns each renewed job with
-- its cancel flag; jobs no longer held under their token are absent.
    UPDATE jobqueue_jobs AS j
    SET heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => $3),
        progress = COALESCE(($4::int2[])[width_bucket(j.id, $1::uuid[])], j.progress),
        current_stage = COALESCE(($5::text[])[width_bucket(j.id, $1::uuid[])], j.current_stage),
        events_count = LEAST(j.events_count::int8
                             + COALESCE(($6::int4[])[width_bucket(j.id, $1::uuid[])], 0),
                             2147483647)::int4,
        status = CASE WHEN ($6::int4[])[width_bucket(j.id, $1::uuid[])] IS NULL
                      THEN j.status ELSE 'running' END,
        started_at = CASE WHEN ($6::int4[])[width_bucket(j.id, $1::uuid[])] IS NULL
                          THEN j.started_at ELSE COALESCE(j.started_at, now()) END
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id, j.cancel_requested
;

-- JOB_PROGRESS
-- Records progress of one held job: `$1` id, `$2` token, `$3` percent
-- (nullable: unchanged), `$4` stage (nullable: unchanged), `$5` events to add.
-- Marks the job running. Returns its cancel flag.
    UPDATE jobqueue_jobs AS j
    SET progress = COALESCE($3, j.progress),
        current_stage = COALESCE($4, j.current_stage),
        events_count = j.events_count + $5,
        status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = $1
      AND j.claim_count = $2
      AND j.status IN ('claimed', 'running')
    RETURNING j.cancel_requested
;

-- JOB_CANCEL
-- Cancels job `$1`: a job not held (waiting, scheduled, pending, unhandled) at once,
-- a held one by raising its cancel flag (its handler sees it; its runner
-- finishes it as `cancelled`). Returns the resulting status; no row if the
-- job is finished or unknown.
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.status IN ('claimed', 'running') THEN j.status ELSE 'cancelled' END,
        finished_at = CASE WHEN j.status IN ('claimed', 'running') THEN j.finished_at ELSE now() END,
        cancel_requested = j.status IN ('claimed', 'running')
    WHERE j.id = $1
      AND j.status IN ('blocked', 'waiting', 'scheduled', 'pending', 'unhandled', 'claimed',
                       'running')
    RETURNING j.status, j.workflow_id IS NOT NULL AS in_workflow, j.queue,
              j.concurrency_key AS key
;

-- JOB_CANCEL_HELD_MANY
-- Marks held jobs as cancelled (their handler stopped after a cancel request).
-- Arrays `$1` ids, `$2` tokens; returns the ids changed.
    UPDATE jobqueue_jobs AS j
    SET status = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id
;

-- JOB_RELEASE_MANY
-- Hands held jobs back without using up an attempt (a runner shutting down
-- before it started them). Arrays `$1` ids, `$2` tokens; returns the ids.
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
        finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
        attempts = j.attempts - 1,
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id
;

-- JOB_SNOOZE_MANY
-- Snoozes held jobs: each goes back to `pending` (or `scheduled`) at
-- `now() + delay` without using up its attempt, its history recording the
-- snooze; a job already snoozed `$4` times fails instead. Arrays `$1`
-- ids, `$2` tokens, `$3` delays in seconds, `$5` whether the job's queue
-- backs off for its delay too (its `backoff_until` moved to at least
-- `now() + delay`: a rate-limited call). A job with a cancel request is
-- cancelled. Returns the ids and new statuses.
WITH next AS (
        SELECT j.id, l.delay, j.queue, l.backoff,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN j.snoozes >= $4 THEN 'failed'
                    WHEN l.delay <= 0 THEN 'pending'
                    ELSE 'scheduled' END AS next_status,
               CASE WHEN j.snoozes >= $4
                    THEN format('snoozed %s times, the most allowed (max_snoozes %s): gave up waiting', j.snoozes + 1, $4)
                    ELSE format('snoozed for %s s (snooze %s of at most %s; no attempt used)',
                                round(l.delay::numeric, 3), j.snoozes + 1, $4) END AS note
        FROM jobqueue_jobs AS j
        CROSS JOIN LATERAL (
            SELECT ($2::int4[])[i] AS token, ($3::float8[])[i] AS delay, ($5::bool[])[i] AS backoff
            FROM width_bucket(j.id, $1::uuid[]) AS i
        ) AS l
        WHERE j.id = ANY($1::uuid[])
          AND j.claim_count = l.token
          AND j.status IN ('claimed', 'running')
        FOR UPDATE OF j
    ),
    backoff AS (
        INSERT INTO jobqueue_queues AS c (name, backoff_until)
        SELECT queue, now() + make_interval(secs => max(delay))
        FROM next WHERE backoff
        GROUP BY queue
        ON CONFLICT (name) DO UPDATE
        SET backoff_until = greatest(c.backoff_until, EXCLUDED.backoff_until)
    ),
    by_id AS (
        SELECT array_agg(id ORDER BY id) AS ids,
               array_agg(next_status ORDER BY id) AS next_status,
               array_agg(delay ORDER BY id) AS delay,
               array_agg(note ORDER BY id) AS note
        FROM next
    )
    UPDATE jobqueue_jobs AS j
    SET status = by_id.next_status[width_bucket(j.id, by_id.ids)],
        run_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                      THEN now() + make_interval(secs => by_id.delay[width_bucket(j.id, by_id.ids)]) ELSE j.run_at END,
        attempts = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                        THEN j.attempts - 1 ELSE j.attempts END,
        snoozes = j.snoozes + 1,
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.worker_id END,
        started_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.started_at END,
        lease_expires_at = NULL,
        last_error = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'failed' THEN by_id.note[width_bucket(j.id, by_id.ids)] ELSE j.last_error END,
        errors = (CASE WHEN jsonb_array_length(j.errors) >= 10 THEN j.errors - 0 ELSE j.errors END) || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', by_id.note[width_bucket(j.id, by_id.ids)]))
    FROM by_id
    WHERE j.id = ANY(by_id.ids)
    RETURNING j.id, j.status
;

-- JOB_PARK_MANY
-- Sets held jobs aside as `unhandled` without using up an attempt: the
-- claiming runner has no handler for their type. Arrays `$1` ids, `$2`
-- tokens; `$3` names the runner (for the error text). Returns the ids.
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; set aside until a runner that handles it starts', j.job_type, $3, j.queue),
        attempts = j.attempts - 1,
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id
;

-- JOB_SET_ASIDE_DUE
-- Sets aside as `unhandled` (by runner `$7`) up to `$6` due jobs of queue
-- `$1` and type `$2`, in claim order after the point `$3`, `$4`, `$5`
-- (priority, run_at, id; a null priority: from the queue's start), read
-- in the ranges a resumed claim reads (see `claim_from_ready!`) so that a
-- pass does not step over the entries the passes before it left. Returns
-- the place in the claim order of each job it set aside.
WITH picked AS (
        SELECT id FROM (SELECT r.id FROM (
          SELECT p.id FROM jobqueue_jobs AS p
          WHERE p.status = 'pending' AND p.queue = $1 AND p.job_type = $2 AND $3::int4 IS NULL
          ORDER BY p.priority DESC, p.run_at, p.id
          LIMIT $6
          FOR UPDATE SKIP LOCKED) AS r
            UNION ALL SELECT r.id FROM (
          SELECT p.id FROM jobqueue_jobs AS p
          WHERE p.status = 'pending' AND p.queue = $1 AND p.job_type = $2 AND p.priority = $3::int4 AND (p.run_at, p.id) > ($4::timestamptz, $5::uuid)
          ORDER BY p.priority DESC, p.run_at, p.id
          LIMIT $6
          FOR UPDATE SKIP LOCKED) AS r
            UNION ALL SELECT r.id FROM (
          SELECT p.id FROM jobqueue_jobs AS p
          WHERE p.status = 'pending' AND p.queue = $1 AND p.job_type = $2 AND p.priority < $3::int4
          ORDER BY p.priority DESC, p.run_at, p.id
          LIMIT $6
          FOR UPDATE SKIP LOCKED) AS r) AS ranges
        LIMIT $6
    )
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; set aside until a runner that handles it starts', j.job_type, $7, j.queue)
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.priority, j.run_at, j.id
;

-- JOB_PROMOTE_DUE
-- Moves up to `$1` scheduled jobs that are due by the database's clock to
-- `pending`: see `promote_due!`.
WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'scheduled'
          AND run_at <= now()
        ORDER BY run_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ),
    moved AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending'
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING j.queue
    ),
    wake AS (
        SELECT count(pg_notify($2, q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM moved) AS q
    )
    SELECT count(*) AS n FROM moved, wake
;

-- JOB_PROMOTE_DUE_BY
-- Moves up to `$1` scheduled jobs due by time `$3` to `pending`: see
-- `promote_due!`.
WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'scheduled'
          AND run_at <= $3
        ORDER BY run_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ),
    moved AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending'
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING j.queue
    ),
    wake AS (
        SELECT count(pg_notify($2, q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM moved) AS q
    )
    SELECT count(*) AS n FROM moved, wake
;

-- JOB_UNPARK
-- Takes back up to `$3` jobs set aside as `unhandled` whose type is in `$1`
-- and whose queue is in `$2` (an empty array: any queue): back to
-- `pending`, their queues woken on channel `$4`. Returns the number moved.
WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'unhandled'
          AND job_type = ANY($1::text[])
          AND (cardinality($2::text[]) = 0 OR queue = ANY($2::text[]))
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    ),
    moved AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending'
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING j.queue
    ),
    wake AS (
        SELECT count(pg_notify($4, q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM moved) AS q
    )
    SELECT count(*) AS n FROM moved, wake
;

-- JOB_RESCUE_STALE
-- Recovers up to `$1` held jobs whose lease expired before the database's
-- `now()`: back to `pending` while attempts remain, `failed` ("worker lost")
-- on the last attempt, `cancelled` if a cancel was requested. Safe to run
-- from many processes at once (SKIP LOCKED). Returns id and new status.
WITH next AS (
        SELECT j.id,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN j.attempts >= j.max_attempts THEN 'failed'
                    ELSE 'pending' END AS next_status,
               format('worker lost: lease of worker %s expired at %s (attempt %s of %s)',
                      j.worker_id, j.lease_expires_at, j.attempts, j.max_attempts) AS error
        FROM jobqueue_jobs AS j
        WHERE j.status IN ('claimed', 'running')
          AND j.lease_expires_at < now()
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ),
    by_id AS (
        SELECT array_agg(id ORDER BY id) AS ids,
               array_agg(next_status ORDER BY id) AS next_status,
               array_agg(error ORDER BY id) AS error
        FROM next
    )
    UPDATE jobqueue_jobs AS j
    SET status = by_id.next_status[width_bucket(j.id, by_id.ids)],
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'pending' THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'pending' THEN NULL ELSE j.worker_id END,
        lease_expires_at = NULL,
        last_error = by_id.error[width_bucket(j.id, by_id.ids)],
        errors = (CASE WHEN jsonb_array_length(j.errors) >= 10 THEN j.errors - 0 ELSE j.errors END) || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', by_id.error[width_bucket(j.id, by_id.ids)]))
    FROM by_id
    WHERE j.id = ANY(by_id.ids)
    RETURNING j.id, j.status
;

-- JOB_PRUNE
-- Deletes up to `$3` jobs in status `$1` finished more than `$2` seconds ago.
    WITH doomed AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = $1
          AND finished_at < now() - make_interval(secs => $2)
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jobqueue_jobs AS j
    WHERE j.id = ANY(ARRAY(SELECT id FROM doomed))
;

-- JOB_STATS_BY_TYPE
-- Counts live jobs (blocked, waiting, scheduled, pending, unhandled,
-- claimed, running) by job type and status: a type no runner handles
-- shows up as unhandled here.
    SELECT job_type, 'blocked' AS status, count(*) AS jobs
    FROM jobqueue_jobs WHERE status = 'blocked' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'waiting', count(*) AS jobs
    FROM jobqueue_jobs WHERE status = 'waiting' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'pending', count(*) AS jobs
    FROM jobqueue_jobs WHERE status = 'pending' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'scheduled', count(*)
    FROM jobqueue_jobs WHERE status = 'scheduled' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'unhandled', count(*)
    FROM jobqueue_jobs WHERE status = 'unhandled' GROUP BY job_type
    UNION ALL
    SELECT job_type, status, count(*)
    FROM jobqueue_jobs WHERE lease_expires_at IS NOT NULL GROUP BY job_type, status
    ORDER BY job_type, status
;

-- JOB_DEAD_TUPLES
-- Dead row versions in `jobqueue_jobs`, from the statistics views.
    SELECT coalesce(n_dead_tup, 0) AS dead
    FROM pg_stat_user_tables
    WHERE relid = 'jobqueue_jobs'::regclass
;

-- JOB_VACUUM
-- Vacuums the jobs table, unless another session already is, leaving the
-- empty pages at its end in place.
VACUUM (SKIP_LOCKED, TRUNCATE false) jobqueue_jobs
;

-- JOB_VACUUM_TRUNCATE
-- [`JOB_VACUUM`] that also gives the empty pages at the table's end back
-- to the file system, under an `ACCESS EXCLUSIVE` lock of the table.
VACUUM (SKIP_LOCKED, TRUNCATE true) jobqueue_jobs
;

-- JOB_GET
-- Reads one job by id.
SELECT * FROM jobqueue_jobs WHERE id = $1
;

-- JOB_GET_STATUS
-- Reads the status of one job by id.
SELECT status FROM jobqueue_jobs WHERE id = $1
;

-- JOB_RETRY
-- Puts job `$1` back to `pending` if it is failed or cancelled (see
-- `requeue_where`); `$2` notify channel.
WITH candidate AS MATERIALIZED (
                SELECT DISTINCT ON (coalesce(j.unique_key, j.id::text)) j.id
                FROM jobqueue_jobs AS j
                WHERE j.id = $1 AND j.status IN ('failed', 'cancelled')
                  AND (j.unique_key IS NULL OR NOT EXISTS (
                        SELECT 1 FROM jobqueue_jobs AS live
                        WHERE live.unique_key = j.unique_key
                          AND live.status IN ('waiting', 'scheduled', 'pending', 'unhandled',
                                              'claimed', 'running')))
                ORDER BY coalesce(j.unique_key, j.id::text), j.id DESC
            ),
            step AS MATERIALIZED (
                SELECT ws.job_id, ws.parents_left, ws.state
                FROM jobqueue_workflow_steps AS ws
                WHERE ws.job_id IN (SELECT id FROM candidate)
                ORDER BY ws.job_id
                FOR UPDATE
            ),
            requeued AS (
                UPDATE jobqueue_jobs AS j
                SET status = CASE WHEN step.parents_left > 0 THEN 'blocked' ELSE CASE WHEN j.concurrency_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = j.queue AND kq.key_limit IS NOT NULL) THEN 'waiting' WHEN now() <= now() THEN 'pending' ELSE 'scheduled' END END,
                    key_checked = NULL,
                    run_at = now(),
                    attempts = 0,
                    finished_at = NULL,
                    worker_id = NULL,
                    lease_expires_at = NULL,
                    cancel_requested = false,
                    progress = 0,
                    current_stage = NULL
                FROM candidate LEFT JOIN step ON step.job_id = candidate.id
                WHERE j.id = candidate.id AND j.id = $1 AND j.status IN ('failed', 'cancelled')
                RETURNING j.id, j.queue, j.status, step.state AS step_state
            ),
            revived AS (
                UPDATE jobqueue_workflow_steps AS ws
                SET state = 'live', ended_at = NULL
                FROM requeued
                WHERE ws.job_id = requeued.id AND requeued.step_state <> 'live'
            ),
            wake AS (
        SELECT count(pg_notify($2, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM requeued WHERE status IN ('pending', 'waiting')) AS q
    )
            SELECT requeued.id FROM requeued, wake
;

-- JOB_RETRY_FAILED
-- Puts the failed jobs of queue `$1` and type `$2` (each: any if null)
-- back to `pending` (see `requeue_where`); `$3` notify channel.
WITH candidate AS MATERIALIZED (
                SELECT DISTINCT ON (coalesce(j.unique_key, j.id::text)) j.id
                FROM jobqueue_jobs AS j
                WHERE j.status = 'failed'
     AND ($1::text IS NULL OR j.queue = $1)
     AND ($2::text IS NULL OR j.job_type = $2)
                  AND (j.unique_key IS NULL OR NOT EXISTS (
                        SELECT 1 FROM jobqueue_jobs AS live
                        WHERE live.unique_key = j.unique_key
                          AND live.status IN ('waiting', 'scheduled', 'pending', 'unhandled',
                                              'claimed', 'running')))
                ORDER BY coalesce(j.unique_key, j.id::text), j.id DESC
            ),
            step AS MATERIALIZED (
                SELECT ws.job_id, ws.parents_left, ws.state
                FROM jobqueue_workflow_steps AS ws
                WHERE ws.job_id IN (SELECT id FROM candidate)
                ORDER BY ws.job_id
                FOR UPDATE
            ),
            requeued AS (
                UPDATE jobqueue_jobs AS j
                SET status = CASE WHEN step.parents_left > 0 THEN 'blocked' ELSE CASE WHEN j.concurrency_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = j.queue AND kq.key_limit IS NOT NULL) THEN 'waiting' WHEN now() <= now() THEN 'pending' ELSE 'scheduled' END END,
                    key_checked = NULL,
                    run_at = now(),
                    attempts = 0,
                    finished_at = NULL,
                    worker_id = NULL,
                    lease_expires_at = NULL,
                    cancel_requested = false,
                    progress = 0,
                    current_stage = NULL
                FROM candidate LEFT JOIN step ON step.job_id = candidate.id
                WHERE j.id = candidate.id AND j.status = 'failed'
     AND ($1::text IS NULL OR j.queue = $1)
     AND ($2::text IS NULL OR j.job_type = $2)
                RETURNING j.id, j.queue, j.status, step.state AS step_state
            ),
            revived AS (
                UPDATE jobqueue_workflow_steps AS ws
                SET state = 'live', ended_at = NULL
                FROM requeued
                WHERE ws.job_id = requeued.id AND requeued.step_state <> 'live'
            ),
            wake AS (
        SELECT count(pg_notify($3, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM requeued WHERE status IN ('pending', 'waiting')) AS q
    )
            SELECT requeued.id FROM requeued, wake
;

-- JOB_BROWSE_NEWEST
-- A page of jobs newest first (see `job_filters`), below id `$5` and at
-- or above id `$7` (each: no bound if null), at most `$6`.
SELECT * FROM jobqueue_jobs WHERE ($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running'))) AND ($5::uuid IS NULL OR id < $5)
     AND ($7::uuid IS NULL OR id >= $7)
     ORDER BY id DESC
     LIMIT $6
;

-- JOB_WINDOW_FLOOR
-- The id `$2` jobs below id `$1` (no bound if null), newest first: the
-- floor of a search window of that many jobs (none if fewer are left).
    SELECT id FROM jobqueue_jobs
    WHERE $1::uuid IS NULL OR id < $1
    ORDER BY id DESC
    OFFSET $2 - 1
    LIMIT 1
;

-- JOB_BROWSE_RUN_AT
-- A page of jobs by `run_at` (see `job_filters`; a live status), after
-- (`$5`, `$6`) if not null, at most `$7`.
SELECT * FROM jobqueue_jobs WHERE ($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running'))) AND ($5::timestamptz IS NULL OR (run_at, id) > ($5, $6::uuid))
     ORDER BY run_at, id
     LIMIT $7
;

-- JOB_BROWSE_FINISHED
-- A page of finished jobs by when they finished, latest first (see
-- `job_filters`; a finished status), before (`$5`, `$6`) if not null, at
-- most `$7`.
SELECT * FROM jobqueue_jobs WHERE ($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running'))) AND ($5::timestamptz IS NULL OR (finished_at, id) < ($5, $6::uuid))
     ORDER BY finished_at DESC, id DESC
     LIMIT $7
;

-- JOB_COUNT_BOUNDED
-- How many jobs match the filters (see `job_filters`) at or above id `$6`
-- (no bound if null), counting at most `$5`.
SELECT count(*) AS n FROM (SELECT 1 FROM jobqueue_jobs WHERE ($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running'))) AND ($6::uuid IS NULL OR id >= $6) LIMIT $5) AS bounded
;

-- JOB_DELETE_FINISHED
-- Deletes job `$1` if it is finished.
    DELETE FROM jobqueue_jobs
    WHERE id = $1 AND status IN ('completed', 'failed', 'cancelled')
;

-- JOB_THROUGHPUT
-- Finished, completed and failed jobs per minute over the last hour:
-- completed ones from their counts (`jobqueue_completions`, whether their
-- rows are kept or not), failed and cancelled ones from the latest `$1` of
-- their rows at most (the pruning index, newest first).
    WITH ended AS (
        SELECT date_trunc('minute', finished_at) AS minute,
               count(*) AS n,
               count(*) FILTER (WHERE status = 'failed') AS failed
        FROM (
            SELECT finished_at, status FROM jobqueue_jobs
            WHERE status IN ('failed', 'cancelled')
              AND finished_at >= date_trunc('minute', now() - interval '1 hour')
            ORDER BY finished_at DESC
            LIMIT $1
        ) AS latest
        GROUP BY 1
    ), completed AS (
        SELECT minute, sum(completed)::int8 AS n
        FROM jobqueue_completions
        WHERE minute >= date_trunc('minute', now() - interval '1 hour')
        GROUP BY 1
    )
    SELECT minute,
           coalesce(c.n, 0) + coalesce(e.n, 0) AS finished,
           coalesce(c.n, 0) AS completed,
           coalesce(e.failed, 0) AS failed
    FROM ended AS e
    FULL JOIN completed AS c USING (minute)
    ORDER BY minute
;

-- JOB_INDEX_SIZES
-- The indexes named in `$1` (in that order, those that exist): size on
-- disk, entries by the planner's estimate (`reltuples`, as the last
-- vacuum, analyze or build left it; -1 when none has), whether valid, the
-- width of a key (fixed-length columns at their length, others at their
-- average width by the table's statistics, 32 bytes without), the block
-- size, and the statement that rebuilds it without blocking writes,
-- schema-qualified and quoted by the server (`format('%I')`).
    SELECT c.relname::text AS name,
           pg_relation_size(c.oid) AS bytes,
           c.reltuples::float8 AS entries,
           i.indisvalid AS valid,
           (SELECT coalesce(sum(CASE WHEN a.attlen > 0 THEN a.attlen
                                     ELSE coalesce(s.avg_width, 32) END), 0)
            FROM pg_attribute AS a
            LEFT JOIN pg_stats AS s
                   ON s.schemaname = n.nspname AND s.tablename = t.relname
                  AND s.attname = a.attname
            WHERE a.attrelid = c.oid AND a.attnum > 0)::int8 AS key_bytes,
           current_setting('block_size')::int8 AS block_bytes,
           format('REINDEX INDEX CONCURRENTLY %I.%I', n.nspname, c.relname) AS rebuild
    FROM unnest($1::text[]) WITH ORDINALITY AS wanted (name, ord)
    JOIN pg_class AS c ON c.oid = to_regclass(wanted.name)
    JOIN pg_index AS i ON i.indexrelid = c.oid
    JOIN pg_class AS t ON t.oid = i.indrelid
    JOIN pg_namespace AS n ON n.oid = t.relnamespace
    ORDER BY wanted.ord
;

-- JOB_INDEX_LEFTOVERS
-- What an interrupted `REINDEX INDEX CONCURRENTLY` of the jobs table's
-- indexes left behind: invalid indexes named `<index>_ccnew` (the copy
-- being built) or `<index>_ccold` (the original, after the swap), while
-- no index of the table is being built; with the statement that drops
-- each, quoted by the server.
    SELECT c.relname::text AS name,
           format('DROP INDEX CONCURRENTLY %I.%I', n.nspname, c.relname) AS statement
    FROM pg_index AS i
    JOIN pg_class AS c ON c.oid = i.indexrelid
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE i.indrelid = 'jobqueue_jobs'::regclass
      AND NOT i.indisvalid
      AND c.relname ~ '_cc(new|old)[0-9]*$'
      AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index AS p
                      WHERE p.relid = i.indrelid)
    ORDER BY c.relname
;

-- JOB_INDEX_UPKEEP_LOCK
-- Takes, for this session until [`JOB_INDEX_UPKEEP_UNLOCK`], the advisory
-- lock that lets one runner at a time rebuild the jobs table's indexes;
-- false if another session holds it. The key is the ASCII of `jqreindx`,
-- a number no other jobqueue lock uses.
SELECT pg_try_advisory_lock(7670037420274771064) AS locked
;

-- JOB_INDEX_UPKEEP_UNLOCK
-- Releases [`JOB_INDEX_UPKEEP_LOCK`].
SELECT pg_advisory_unlock(7670037420274771064) AS locked
;

-- JOB_INDEX_REBUILD_LIMITS
-- The limits of a rebuild, set on the session before it (a rebuild runs
-- outside any transaction, so `SET LOCAL` would not hold): how long it
-- waits for a lock, or for the transactions it must outlast (each a lock
-- wait), and how long it may run in all.
SET lock_timeout = '10s'; SET statement_timeout = '30min'
;

-- JOB_INDEX_REBUILD_UNLIMIT
-- Puts the session's limits back after a rebuild.
RESET lock_timeout; RESET statement_timeout
;
