-- Every statement of jobqueue-core/src/sql/jobs/browse.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- JOB_STATS_BY_TYPE
-- Counts live jobs (blocked, waiting, scheduled, pending, unhandled,
-- claimed, running) by job type and status: a type no runner handles
-- shows up as unhandled here.
    SELECT job_type, 'blocked' AS status, count(*) AS jobs
    FROM jobqueue_jobs WHERE status = 'blocked' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'waiting', count(*) AS jobs
    FROM jobqueue_jobs WHERE status = 'waiting' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'pending', count(*) AS jobs
    FROM jobqueue_jobs WHERE status = 'pending' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'scheduled', count(*)
    FROM jobqueue_jobs WHERE status = 'scheduled' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'unhandled', count(*)
    FROM jobqueue_jobs WHERE status = 'unhandled' GROUP BY job_type
    UNION ALL
    SELECT job_type, status, count(*)
    FROM jobqueue_jobs WHERE lease_expires_at IS NOT NULL GROUP BY job_type, status
    ORDER BY job_type, status
;

-- JOB_GET
-- Reads one job by id.
SELECT * FROM jobqueue_jobs WHERE id = $1
;

-- JOB_GET_STATUS
-- Reads the status of one job by id.
SELECT status FROM jobqueue_jobs WHERE id = $1
;

-- JOB_BROWSE_NEWEST
-- A page of jobs newest first (see `job_filters`, the tag `$8`), below id
-- `$5` and at or above id `$7` (each: no bound if null), at most `$6`.
SELECT * FROM jobqueue_jobs WHERE ($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running')))
             AND ($8::text IS NULL OR (tags @> ARRAY[$8::text] AND tags IS NOT NULL)) AND ($5::uuid IS NULL OR id < $5)
     AND ($7::uuid IS NULL OR id >= $7)
     ORDER BY id DESC
     LIMIT $6
;

-- JOB_WINDOW_FLOOR
-- The id `$2` jobs below id `$1` (no bound if null), newest first: the
-- floor of a search window of that many jobs (none if fewer are left).
    SELECT id FROM jobqueue_jobs
    WHERE $1::uuid IS NULL OR id < $1
    ORDER BY id DESC
    OFFSET $2 - 1
    LIMIT 1
;

-- JOB_WINDOW_FLOOR_TAGGED
-- The id `$2` tagged jobs below id `$1` (no bound if null), newest
-- first: the floor of a tag search's window of that many tagged jobs
-- (none if fewer are left), through `jobqueue_jobs_tagged_idx`.
    SELECT id FROM jobqueue_jobs
    WHERE tags IS NOT NULL AND ($1::uuid IS NULL OR id < $1)
    ORDER BY id DESC
    OFFSET $2 - 1
    LIMIT 1
;

-- JOB_BROWSE_RUN_AT
-- A page of jobs by `run_at` (see `job_filters`, the tag `$8`; a live
-- status), after (`$5`, `$6`) if not null, at most `$7`.
SELECT * FROM jobqueue_jobs WHERE ($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running')))
             AND ($8::text IS NULL OR (tags @> ARRAY[$8::text] AND tags IS NOT NULL)) AND ($5::timestamptz IS NULL OR (run_at, id) > ($5, $6::uuid))
     ORDER BY run_at, id
     LIMIT $7
;

-- JOB_BROWSE_FINISHED
-- A page of finished jobs by when they finished, latest first (see
-- `job_filters`, the tag `$8`; a finished status), before (`$5`, `$6`) if
-- not null, at most `$7`.
SELECT * FROM jobqueue_jobs WHERE ($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running')))
             AND ($8::text IS NULL OR (tags @> ARRAY[$8::text] AND tags IS NOT NULL)) AND ($5::timestamptz IS NULL OR (finished_at, id) < ($5, $6::uuid))
     ORDER BY finished_at DESC, id DESC
     LIMIT $7
;

-- JOB_COUNT_BOUNDED
-- How many jobs match the filters (see `job_filters`, the tag `$7`) at
-- or above id `$6` (no bound if null), counting at most `$5`.
SELECT count(*) AS n FROM (SELECT 1 FROM jobqueue_jobs WHERE ($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND unique_key IS NOT NULL AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running')))
             AND ($7::text IS NULL OR (tags @> ARRAY[$7::text] AND tags IS NOT NULL)) AND ($6::uuid IS NULL OR id >= $6) LIMIT $5) AS bounded
;

-- JOB_THROUGHPUT
-- Finished, completed and failed jobs per minute over the last hour:
-- completed ones from their counts (`jobqueue_completions`, whether their
-- rows are kept or not), failed and cancelled ones from the latest `$1` of
-- their rows at most (the pruning index, newest first).
    WITH ended AS (
        SELECT date_trunc('minute', finished_at) AS minute,
               count(*) AS n,
               count(*) FILTER (WHERE status = 'failed') AS failed
        FROM (
            SELECT finished_at, status FROM jobqueue_jobs
            WHERE status IN ('failed', 'cancelled')
              AND finished_at >= date_trunc('minute', now() - interval '1 hour')
            ORDER BY finished_at DESC
            LIMIT $1
        ) AS latest
        GROUP BY 1
    ), completed AS (
        SELECT minute, sum(completed)::int8 AS n
        FROM jobqueue_completions
        WHERE minute >= date_trunc('minute', now() - interval '1 hour')
        GROUP BY 1
    )
    SELECT minute,
           coalesce(c.n, 0) + coalesce(e.n, 0) AS finished,
           coalesce(c.n, 0) AS completed,
           coalesce(e.failed, 0) AS failed
    FROM ended AS e
    FULL JOIN completed AS c USING (minute)
    ORDER BY minute
;
