ALTER TABLE jobqueue_jobs DROP COLUMN snoozes;
DROP INDEX jobqueue_jobs_lease_idx;
CREATE INDEX jobqueue_jobs_lease_idx
    ON jobqueue_jobs (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;
DROP TABLE jobqueue_queues;
