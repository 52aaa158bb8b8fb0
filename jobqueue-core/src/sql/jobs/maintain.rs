//! The runner's maintenance of the table: the backlogs set aside, the
//! promotion of scheduled jobs, parked jobs taken back, expired leases
//! rescued, pruning, vacuum and the upkeep of the live jobs' indexes.

/// One range of [`JOB_SET_ASIDE_DUE`]: the due jobs of queue `$1` and type
/// `$2` that also meet `$cond` (SQL), in claim order, locked.
macro_rules! due_of_type {
    ($cond:literal) => {
        concat!(
            "SELECT r.id FROM (
          SELECT p.id FROM jobqueue_jobs AS p
          WHERE p.status = 'pending' AND p.queue = $1 AND p.job_type = $2 AND ",
            $cond,
            "
          ORDER BY p.priority DESC, p.run_at, p.id
          LIMIT $6
          FOR UPDATE SKIP LOCKED) AS r"
        )
    };
}

/// Sets aside as `unhandled` (by runner `$7`) up to `$6` due jobs of queue
/// `$1` and type `$2`, in claim order after the point `$3`, `$4`, `$5`
/// (priority, run_at, id; a null priority: from the queue's start), read
/// in the ranges a resumed claim reads (see `claim_from_ready!`) so that a
/// pass does not step over the entries the passes before it left. Returns
/// the place in the claim order of each job it set aside.
pub(crate) const JOB_SET_ASIDE_DUE: &str = concat!(
    "WITH picked AS (
        SELECT id FROM (",
    due_of_type!("$3::int4 IS NULL"),
    "
            UNION ALL ",
    due_of_type!("p.priority = $3::int4 AND (p.run_at, p.id) > ($4::timestamptz, $5::uuid)"),
    "
            UNION ALL ",
    due_of_type!("p.priority < $3::int4"),
    ") AS ranges
        LIMIT $6
    )
    UPDATE jobqueue_jobs AS j
    SET ",
    set_aside!("$7"),
    "
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.priority, j.run_at, j.id"
);

/// The end of the statements that move waiting jobs to `pending`: the rows
/// picked (and locked) by the CTE `picked` become `pending`, their queues
/// are woken on channel `$channel`, and the statement returns how many moved.
macro_rules! move_to_pending {
    ($channel:literal) => {
        concat!(
            "moved AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending'
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING j.queue
    ),
    wake AS (
        SELECT count(pg_notify(",
            $channel,
            ", q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM moved) AS q
    )
    SELECT count(*) AS n FROM moved, wake"
        )
    };
}

/// The statement that moves up to `$1` scheduled jobs due by `$until` (an
/// SQL expression) to `pending` and wakes their queues on channel `$2`.
/// Safe to run from many processes at once (SKIP LOCKED). Returns the
/// number moved.
macro_rules! promote_due {
    ($until:literal) => {
        concat!(
            "WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'scheduled'
          AND run_at <= ",
            $until,
            "
        ORDER BY run_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ),
    ",
            move_to_pending!("$2")
        )
    };
}

/// Moves up to `$1` scheduled jobs that are due by the database's clock to
/// `pending`: see `promote_due!`.
pub(crate) const JOB_PROMOTE_DUE: &str = promote_due!("now()");

/// Moves up to `$1` scheduled jobs due by time `$3` to `pending`: see
/// `promote_due!`.
pub(crate) const JOB_PROMOTE_DUE_BY: &str = promote_due!("$3");

/// Takes back up to `$3` jobs set aside as `unhandled` whose type is in `$1`
/// and whose queue is in `$2` (an empty array: any queue): back to
/// `pending`, their queues woken on channel `$4`. Returns the number moved.
pub(crate) const JOB_UNPARK: &str = concat!(
    "WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'unhandled'
          AND job_type = ANY($1::text[])
          AND (cardinality($2::text[]) = 0 OR queue = ANY($2::text[]))
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    ),
    ",
    move_to_pending!("$4")
);

/// Recovers up to `$1` held jobs whose lease expired before the database's
/// `now()`: back to `pending` while attempts remain, `failed` ("worker lost")
/// on the last attempt, `cancelled` if a cancel was requested. Safe to run
/// from many processes at once (SKIP LOCKED). Returns id and new status.
pub(crate) const JOB_RESCUE_STALE: &str = concat!(
    "WITH next AS (
        SELECT j.id,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN j.attempts >= j.max_attempts THEN 'failed'
                    ELSE 'pending' END AS next_status,
               format('worker lost: lease of worker %s expired at %s (attempt %s of %s)',
                      j.worker_id, j.lease_expires_at, j.attempts, j.max_attempts) AS error
        FROM jobqueue_jobs AS j
        WHERE j.status IN ('claimed', 'running')
          AND j.lease_expires_at < now()
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ),
    ",
    update_by_id!("error"),
    "
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'pending' THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'pending' THEN NULL ELSE j.worker_id END,",
    error_by_id!(),
    "
    RETURNING j.id, j.status"
);

/// Deletes up to `$3` jobs in status `$1` finished more than `$2` seconds ago.
pub(crate) const JOB_PRUNE: &str = "
    WITH doomed AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = $1
          AND finished_at < now() - make_interval(secs => $2)
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jobqueue_jobs AS j
    WHERE j.id = ANY(ARRAY(SELECT id FROM doomed))";

/// Dead row versions in `jobqueue_jobs`, from the statistics views.
pub(crate) const JOB_DEAD_TUPLES: &str = "
    SELECT coalesce(n_dead_tup, 0) AS dead
    FROM pg_stat_user_tables
    WHERE relid = 'jobqueue_jobs'::regclass";

/// Vacuums the jobs table, unless another session already is, leaving the
/// empty pages at its end in place; and the queues table, whose row every
/// claim that takes from a queue with a global or rate limit rewrites (a
/// thousand such rows, unvacuumed, left 23,000 dead versions behind in a
/// minute of claims, and claims that took 50 ms instead of 10).
pub(crate) const JOB_VACUUM: &str =
    "VACUUM (SKIP_LOCKED, TRUNCATE false) jobqueue_jobs, jobqueue_queues";

/// [`JOB_VACUUM`] that also gives the empty pages at the tables' ends back
/// to the file system, under an `ACCESS EXCLUSIVE` lock of each table.
pub(crate) const JOB_VACUUM_TRUNCATE: &str =
    "VACUUM (SKIP_LOCKED, TRUNCATE true) jobqueue_jobs, jobqueue_queues";

/// The indexes named in `$1` (in that order, those that exist): size on
/// disk, entries by the planner's estimate (`reltuples`, as the last
/// vacuum, analyze or build left it; -1 when none has), whether valid, the
/// width of a key (fixed-length columns at their length, others at their
/// average width by the table's statistics, 32 bytes without), the block
/// size, and the statement that rebuilds it without blocking writes,
/// schema-qualified and quoted by the server (`format('%I')`).
pub(crate) const JOB_INDEX_SIZES: &str = "
    SELECT c.relname::text AS name,
           pg_relation_size(c.oid) AS bytes,
           c.reltuples::float8 AS entries,
           i.indisvalid AS valid,
           (SELECT coalesce(sum(CASE WHEN a.attlen > 0 THEN a.attlen
                                     ELSE coalesce(s.avg_width, 32) END), 0)
            FROM pg_attribute AS a
            LEFT JOIN pg_stats AS s
                   ON s.schemaname = n.nspname AND s.tablename = t.relname
                  AND s.attname = a.attname
            WHERE a.attrelid = c.oid AND a.attnum > 0)::int8 AS key_bytes,
           current_setting('block_size')::int8 AS block_bytes,
           format('REINDEX INDEX CONCURRENTLY %I.%I', n.nspname, c.relname) AS rebuild
    FROM unnest($1::text[]) WITH ORDINALITY AS wanted (name, ord)
    JOIN pg_class AS c ON c.oid = to_regclass(wanted.name)
    JOIN pg_index AS i ON i.indexrelid = c.oid
    JOIN pg_class AS t ON t.oid = i.indrelid
    JOIN pg_namespace AS n ON n.oid = t.relnamespace
    ORDER BY wanted.ord";

/// What an interrupted `REINDEX INDEX CONCURRENTLY` of the jobs table's
/// indexes left behind: invalid indexes named `<index>_ccnew` (the copy
/// being built) or `<index>_ccold` (the original, after the swap), while
/// no index of the table is being built; with the statement that drops
/// each, quoted by the server.
pub(crate) const JOB_INDEX_LEFTOVERS: &str = "
    SELECT c.relname::text AS name,
           format('DROP INDEX CONCURRENTLY %I.%I', n.nspname, c.relname) AS statement
    FROM pg_index AS i
    JOIN pg_class AS c ON c.oid = i.indexrelid
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE i.indrelid = 'jobqueue_jobs'::regclass
      AND NOT i.indisvalid
      AND c.relname ~ '_cc(new|old)[0-9]*$'
      AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index AS p
                      WHERE p.relid = i.indrelid)
    ORDER BY c.relname";

/// Takes, for this session until [`JOB_INDEX_UPKEEP_UNLOCK`], the advisory
/// lock that lets one runner at a time rebuild the jobs table's indexes;
/// false if another session holds it. The key is the ASCII of `jqreindx`,
/// a number no other jobqueue lock uses.
pub(crate) const JOB_INDEX_UPKEEP_LOCK: &str =
    "SELECT pg_try_advisory_lock(7670037420274771064) AS locked";

/// Releases [`JOB_INDEX_UPKEEP_LOCK`].
pub(crate) const JOB_INDEX_UPKEEP_UNLOCK: &str =
    "SELECT pg_advisory_unlock(7670037420274771064) AS locked";

/// The limits of a rebuild, set on the session before it (a rebuild runs
/// outside any transaction, so `SET LOCAL` would not hold): how long it
/// waits for a lock, or for the transactions it must outlast (each a lock
/// wait), and how long it may run in all.
pub(crate) const JOB_INDEX_REBUILD_LIMITS: &str =
    "SET lock_timeout = '10s'; SET statement_timeout = '30min'";

/// Puts the session's limits back after a rebuild.
pub(crate) const JOB_INDEX_REBUILD_UNLIMIT: &str = "RESET lock_timeout; RESET statement_timeout";
