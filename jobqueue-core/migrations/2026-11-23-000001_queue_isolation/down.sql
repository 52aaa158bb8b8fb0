DROP INDEX jobqueue_jobs_unique_key_idx;
UPDATE jobqueue_jobs SET status = 'pending' WHERE status IN ('scheduled', 'unhandled');
CREATE UNIQUE INDEX jobqueue_jobs_unique_key_idx
    ON jobqueue_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('pending', 'claimed', 'running');
DROP INDEX jobqueue_jobs_lease_idx;
CREATE INDEX jobqueue_jobs_lease_idx
    ON jobqueue_jobs (lease_expires_at)
    WHERE status IN ('claimed', 'running');
DROP INDEX jobqueue_jobs_unhandled_idx;
DROP INDEX jobqueue_jobs_scheduled_idx;
DROP INDEX jobqueue_jobs_fetch_idx;
CREATE INDEX jobqueue_jobs_fetch_idx
    ON jobqueue_jobs (priority DESC, run_at, id)
    WHERE status = 'pending';
ALTER TABLE jobqueue_jobs DROP CONSTRAINT lease_only_while_held;
ALTER TABLE jobqueue_jobs DROP CONSTRAINT status_valid;
ALTER TABLE jobqueue_jobs ADD CONSTRAINT status_valid CHECK (
    status IN ('pending', 'claimed', 'running', 'completed', 'failed', 'cancelled'));
