-- Per-key concurrency and order.
--
-- A job may carry a concurrency key (`concurrency_key`, e.g. `customer:42`);
-- a queue may limit how many jobs of one key are admitted at once
-- (`jobqueue_queues.key_limit`, fleet-wide), and may keep each key's jobs
-- in enqueue order (`key_ordered`, a limit of 1). Keys are per queue.
--
-- A keyed job of a queue with a key limit is inserted `waiting`: outside
-- the claim index, so waiting jobs cost a claim nothing. A job is admitted
-- (to `pending`, or `scheduled` while its run_at is ahead) when fewer than
-- the limit of its key's jobs are admitted and unfinished: its key's
-- "holders" are its jobs in the live statuses (scheduled, pending,
-- unhandled, claimed, running). An admitted job keeps its place through
-- retries, snoozes and recoveries, until it completes, fails for good or
-- is cancelled. Admissions of a queue are serialized by a transaction-level
-- advisory lock of the queue, and count the holders after taking it.
--
-- `key_checked`: an admission pass looked at this waiting job while it was
-- due (NULL: not yet). Runners admit the unchecked due jobs promptly; the
-- others wait for a holder of their key to finish.
ALTER TABLE jobqueue_jobs
    ADD COLUMN concurrency_key text,
    ADD COLUMN key_checked     boolean,
    ADD CONSTRAINT concurrency_key_length
        CHECK (concurrency_key IS NULL OR length(concurrency_key) BETWEEN 1 AND 255),
    ADD CONSTRAINT waiting_has_key
        CHECK (status <> 'waiting' OR concurrency_key IS NOT NULL);

ALTER TABLE jobqueue_jobs DROP CONSTRAINT status_valid;
ALTER TABLE jobqueue_jobs ADD CONSTRAINT status_valid CHECK (
    status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running',
               'completed', 'failed', 'cancelled'));

-- A key's waiting jobs in enqueue order: the admission of its next jobs.
CREATE INDEX jobqueue_jobs_key_waiting_idx
    ON jobqueue_jobs (queue, concurrency_key, id)
    WHERE status = 'waiting';

-- A key's admitted, unfinished jobs: the count of its holders.
CREATE INDEX jobqueue_jobs_key_held_idx
    ON jobqueue_jobs (queue, concurrency_key)
    WHERE concurrency_key IS NOT NULL
      AND status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running');

-- Waiting jobs no admission looked at yet, by when they are due.
CREATE INDEX jobqueue_jobs_key_new_idx
    ON jobqueue_jobs (run_at)
    WHERE status = 'waiting' AND key_checked IS NOT TRUE;

-- A waiting job holds its unique key, as the other live states do.
DROP INDEX jobqueue_jobs_unique_key_idx;
CREATE UNIQUE INDEX jobqueue_jobs_unique_key_idx
    ON jobqueue_jobs (unique_key)
    WHERE unique_key IS NOT NULL
      AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running');

ALTER TABLE jobqueue_queues
    ADD COLUMN key_limit   integer,
    ADD COLUMN key_ordered boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT key_limit_range
        CHECK (key_limit IS NULL OR key_limit BETWEEN 1 AND 10000),
    ADD CONSTRAINT key_order_one_at_a_time
        CHECK (NOT key_ordered OR key_limit = 1);
