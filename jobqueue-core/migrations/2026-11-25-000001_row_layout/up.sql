-- The row laid out for the WAL its updates write.
--
-- No state change is a HOT update (`status` is in every partial index's
-- predicate), so each claim and each completion writes a new version of the
-- row. When that version fits on the row's own page, PostgreSQL logs only
-- the bytes between the longest unchanged prefix and the longest unchanged
-- suffix of the row. Two things make that cheap:
--
-- * Column order. What a job is (id, type, queue, payload, ...) comes
--   first and never changes after the insert; what the claim and the
--   completion write (status, lease, times) comes after, together; the
--   rarely written remainder (errors, stage, counters) last. Before this,
--   `status` was the fifth column and the payload the sixth, so every
--   update logged the payload again.
-- * Free space on the page. With `fillfactor = 70` an insert leaves 30 %
--   of each page free, so most claim and completion versions stay on the
--   page (page pruning frees the versions they replace).
--
-- Measured (20,000 jobs, claims and completions of 16, WAL per job end to
-- end), old layout at fillfactor 100 -> this one at 70: no-op payload
-- 1,158 -> 1,046 bytes; a 320-byte payload 2,251 -> 1,639 bytes. A lower
-- fillfactor writes less WAL still (50: 1,017 and 1,399 bytes) but keeps
-- the pages of the completed history that much emptier: under a steady
-- 5,000 jobs/s with completed jobs kept, the table was 1.8 times as large
-- at 50 as at 100. An operator can choose otherwise with
-- `ALTER TABLE jobqueue_jobs SET (fillfactor = N)` (pages written after).

-- PostgreSQL cannot reorder columns in place, so this migration copies the
-- table: it holds an exclusive lock on `jobqueue_jobs` while it copies every
-- row (stop runners and enqueuing applications first on a large table).
-- The rows already there are copied densely; the fillfactor applies to the
-- pages written afterwards. Privileges granted on the table are granted
-- again on the copy. Anything else that depends on the table (views or
-- foreign keys an application added) makes the migration fail and change
-- nothing: drop it first, recreate it after.

CREATE TABLE jobqueue_jobs_next (
    -- What the job is: written by the insert, never changed.
    id               uuid        NOT NULL,
    job_type         text        NOT NULL,
    queue            text        NOT NULL DEFAULT 'default',
    priority         integer     NOT NULL DEFAULT 100,
    max_attempts     integer     NOT NULL DEFAULT 3,
    created_at       timestamptz NOT NULL DEFAULT now(),
    unique_key       text,
    payload          jsonb       NOT NULL DEFAULT '{}',

    -- What the claim and the completion write.
    run_at           timestamptz NOT NULL DEFAULT now(),
    status           text        NOT NULL DEFAULT 'pending',
    attempts         integer     NOT NULL DEFAULT 0,
    claim_count      integer     NOT NULL DEFAULT 0,
    worker_id        text,
    claimed_at       timestamptz,
    heartbeat_at     timestamptz,
    lease_expires_at timestamptz,
    started_at       timestamptz,
    finished_at      timestamptz,
    progress         smallint    NOT NULL DEFAULT 0,
    cancel_requested boolean     NOT NULL DEFAULT false,

    -- Written by the rarer paths: failures, snoozes, progress reports.
    snoozes          integer     NOT NULL DEFAULT 0,
    events_count     integer     NOT NULL DEFAULT 0,
    current_stage    text,
    last_error       text,
    errors           jsonb       NOT NULL DEFAULT '[]'
);

INSERT INTO jobqueue_jobs_next
    (id, job_type, queue, priority, max_attempts, created_at, unique_key, payload,
     run_at, status, attempts, claim_count, worker_id, claimed_at, heartbeat_at,
     lease_expires_at, started_at, finished_at, progress, cancel_requested,
     snoozes, events_count, current_stage, last_error, errors)
SELECT id, job_type, queue, priority, max_attempts, created_at, unique_key, payload,
       run_at, status, attempts, claim_count, worker_id, claimed_at, heartbeat_at,
       lease_expires_at, started_at, finished_at, progress, cancel_requested,
       snoozes, events_count, current_stage, last_error, errors
FROM jobqueue_jobs;

-- The grants on the old table, made again on the copy (its owner is
-- whoever runs the migrations, as it was for the old table).
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT a.privilege_type,
               CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS grantee,
               a.is_grantable
        FROM pg_class AS c
        CROSS JOIN LATERAL aclexplode(c.relacl) AS a
        LEFT JOIN pg_roles AS r ON r.oid = a.grantee
        WHERE c.oid = 'jobqueue_jobs'::regclass
          AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON jobqueue_jobs_next TO %s%s',
                       g.privilege_type, g.grantee,
                       CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;

DROP TABLE jobqueue_jobs;
ALTER TABLE jobqueue_jobs_next RENAME TO jobqueue_jobs;
ALTER TABLE jobqueue_jobs SET (fillfactor = 70);

ALTER TABLE jobqueue_jobs
    ADD CONSTRAINT jobqueue_jobs_pkey PRIMARY KEY (id),
    ADD CONSTRAINT status_valid CHECK (
        status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running',
                   'completed', 'failed', 'cancelled')),
    ADD CONSTRAINT job_type_length CHECK (char_length(job_type) BETWEEN 1 AND 128),
    ADD CONSTRAINT queue_name_length CHECK (char_length(queue) BETWEEN 1 AND 64),
    ADD CONSTRAINT priority_in_range CHECK (priority BETWEEN 0 AND 1000),
    ADD CONSTRAINT max_attempts_in_range CHECK (max_attempts BETWEEN 1 AND 1000),
    ADD CONSTRAINT attempts_in_range CHECK (attempts BETWEEN 0 AND max_attempts),
    ADD CONSTRAINT progress_in_range CHECK (progress BETWEEN 0 AND 100),
    ADD CONSTRAINT unique_key_length CHECK (
        unique_key IS NULL OR char_length(unique_key) BETWEEN 1 AND 255),
    ADD CONSTRAINT held_has_lease CHECK (
        status NOT IN ('claimed', 'running')
        OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL)),
    ADD CONSTRAINT lease_only_while_held CHECK (
        status IN ('claimed', 'running') OR lease_expires_at IS NULL),
    ADD CONSTRAINT finished_has_time CHECK (
        status NOT IN ('completed', 'failed', 'cancelled') OR finished_at IS NOT NULL);

-- The same indexes as before, under the same names.
CREATE INDEX jobqueue_jobs_fetch_idx
    ON jobqueue_jobs (queue, priority DESC, run_at, id)
    WHERE status = 'pending';

CREATE INDEX jobqueue_jobs_scheduled_idx
    ON jobqueue_jobs (run_at)
    WHERE status = 'scheduled';

CREATE INDEX jobqueue_jobs_unhandled_idx
    ON jobqueue_jobs (job_type, queue)
    WHERE status = 'unhandled';

CREATE INDEX jobqueue_jobs_lease_idx
    ON jobqueue_jobs (queue, lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;

CREATE INDEX jobqueue_jobs_finished_idx
    ON jobqueue_jobs (finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

CREATE INDEX jobqueue_jobs_failed_idx
    ON jobqueue_jobs (finished_at, queue)
    WHERE status = 'failed';

CREATE UNIQUE INDEX jobqueue_jobs_unique_key_idx
    ON jobqueue_jobs (unique_key)
    WHERE unique_key IS NOT NULL
      AND status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running');
