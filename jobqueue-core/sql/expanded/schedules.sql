-- Every statement of jobqueue-core/src/sql/schedules.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- SCHEDULE_DECLARE
-- Declares schedule `$1` (a worker binary's periodic job): inserts it with
-- nothing fired before now, or updates its definition and `declared_at`,
-- keeping its pause and the last slot fired (moved to now if its
-- expression or time zone changed, so a new expression fires none of its
-- past slots). `$2` cron, `$3` time zone, `$4` missed policy, `$5` catch-up
-- bound, `$6` job type, `$7` queue, `$8` priority, `$9` attempts, `$10`
-- payload (JSON text), `$11` tags, `$12` metadata (JSON text; both
-- nullable).
    INSERT INTO jobqueue_schedules AS s
        (name, cron, time_zone, missed, catch_up_most, job_type, queue, priority,
         max_attempts, payload, last_slot, tags, metadata)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, CAST($10 AS jsonb), now(), $11::text[],
            CAST($12::text AS jsonb))
    ON CONFLICT (name) DO UPDATE
    SET last_slot = CASE WHEN s.cron <> EXCLUDED.cron
                           OR s.time_zone IS DISTINCT FROM EXCLUDED.time_zone
                         THEN greatest(s.last_slot, now()) ELSE s.last_slot END,
        cron = EXCLUDED.cron,
        time_zone = EXCLUDED.time_zone,
        missed = EXCLUDED.missed,
        catch_up_most = EXCLUDED.catch_up_most,
        job_type = EXCLUDED.job_type,
        queue = EXCLUDED.queue,
        priority = EXCLUDED.priority,
        max_attempts = EXCLUDED.max_attempts,
        payload = EXCLUDED.payload,
        tags = EXCLUDED.tags,
        metadata = EXCLUDED.metadata,
        declared_at = now()
;

-- SCHEDULE_STATE
-- The state of schedules `$1`, with the database's `now()`: what a runner
-- computes due slots from.
    SELECT name, last_slot, paused, now() AS db_now
    FROM jobqueue_schedules
    WHERE name = ANY($1::text[])
;

-- SCHEDULE_FIRE
-- Fires slots of schedule `$1`: moves its `last_slot` from `$2` (what the
-- runner read) to `$3` and inserts one job per slot (`$4` slots, `$5`
-- ids, each due at its slot), waking its queue on channel `$6`. If another
-- runner moved `last_slot` first, or the schedule was paused meanwhile,
-- nothing is inserted: each slot fires once.
    WITH advanced AS (
        UPDATE jobqueue_schedules
        SET last_slot = $3
        WHERE name = $1 AND last_slot = $2 AND NOT paused
        RETURNING job_type, queue, priority, max_attempts, payload, tags, metadata
    ),
    inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, tags,
             metadata)
        SELECT f.id, a.job_type, a.queue, a.priority, a.payload, a.max_attempts, f.slot, 'pending',
               a.tags, a.metadata
        FROM advanced AS a, unnest($5::uuid[], $4::timestamptz[]) AS f(id, slot)
        RETURNING queue
    ),
    wake AS (
        SELECT pg_notify($6, q.queue) FROM (SELECT DISTINCT queue FROM inserted) AS q
    )
    SELECT (SELECT count(*) FROM inserted) AS fired, (SELECT count(*) FROM wake) AS woke
;

-- SCHEDULE_LIST
-- Every schedule, with the database's `now()`.
    SELECT name, cron, time_zone, missed, catch_up_most, job_type, queue, paused,
           last_slot, declared_at, now() AS db_now
    FROM jobqueue_schedules
    ORDER BY name
;

-- SCHEDULE_SET_PAUSED
-- Pauses (`$2` true) or resumes schedule `$1`. A resumed schedule fires
-- none of the slots that passed while it was paused. Returns whether it
-- was paused before.
    WITH before AS (
        SELECT paused FROM jobqueue_schedules WHERE name = $1 FOR UPDATE
    )
    UPDATE jobqueue_schedules AS s
    SET paused = $2,
        last_slot = CASE WHEN NOT $2 AND s.paused THEN greatest(s.last_slot, now())
                         ELSE s.last_slot END
    FROM before
    WHERE s.name = $1
    RETURNING before.paused AS was_paused
;

-- SCHEDULE_RUN_NOW
-- Enqueues one job of schedule `$1` now (id `$2`), outside its slots,
-- waking its queue on channel `$3`; returns the job's queue.
    WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, tags,
             metadata)
        SELECT $2, s.job_type, s.queue, s.priority, s.payload, s.max_attempts, now(), 'pending',
               s.tags, s.metadata
        FROM jobqueue_schedules AS s
        WHERE s.name = $1
        RETURNING queue
    ),
    wake AS (
        SELECT pg_notify($3, queue) FROM inserted
    )
    SELECT (SELECT count(*) FROM inserted) AS fired, (SELECT count(*) FROM wake) AS woke
;
