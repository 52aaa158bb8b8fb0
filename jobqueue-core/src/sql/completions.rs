//! The statements of `jobqueue_completions`: how many jobs completed, per
//! minute, queue, job type and server process (`backend`).
//!
//! The completions of `jobs/finish.rs` add to these counts (`count_completed!`),
//! each connection to its own row (`backend` = `pg_backend_pid()`), so
//! concurrent completions never wait on one another's row. The statements
//! here fold, read and prune them, through the primary key
//! `(minute, queue, job_type, backend)`.

/// Folds the completion counts of minutes more than an hour old into one
/// row per minute, queue and job type (`backend` 0): a connection writes
/// only the current minute, so what is folded never changes again.
pub(crate) const COMPLETIONS_FOLD: &str = "
    WITH folded AS (
        DELETE FROM jobqueue_completions
        WHERE minute < now() - interval '1 hour' AND backend <> 0
        RETURNING minute, queue, job_type, completed
    )
    INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
    SELECT minute, queue, job_type, 0, sum(completed)::int8
    FROM folded
    GROUP BY minute, queue, job_type
    ON CONFLICT (minute, queue, job_type, backend)
    DO UPDATE SET completed = c.completed + EXCLUDED.completed";

/// Jobs completed in the minutes that began less than `$1` seconds before
/// the current one, from their counts.
pub(crate) const COMPLETIONS_WITHIN: &str = "
    SELECT coalesce(sum(completed), 0)::int8 AS n
    FROM jobqueue_completions
    WHERE minute > date_trunc('minute', now()) - make_interval(secs => $1)";

/// Deletes the completion counts of minutes more than `$1` seconds ago.
pub(crate) const COMPLETIONS_PRUNE: &str = "
    DELETE FROM jobqueue_completions
    WHERE minute < now() - make_interval(secs => $1)";
