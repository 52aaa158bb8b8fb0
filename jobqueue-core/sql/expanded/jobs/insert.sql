-- Every statement of jobqueue-core/src/sql/jobs/insert.rs, whole, with its doc
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
-- `KEY_ROOM_FOR_INSERT` in `keys.rs`, and `status_at_insert!`), `$16`
-- tags (nullable), `$17` metadata (JSON object text, nullable).
WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, unique_key,
             traceparent, concurrency_key, key_checked, tags, metadata)
        SELECT $1, $2, $3, $4, CAST($5 AS jsonb), $6, t.run_at, CASE WHEN $13::text IS NULL OR NOT EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = $3 AND kq.key_limit IS NOT NULL)
                  THEN (CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END)
              WHEN $15::int4 IS NOT NULL
                   AND (SELECT CASE WHEN kq.key_ordered THEN 1 <= $15::int4
                                    ELSE t.run_at <= now() AND 1 <= $15::int4 END
                        FROM jobqueue_queues AS kq WHERE kq.name = $3)
                  THEN (CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END)
              ELSE 'waiting' END, $9, $12, $13, CASE WHEN $13::text IS NOT NULL AND t.run_at <= now() AND (1 > 1 OR $14::bool) THEN true END, $16::text[], CAST($17::text AS jsonb)
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
-- Inserts one job without a unique key, tags or metadata and without
-- waking anyone (the common case under load, when the notification is
-- debounced): `$1` to `$8` as in [`JOB_INSERT`], `$9` traceparent
-- (nullable).
INSERT INTO jobqueue_jobs
        (id, job_type, queue, priority, payload, max_attempts, run_at, status, traceparent)
    SELECT $1, $2, $3, $4, CAST($5 AS jsonb), $6, t.run_at, CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END, $9
    FROM (SELECT COALESCE($7, now() + make_interval(secs => $8)) AS run_at) AS t
;

-- JOB_INSERT_MANY
-- Inserts many jobs in one statement from parallel arrays (same order as
-- [`JOB_INSERT`]'s parameters; `$12`, the one traceparent of them all;
-- `$13` the concurrency keys; `$14` and `$15` each job's key's waiting and
-- room; `$16` each job's tags as an array literal, `$17` its metadata as
-- JSON text, each nullable) and wakes their queues; returns the ids
-- actually inserted.
WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, unique_key,
             traceparent, concurrency_key, key_checked, tags, metadata)
        SELECT t.id, t.job_type, t.queue, t.priority, CAST(t.payload AS jsonb), t.max_attempts,
               t.run_at, CASE WHEN t.concurrency_key IS NULL OR NOT EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = t.queue AND kq.key_limit IS NOT NULL)
                  THEN (CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END)
              WHEN t.key_room IS NOT NULL
                   AND (SELECT CASE WHEN kq.key_ordered THEN t.key_seat <= t.key_room
                                    ELSE t.run_at <= now() AND t.key_rank <= t.key_room END
                        FROM jobqueue_queues AS kq WHERE kq.name = t.queue)
                  THEN (CASE WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END)
              ELSE 'waiting' END, t.unique_key, $12::text, t.concurrency_key, CASE WHEN t.concurrency_key IS NOT NULL AND t.run_at <= now() AND (t.key_rank > 1 OR t.key_waits) THEN true END, CAST(t.tags AS text[]), CAST(t.metadata AS jsonb)
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
                   AS r) AS t
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
