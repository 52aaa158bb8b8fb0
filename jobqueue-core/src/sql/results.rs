//! The statements of `jobqueue_results`: the results an enqueuer awaits
//! (`RESULT_*`). The completions that keep them are in `jobs/finish.rs`
//! (`JOB_COMPLETE_RESULTS_MANY`), fenced with the rest of a completion.

/// What became of job `$1`: its kept result (JSON text) if one is kept and
/// has not expired, or, for a step of a workflow, the result its completed
/// step recorded (kept with the workflow); and its row's status and last
/// error if it has a row. One row, its columns NULL where there is
/// nothing.
pub(crate) const RESULT_READ: &str = "
    SELECT coalesce(r.result, s.result)::text AS result,
           j.status AS status, j.last_error AS error
    FROM (SELECT $1::uuid AS id) AS x
    LEFT JOIN jobqueue_results AS r
        ON r.job_id = x.id AND (r.expires_at IS NULL OR r.expires_at > now())
    LEFT JOIN jobqueue_workflow_steps AS s
        ON s.job_id = x.id AND s.state = 'completed' AND s.result IS NOT NULL
    LEFT JOIN jobqueue_jobs AS j ON j.id = x.id";

/// Deletes up to `$1` results whose time ran out, the oldest first.
pub(crate) const RESULT_PRUNE: &str = "
    DELETE FROM jobqueue_results
    WHERE job_id IN (
        SELECT job_id FROM jobqueue_results
        WHERE expires_at < now()
        ORDER BY expires_at
        LIMIT $1
    )";
