-- Every statement of jobqueue-core/src/sql/jobs/operate.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- JOB_CANCEL
-- Cancels job `$1`: a job not held (waiting, scheduled, pending, unhandled) at once,
-- a held one by raising its cancel flag (its handler sees it; its runner
-- finishes it as `cancelled`); a job cancelled at once has its waiters
-- told (`tell_ended!`). Returns the resulting status; no row if the job is
-- finished or unknown.
    WITH cancelled AS (
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.status IN ('claimed', 'running') THEN j.status ELSE 'cancelled' END,
        finished_at = CASE WHEN j.status IN ('claimed', 'running') THEN j.finished_at ELSE now() END,
        cancel_requested = j.status IN ('claimed', 'running')
    WHERE j.id = $1
      AND j.status IN ('blocked', 'waiting', 'scheduled', 'pending', 'unhandled', 'claimed',
                       'running')
    RETURNING j.id, j.status, j.workflow_id IS NOT NULL AS in_workflow, j.queue,
              j.concurrency_key AS key
    ),
    told AS (
        SELECT count(pg_notify('jobqueue_results', e.id::text)) AS n
        FROM cancelled AS e WHERE e.status IN ('failed', 'cancelled')
    )
    SELECT c.status, c.in_workflow, c.queue, c.key FROM cancelled AS c LEFT JOIN told ON true
;

-- JOB_RETRY
-- Puts job `$1` back to `pending` if it is failed or cancelled (see
-- `requeue_where`); `$2` notify channel.
WITH candidate AS MATERIALIZED (
                SELECT DISTINCT ON (coalesce(j.unique_key, j.id::text)) j.id
                FROM jobqueue_jobs AS j
                WHERE j.id = $1 AND j.status IN ('failed', 'cancelled')
                  AND (j.unique_key IS NULL OR NOT EXISTS (
                        SELECT 1 FROM jobqueue_jobs AS live
                        WHERE live.unique_key = j.unique_key
                          AND live.status IN ('waiting', 'scheduled', 'pending', 'unhandled',
                                              'claimed', 'running')))
                ORDER BY coalesce(j.unique_key, j.id::text), j.id DESC
            ),
            step AS MATERIALIZED (
                SELECT ws.job_id, ws.parents_left, ws.state
                FROM jobqueue_workflow_steps AS ws
                WHERE ws.job_id IN (SELECT id FROM candidate)
                ORDER BY ws.job_id
                FOR UPDATE
            ),
            requeued AS (
                UPDATE jobqueue_jobs AS j
                SET status = CASE WHEN step.parents_left > 0 THEN 'blocked' ELSE CASE WHEN j.concurrency_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = j.queue AND kq.key_limit IS NOT NULL) THEN 'waiting' WHEN now() <= now() THEN 'pending' ELSE 'scheduled' END END,
                    key_checked = NULL,
                    run_at = now(),
                    attempts = 0,
                    finished_at = NULL,
                    worker_id = NULL,
                    lease_expires_at = NULL,
                    cancel_requested = false,
                    progress = 0,
                    current_stage = NULL
                FROM candidate LEFT JOIN step ON step.job_id = candidate.id
                WHERE j.id = candidate.id AND j.id = $1 AND j.status IN ('failed', 'cancelled')
                RETURNING j.id, j.queue, j.status, step.state AS step_state
            ),
            revived AS (
                UPDATE jobqueue_workflow_steps AS ws
                SET state = 'live', ended_at = NULL
                FROM requeued
                WHERE ws.job_id = requeued.id AND requeued.step_state <> 'live'
            ),
            wake AS (
        SELECT count(pg_notify($2, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM requeued WHERE status IN ('pending', 'waiting')) AS q
    )
            SELECT requeued.id FROM requeued, wake
;

-- JOB_RETRY_FAILED
-- Puts the failed jobs of queue `$1` and type `$2` (each: any if null)
-- back to `pending` (see `requeue_where`); `$3` notify channel.
WITH candidate AS MATERIALIZED (
                SELECT DISTINCT ON (coalesce(j.unique_key, j.id::text)) j.id
                FROM jobqueue_jobs AS j
                WHERE j.status = 'failed'
     AND ($1::text IS NULL OR j.queue = $1)
     AND ($2::text IS NULL OR j.job_type = $2)
                  AND (j.unique_key IS NULL OR NOT EXISTS (
                        SELECT 1 FROM jobqueue_jobs AS live
                        WHERE live.unique_key = j.unique_key
                          AND live.status IN ('waiting', 'scheduled', 'pending', 'unhandled',
                                              'claimed', 'running')))
                ORDER BY coalesce(j.unique_key, j.id::text), j.id DESC
            ),
            step AS MATERIALIZED (
                SELECT ws.job_id, ws.parents_left, ws.state
                FROM jobqueue_workflow_steps AS ws
                WHERE ws.job_id IN (SELECT id FROM candidate)
                ORDER BY ws.job_id
                FOR UPDATE
            ),
            requeued AS (
                UPDATE jobqueue_jobs AS j
                SET status = CASE WHEN step.parents_left > 0 THEN 'blocked' ELSE CASE WHEN j.concurrency_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = j.queue AND kq.key_limit IS NOT NULL) THEN 'waiting' WHEN now() <= now() THEN 'pending' ELSE 'scheduled' END END,
                    key_checked = NULL,
                    run_at = now(),
                    attempts = 0,
                    finished_at = NULL,
                    worker_id = NULL,
                    lease_expires_at = NULL,
                    cancel_requested = false,
                    progress = 0,
                    current_stage = NULL
                FROM candidate LEFT JOIN step ON step.job_id = candidate.id
                WHERE j.id = candidate.id AND j.status = 'failed'
     AND ($1::text IS NULL OR j.queue = $1)
     AND ($2::text IS NULL OR j.job_type = $2)
                RETURNING j.id, j.queue, j.status, step.state AS step_state
            ),
            revived AS (
                UPDATE jobqueue_workflow_steps AS ws
                SET state = 'live', ended_at = NULL
                FROM requeued
                WHERE ws.job_id = requeued.id AND requeued.step_state <> 'live'
            ),
            wake AS (
        SELECT count(pg_notify($3, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM requeued WHERE status IN ('pending', 'waiting')) AS q
    )
            SELECT requeued.id FROM requeued, wake
;

-- JOB_DELETE_FINISHED
-- Deletes job `$1` if it is finished.
    DELETE FROM jobqueue_jobs
    WHERE id = $1 AND status IN ('completed', 'failed', 'cancelled')
;
