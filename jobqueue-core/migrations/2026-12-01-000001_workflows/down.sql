-- Blocked jobs lose their parents with the tables: they are cancelled
-- rather than run before what they waited for.
UPDATE jobqueue_jobs
SET status = 'cancelled', finished_at = now()
WHERE status = 'blocked';

DROP INDEX jobqueue_jobs_blocked_idx;

ALTER TABLE jobqueue_jobs DROP CONSTRAINT status_valid;
ALTER TABLE jobqueue_jobs ADD CONSTRAINT status_valid CHECK (
    status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running',
               'completed', 'failed', 'cancelled'));

ALTER TABLE jobqueue_jobs
    DROP CONSTRAINT blocked_in_workflow,
    DROP COLUMN workflow_id;

DROP TABLE jobqueue_workflow_edges;
DROP TABLE jobqueue_workflow_steps;
DROP TABLE jobqueue_workflows;
