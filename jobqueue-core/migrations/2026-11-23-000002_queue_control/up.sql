-- Queue control: what operators set on a queue, durably.
--
-- A queue comes into being when a job names it; a row here exists only for
-- queues someone paused or limited. Runners read it in every claim: a
-- paused queue is not claimed from; a queue with a global_limit is claimed
-- from only under a lock on its row, up to the limit minus the jobs of the
-- queue held (claimed or running) anywhere. That number is bounded from
-- above without a count while it is far from the limit: held_counted (the
-- last count; NULL: not counted since the limit was set) plus claimed_since
-- (jobs claimed under the lock since); claims count again when the bound
-- comes near the limit.
CREATE TABLE jobqueue_queues (
    name         text        PRIMARY KEY,
    paused       boolean     NOT NULL DEFAULT false,
    paused_at    timestamptz,
    global_limit integer,
    held_counted integer,
    claimed_since integer     NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT name_length CHECK (length(name) BETWEEN 1 AND 64),
    CONSTRAINT global_limit_positive CHECK (global_limit IS NULL OR global_limit >= 1)
);

-- Held jobs by queue: counted for a queue's global limit, and stale-job
-- recovery (lease_expires_at < now()) reads it whole (it holds held jobs
-- only, which every runner bounds).
DROP INDEX jobqueue_jobs_lease_idx;
CREATE INDEX jobqueue_jobs_lease_idx
    ON jobqueue_jobs (queue, lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;

-- Snoozes: a handler's "run me again in D", which uses up no attempt.
ALTER TABLE jobqueue_jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0;
