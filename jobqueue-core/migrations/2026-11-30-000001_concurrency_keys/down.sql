ALTER TABLE jobqueue_queues
    DROP CONSTRAINT key_order_one_at_a_time,
    DROP CONSTRAINT key_limit_range,
    DROP COLUMN key_ordered,
    DROP COLUMN key_limit;

-- Waiting jobs become due jobs (their limit is gone with the column).
UPDATE jobqueue_jobs
SET status = CASE WHEN run_at <= now() THEN 'pending' ELSE 'scheduled' END
WHERE status = 'waiting';

DROP INDEX jobqueue_jobs_unique_key_idx;
CREATE UNIQUE INDEX jobqueue_jobs_unique_key_idx
    ON jobqueue_jobs (unique_key)
    WHERE unique_key IS NOT NULL
      AND status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running');

DROP INDEX jobqueue_jobs_key_new_idx;
DROP INDEX jobqueue_jobs_key_held_idx;
DROP INDEX jobqueue_jobs_key_waiting_idx;

ALTER TABLE jobqueue_jobs DROP CONSTRAINT status_valid;
ALTER TABLE jobqueue_jobs ADD CONSTRAINT status_valid CHECK (
    status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running',
               'completed', 'failed', 'cancelled'));

ALTER TABLE jobqueue_jobs
    DROP CONSTRAINT waiting_has_key,
    DROP CONSTRAINT concurrency_key_length,
    DROP COLUMN key_checked,
    DROP COLUMN concurrency_key;
