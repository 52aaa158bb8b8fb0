-- Queue isolation and plan-proof hot-path statements.
--
-- Two new states keep the claim index down to what a claim can take:
--   scheduled: not due yet (run_at in the future); moved to pending when due
--   unhandled: set aside by a runner that works its queue but has no handler
--              for its type; back to pending when a runner that has one runs
-- so 'pending' now means "due, and claimable".
ALTER TABLE jobqueue_jobs DROP CONSTRAINT status_valid;
ALTER TABLE jobqueue_jobs ADD CONSTRAINT status_valid CHECK (
    status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running',
               'completed', 'failed', 'cancelled'));
UPDATE jobqueue_jobs SET status = 'scheduled' WHERE status = 'pending' AND run_at > now();

-- A lease exactly while held, so the lease index can be keyed on the lease
-- alone (see jobqueue_jobs_lease_idx).
UPDATE jobqueue_jobs SET lease_expires_at = NULL
WHERE status NOT IN ('claimed', 'running') AND lease_expires_at IS NOT NULL;
ALTER TABLE jobqueue_jobs ADD CONSTRAINT lease_only_while_held CHECK (
    status IN ('claimed', 'running') OR lease_expires_at IS NULL);

-- The claim: due jobs of one queue, in the claim's ORDER BY. A claim for one
-- queue starts at its queue's entries and never steps over another queue's
-- backlog, future jobs (scheduled) or parked ones (unhandled).
DROP INDEX jobqueue_jobs_fetch_idx;
CREATE INDEX jobqueue_jobs_fetch_idx
    ON jobqueue_jobs (queue, priority DESC, run_at, id)
    WHERE status = 'pending';

-- Moving due scheduled jobs to pending.
CREATE INDEX jobqueue_jobs_scheduled_idx
    ON jobqueue_jobs (run_at)
    WHERE status = 'scheduled';

-- Taking parked jobs back when a runner that handles their type runs.
CREATE INDEX jobqueue_jobs_unhandled_idx
    ON jobqueue_jobs (job_type, queue)
    WHERE status = 'unhandled';

-- Stale-job recovery. Keyed on the lease, not on the status: the batch
-- statements on held jobs (complete, fail, heartbeat, ...) filter on
-- status IN ('claimed', 'running'), and an index with that predicate lets
-- the planner, misled by statistics taken before the jobs were claimed,
-- drive them from the index instead of from the primary key.
DROP INDEX jobqueue_jobs_lease_idx;
CREATE INDEX jobqueue_jobs_lease_idx
    ON jobqueue_jobs (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;

-- At most one live job per unique key: the new states are live.
DROP INDEX jobqueue_jobs_unique_key_idx;
CREATE UNIQUE INDEX jobqueue_jobs_unique_key_idx
    ON jobqueue_jobs (unique_key)
    WHERE unique_key IS NOT NULL
      AND status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running');
