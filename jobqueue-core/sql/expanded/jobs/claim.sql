-- Every statement of jobqueue-core/src/sql/jobs/claim.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- JOB_CLAIM_QUEUES
-- Claims up to `$2` due jobs from the queues named in `$1` (distinct
-- names), for worker `$3`, lease `$4` seconds: see `claim_from_ready!`.
-- Queues without due jobs take no part of the claim. `$7` to `$10`
-- (queue, priority, run_at, id) are resume points, at most one per queue:
-- whether a queue that has one has due jobs is looked up in the same
-- three ranges.
WITH named AS (
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
    limited AS (SELECT NULL::text AS name, NULL::int8 AS room, NULL::bool AS rated WHERE false),
    ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room, coalesce(l.rated, false) AS rated
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
WITH named AS (
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
    locked AS MATERIALIZED (
        SELECT c.name, c.global_limit, c.held_counted, c.claimed_since, c.rate_starts,
               c.rate_period, c.rate_at, c.rate_jobs
        FROM jobqueue_queues AS c
        WHERE (c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
          AND (cardinality($1::text[]) = 0 OR c.name = ANY($1::text[]))
          AND current_setting('transaction_isolation') = 'read committed'
          AND c.name = ANY(ARRAY(SELECT f.queue FROM found AS f))
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
        SELECT u.name, least(u.held_room, u.rate_room, u.start_room) AS room,
               u.rate_starts IS NOT NULL AS rated
        FROM used AS u
    ),
    ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room, coalesce(l.rated, false) AS rated
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
                   CASE WHEN ready.rated AND $14::int8 IS NOT NULL
                        THEN least(share.n, ready.room,
                                   greatest($14::int8 - coalesce(sum(least(share.n, ready.room))
                                       FILTER (WHERE ready.rated)
                                       OVER (ORDER BY ready.queue <= $11::text, ready.queue
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                                       0), 0))
                        ELSE least(share.n, ready.room)
                   END AS n
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
        SELECT j.queue, j.n
        FROM (SELECT queue, count(*)::int4 AS n FROM claimed GROUP BY queue) AS j
        JOIN limited AS l ON l.name = j.queue
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
                                     + greatest($16::int8, 0) AS now,
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
                                   * 1000000)::int8 + greatest($16::int8, 0)
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
-- any queue, and there are no resume points (`$7` to `$10` go unused),
-- so every claim binds the same parameters.
WITH RECURSIVE after_start AS (
        SELECT first.queue,
               0 + CASE WHEN first.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = first.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT false)))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = first.queue LIMIT 1), 1) > 0) THEN 1 ELSE 0 END AS n
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
                                    AND NOT false)))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = next.queue LIMIT 1), 1) > 0) THEN 1 ELSE 0 END
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
                                    AND NOT false)))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = first.queue LIMIT 1), 1) > 0) THEN 1 ELSE 0 END AS n
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
                                    AND NOT false)))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = next.queue LIMIT 1), 1) > 0) THEN 1 ELSE 0 END
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
    limited AS (SELECT NULL::text AS name, NULL::int8 AS room, NULL::bool AS rated WHERE false),
    ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room, coalesce(l.rated, false) AS rated
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
-- [`JOB_CLAIM_QUEUES_LIMITED`] does. The walk counts a limited queue as
-- one it may claim from when its row, read without a lock, leaves it
-- room (`may_have_room!`), and the claim then locks the rows of the
-- limited queues the walk reached, and of no other: with a thousand
-- rate-limited queues, a claim of 32 jobs locks at most 32 rows, not a
-- thousand, and claims that walk different queues never wait for each
-- other.
WITH RECURSIVE after_start AS (
        SELECT first.queue,
               0 + CASE WHEN first.queue IS NOT NULL AND (NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = first.queue
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT (c.rate_starts IS NULL
              OR c.rate_starts > (SELECT coalesce(sum(n), 0)
                                  FROM unnest(c.rate_jobs[width_bucket(clock_timestamp() - (c.rate_period + greatest(c.rate_period / 40, interval '25 milliseconds')), c.rate_at) + 1:]) AS n)))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = first.queue LIMIT 1), 1) > 0) THEN 1 ELSE 0 END AS n
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
                                    AND NOT (c.rate_starts IS NULL
              OR c.rate_starts > (SELECT coalesce(sum(n), 0)
                                  FROM unnest(c.rate_jobs[width_bucket(clock_timestamp() - (c.rate_period + greatest(c.rate_period / 40, interval '25 milliseconds')), c.rate_at) + 1:]) AS n)))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = next.queue LIMIT 1), 1) > 0) THEN 1 ELSE 0 END
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
                                    AND NOT (c.rate_starts IS NULL
              OR c.rate_starts > (SELECT coalesce(sum(n), 0)
                                  FROM unnest(c.rate_jobs[width_bucket(clock_timestamp() - (c.rate_period + greatest(c.rate_period / 40, interval '25 milliseconds')), c.rate_at) + 1:]) AS n)))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = first.queue LIMIT 1), 1) > 0) THEN 1 ELSE 0 END AS n
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
                                    AND NOT (c.rate_starts IS NULL
              OR c.rate_starts > (SELECT coalesce(sum(n), 0)
                                  FROM unnest(c.rate_jobs[width_bucket(clock_timestamp() - (c.rate_period + greatest(c.rate_period / 40, interval '25 milliseconds')), c.rate_at) + 1:]) AS n)))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = next.queue LIMIT 1), 1) > 0) THEN 1 ELSE 0 END
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
    locked AS MATERIALIZED (
        SELECT c.name, c.global_limit, c.held_counted, c.claimed_since, c.rate_starts,
               c.rate_period, c.rate_at, c.rate_jobs
        FROM jobqueue_queues AS c
        WHERE (c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
          AND (cardinality($1::text[]) = 0 OR c.name = ANY($1::text[]))
          AND current_setting('transaction_isolation') = 'read committed'
          AND c.name = ANY(ARRAY(SELECT f.queue FROM found AS f))
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
        SELECT u.name, least(u.held_room, u.rate_room, u.start_room) AS room,
               u.rate_starts IS NOT NULL AS rated
        FROM used AS u
    ),
    ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room, coalesce(l.rated, false) AS rated
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
                   CASE WHEN ready.rated AND $14::int8 IS NOT NULL
                        THEN least(share.n, ready.room,
                                   greatest($14::int8 - coalesce(sum(least(share.n, ready.room))
                                       FILTER (WHERE ready.rated)
                                       OVER (ORDER BY ready.queue <= $11::text, ready.queue
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                                       0), 0))
                        ELSE least(share.n, ready.room)
                   END AS n
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
        SELECT j.queue, j.n
        FROM (SELECT queue, count(*)::int4 AS n FROM claimed GROUP BY queue) AS j
        JOIN limited AS l ON l.name = j.queue
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
                                     + greatest($16::int8, 0) AS now,
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
                                   * 1000000)::int8 + greatest($16::int8, 0)
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
