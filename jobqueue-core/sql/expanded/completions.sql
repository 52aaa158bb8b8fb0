-- Every statement of jobqueue-core/src/sql/completions.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- COMPLETIONS_FOLD
-- Folds the completion counts of minutes more than an hour old into one
-- row per minute, queue and job type (`backend` 0): a connection writes
-- only the current minute, so what is folded never changes again.
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
    DO UPDATE SET completed = c.completed + EXCLUDED.completed
;

-- COMPLETIONS_WITHIN
-- Jobs completed in the minutes that began less than `$1` seconds before
-- the current one, from their counts.
    SELECT coalesce(sum(completed), 0)::int8 AS n
    FROM jobqueue_completions
    WHERE minute > date_trunc('minute', now()) - make_interval(secs => $1)
;

-- COMPLETIONS_PRUNE
-- Deletes the completion counts of minutes more than `$1` seconds ago.
    DELETE FROM jobqueue_completions
    WHERE minute < now() - make_interval(secs => $1)
;
