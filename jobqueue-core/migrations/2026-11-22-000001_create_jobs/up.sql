-- The job table. One row per job; its status column drives the lifecycle:
--   pending -> claimed -> running -> completed
--                                 -> pending (retry, run_at = now() + backoff)
--                                 -> failed (attempts exhausted: dead letter)
--   pending | claimed | running  -> cancelled
CREATE TABLE jobqueue_jobs (
    id               uuid        PRIMARY KEY,          -- UUIDv7, made by the client
    job_type         text        NOT NULL,
    queue            text        NOT NULL DEFAULT 'default',
    priority         integer     NOT NULL DEFAULT 100, -- higher runs first
    status           text        NOT NULL DEFAULT 'pending',
    payload          jsonb       NOT NULL DEFAULT '{}',

    -- Scheduling and retries.
    run_at           timestamptz NOT NULL DEFAULT now(),
    attempts         integer     NOT NULL DEFAULT 0,   -- claims that counted
    max_attempts     integer     NOT NULL DEFAULT 3,
    last_error       text,
    errors           jsonb       NOT NULL DEFAULT '[]', -- last few failures, oldest first
    unique_key       text,

    -- Ownership: the lease. claim_count is the fencing token; it only grows.
    worker_id        text,
    claim_count      integer     NOT NULL DEFAULT 0,
    claimed_at       timestamptz,
    heartbeat_at     timestamptz,
    lease_expires_at timestamptz,
    cancel_requested boolean     NOT NULL DEFAULT false,

    -- Progress reported by the handler.
    progress         smallint    NOT NULL DEFAULT 0,
    current_stage    text,
    events_count     integer     NOT NULL DEFAULT 0,

    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,

    CONSTRAINT status_valid CHECK (
        status IN ('pending', 'claimed', 'running', 'completed', 'failed', 'cancelled')),
    -- Names are 1-128 (types) or 1-64 (queues) characters of [A-Za-z0-9_.:-].
    -- The library checks the characters before any insert or claim; the
    -- table checks only the lengths: a per-row character check (regex or
    -- translate) costs about as much as the rest of a bulk insert together.
    CONSTRAINT job_type_length CHECK (char_length(job_type) BETWEEN 1 AND 128),
    CONSTRAINT queue_name_length CHECK (char_length(queue) BETWEEN 1 AND 64),
    CONSTRAINT priority_in_range CHECK (priority BETWEEN 0 AND 1000),
    CONSTRAINT max_attempts_in_range CHECK (max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT attempts_in_range CHECK (attempts BETWEEN 0 AND max_attempts),
    CONSTRAINT progress_in_range CHECK (progress BETWEEN 0 AND 100),
    CONSTRAINT unique_key_length CHECK (unique_key IS NULL OR char_length(unique_key) BETWEEN 1 AND 255),
    CONSTRAINT held_has_lease CHECK (
        status NOT IN ('claimed', 'running')
        OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT finished_has_time CHECK (
        status NOT IN ('completed', 'failed', 'cancelled') OR finished_at IS NOT NULL)
);

-- The claim: pending rows only, in the claim's ORDER BY. Finished rows never
-- enter this index, so its size tracks the backlog, not the history.
CREATE INDEX jobqueue_jobs_fetch_idx
    ON jobqueue_jobs (priority DESC, run_at, id)
    WHERE status = 'pending';

-- Stale-job recovery: held rows by lease expiry.
CREATE INDEX jobqueue_jobs_lease_idx
    ON jobqueue_jobs (lease_expires_at)
    WHERE status IN ('claimed', 'running');

-- Pruning: finished rows by age.
CREATE INDEX jobqueue_jobs_finished_idx
    ON jobqueue_jobs (finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- At most one live job per unique key; finished jobs do not block.
CREATE UNIQUE INDEX jobqueue_jobs_unique_key_idx
    ON jobqueue_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('pending', 'claimed', 'running');
