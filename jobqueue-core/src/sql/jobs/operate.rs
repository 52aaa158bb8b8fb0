//! An operator's actions (the command line, the dashboard, the API):
//! cancel a job, retry finished jobs, delete a finished job.

/// Cancels job `$1`: a job not held (waiting, scheduled, pending, unhandled) at once,
/// a held one by raising its cancel flag (its handler sees it; its runner
/// finishes it as `cancelled`); a job cancelled at once has its waiters
/// told (`tell_ended!`). Returns the resulting status; no row if the job is
/// finished or unknown.
pub(crate) const JOB_CANCEL: &str = concat!(
    "
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
    ),",
    tell_ended!("cancelled"),
    "
    SELECT c.status, c.in_workflow, c.queue, c.key FROM cancelled AS c LEFT JOIN told ON true"
);

/// Puts the finished jobs `j` for which `$where` holds back to `pending`
/// (a keyed job of a queue with a key limit: `waiting`, for its key to
/// admit it), due now, with their attempts reset (their error history is
/// kept), and wakes their queues on the channel bound as `$channel`. A job whose
/// unique key is held by a live job meanwhile is left alone, and of jobs
/// that share a unique key only the newest is requeued (a second would
/// break the key's uniqueness, and the whole statement with it). A workflow
/// step goes back to `blocked` while a step it comes after has not
/// settled, and its step is `live` again (its end is settled anew).
/// Returns the ids requeued.
///
/// The step rows are locked first (CTE `step`, in id order, as a
/// completion's count-down locks them), and the choice between `blocked`
/// and due is made from the locked row: a completion of the last parent
/// that committed while this statement waited has counted the step down
/// to 0, and the step is due; one that waits for this statement's lock
/// counts down after it, and releases the step it finds `blocked` (see
/// `release_children!`). Read from the statement's snapshot instead, a
/// count-down committed meanwhile would leave the step `blocked` with no
/// parent left to release it.
macro_rules! requeue_where {
    ($where:literal, $channel:literal) => {
        concat!(
            "WITH candidate AS MATERIALIZED (
                SELECT DISTINCT ON (coalesce(j.unique_key, j.id::text)) j.id
                FROM jobqueue_jobs AS j
                WHERE ",
            $where,
            "
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
                SET status = CASE WHEN step.parents_left > 0 THEN 'blocked' ELSE ",
            status_for_keyed!("now()", "j.queue", "j.concurrency_key"),
            " END,
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
                WHERE j.id = candidate.id AND ",
            $where,
            "
                RETURNING j.id, j.queue, j.status, step.state AS step_state
            ),
            revived AS (
                UPDATE jobqueue_workflow_steps AS ws
                SET state = 'live', ended_at = NULL
                FROM requeued
                WHERE ws.job_id = requeued.id AND requeued.step_state <> 'live'
            ),
            ",
            wake_queues_of!("requeued", $channel),
            "
            SELECT requeued.id FROM requeued, wake"
        )
    };
}

/// Puts job `$1` back to `pending` if it is failed or cancelled (see
/// `requeue_where`); `$2` notify channel.
pub(crate) const JOB_RETRY: &str =
    requeue_where!("j.id = $1 AND j.status IN ('failed', 'cancelled')", "$2");

/// Puts the failed jobs of queue `$1` and type `$2` (each: any if null)
/// back to `pending` (see `requeue_where`); `$3` notify channel.
pub(crate) const JOB_RETRY_FAILED: &str = requeue_where!(
    "j.status = 'failed'
     AND ($1::text IS NULL OR j.queue = $1)
     AND ($2::text IS NULL OR j.job_type = $2)",
    "$3"
);

/// Deletes job `$1` if it is finished.
pub(crate) const JOB_DELETE_FINISHED: &str = "
    DELETE FROM jobqueue_jobs
    WHERE id = $1 AND status IN ('completed', 'failed', 'cancelled')";
