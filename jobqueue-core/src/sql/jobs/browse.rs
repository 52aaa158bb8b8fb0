//! Reads for the dashboard and the command line: a job by id, pages of
//! jobs, bounded counts, throughput, live jobs by type.

/// Counts live jobs (blocked, waiting, scheduled, pending, unhandled,
/// claimed, running) by job type and status: a type no runner handles
/// shows up as unhandled here.
pub(crate) const JOB_STATS_BY_TYPE: &str = "
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
    ORDER BY job_type, status";

/// Reads one job by id.
pub(crate) const JOB_GET: &str = "SELECT * FROM jobqueue_jobs WHERE id = $1";

/// Reads the status of one job by id.
pub(crate) const JOB_GET_STATUS: &str = "SELECT status FROM jobqueue_jobs WHERE id = $1";

/// The filters of a job list: status `$1`, queue `$2`, type `$3`, the
/// live job holding unique key `$4`, carrying the tag `$tag` (each: any if
/// null; a key is looked up in the unique-key index, which holds live jobs
/// only; a tag in the tags index, which holds tagged jobs only). Bound as
/// values, the planner folds the null ones away before it plans.
macro_rules! job_filters {
    ($tag:literal) => {
        concat!(
            "($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND ",
            live_predicate!(),
            "))
             AND (",
            $tag,
            "::text IS NULL OR (tags @> ARRAY[",
            $tag,
            "::text] AND tags IS NOT NULL))"
        )
    };
}

/// A page of jobs newest first (see `job_filters`, the tag `$8`), below id
/// `$5` and at or above id `$7` (each: no bound if null), at most `$6`.
pub(crate) const JOB_BROWSE_NEWEST: &str = concat!(
    "SELECT * FROM jobqueue_jobs WHERE ",
    job_filters!("$8"),
    " AND ($5::uuid IS NULL OR id < $5)
     AND ($7::uuid IS NULL OR id >= $7)
     ORDER BY id DESC
     LIMIT $6"
);

/// The id `$2` jobs below id `$1` (no bound if null), newest first: the
/// floor of a search window of that many jobs (none if fewer are left).
pub(crate) const JOB_WINDOW_FLOOR: &str = "
    SELECT id FROM jobqueue_jobs
    WHERE $1::uuid IS NULL OR id < $1
    ORDER BY id DESC
    OFFSET $2 - 1
    LIMIT 1";

/// The id `$2` tagged jobs below id `$1` (no bound if null), newest
/// first: the floor of a tag search's window of that many tagged jobs
/// (none if fewer are left), through `jobqueue_jobs_tagged_idx`.
pub(crate) const JOB_WINDOW_FLOOR_TAGGED: &str = "
    SELECT id FROM jobqueue_jobs
    WHERE tags IS NOT NULL AND ($1::uuid IS NULL OR id < $1)
    ORDER BY id DESC
    OFFSET $2 - 1
    LIMIT 1";

/// A page of jobs by `run_at` (see `job_filters`, the tag `$8`; a live
/// status), after (`$5`, `$6`) if not null, at most `$7`.
pub(crate) const JOB_BROWSE_RUN_AT: &str = concat!(
    "SELECT * FROM jobqueue_jobs WHERE ",
    job_filters!("$8"),
    " AND ($5::timestamptz IS NULL OR (run_at, id) > ($5, $6::uuid))
     ORDER BY run_at, id
     LIMIT $7"
);

/// A page of finished jobs by when they finished, latest first (see
/// `job_filters`, the tag `$8`; a finished status), before (`$5`, `$6`) if
/// not null, at most `$7`.
pub(crate) const JOB_BROWSE_FINISHED: &str = concat!(
    "SELECT * FROM jobqueue_jobs WHERE ",
    job_filters!("$8"),
    " AND ($5::timestamptz IS NULL OR (finished_at, id) < ($5, $6::uuid))
     ORDER BY finished_at DESC, id DESC
     LIMIT $7"
);

/// How many jobs match the filters (see `job_filters`, the tag `$7`) at
/// or above id `$6` (no bound if null), counting at most `$5`.
pub(crate) const JOB_COUNT_BOUNDED: &str = concat!(
    "SELECT count(*) AS n FROM (SELECT 1 FROM jobqueue_jobs WHERE ",
    job_filters!("$7"),
    " AND ($6::uuid IS NULL OR id >= $6) LIMIT $5) AS bounded"
);

/// Finished, completed and failed jobs per minute over the last hour:
/// completed ones from their counts (`jobqueue_completions`, whether their
/// rows are kept or not), failed and cancelled ones from the latest `$1` of
/// their rows at most (the pruning index, newest first).
pub(crate) const JOB_THROUGHPUT: &str = "
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
    ORDER BY minute";
