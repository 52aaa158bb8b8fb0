-- Every statement of jobqueue-core/src/sql/jobs/maintain.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- JOB_SET_ASIDE_DUE
-- Sets aside as `unhandled` (by runner `$7`) up to `$6` due jobs of queue
-- `$1` and type `$2`, in claim order after the point `$3`, `$4`, `$5`
-- (priority, run_at, id; a null priority: from the queue's start), read
-- in the ranges a resumed claim reads (see `claim_from_ready!`) so that a
-- pass does not step over the entries the passes before it left. Returns
-- the place in the claim order of each job it set aside.
WITH picked AS (
        SELECT id FROM (SELECT r.id FROM (
          SELECT p.id FROM jobqueue_jobs AS p
          WHERE p.status = 'pending' AND p.queue = $1 AND p.job_type = $2 AND $3::int4 IS NULL
          ORDER BY p.priority DESC, p.run_at, p.id
          LIMIT $6
          FOR UPDATE SKIP LOCKED) AS r
            UNION ALL SELECT r.id FROM (
          SELECT p.id FROM jobqueue_jobs AS p
          WHERE p.status = 'pending' AND p.queue = $1 AND p.job_type = $2 AND p.priority = $3::int4 AND (p.run_at, p.id) > ($4::timestamptz, $5::uuid)
          ORDER BY p.priority DESC, p.run_at, p.id
          LIMIT $6
          FOR UPDATE SKIP LOCKED) AS r
            UNION ALL SELECT r.id FROM (
          SELECT p.id FROM jobqueue_jobs AS p
          WHERE p.status = 'pending' AND p.queue = $1 AND p.job_type = $2 AND p.priority < $3::int4
          ORDER BY p.priority DESC, p.run_at, p.id
          LIMIT $6
          FOR UPDATE SKIP LOCKED) AS r) AS ranges
        LIMIT $6
    )
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; set aside until a runner that handles it starts', j.job_type, $7, j.queue)
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.priority, j.run_at, j.id
;

-- JOB_PROMOTE_DUE
-- Moves up to `$1` scheduled jobs that are due by the database's clock to
-- `pending`: see `promote_due!`.
WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'scheduled'
          AND run_at <= now()
        ORDER BY run_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ),
    moved AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending'
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING j.queue
    ),
    wake AS (
        SELECT count(pg_notify($2, q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM moved) AS q
    )
    SELECT count(*) AS n FROM moved, wake
;

-- JOB_PROMOTE_DUE_BY
-- Moves up to `$1` scheduled jobs due by time `$3` to `pending`: see
-- `promote_due!`.
WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'scheduled'
          AND run_at <= $3
        ORDER BY run_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ),
    moved AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending'
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING j.queue
    ),
    wake AS (
        SELECT count(pg_notify($2, q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM moved) AS q
    )
    SELECT count(*) AS n FROM moved, wake
;

-- JOB_UNPARK
-- Takes back up to `$3` jobs set aside as `unhandled` whose type is in `$1`
-- and whose queue is in `$2` (an empty array: any queue): back to
-- `pending`, their queues woken on channel `$4`. Returns the number moved.
WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'unhandled'
          AND job_type = ANY($1::text[])
          AND (cardinality($2::text[]) = 0 OR queue = ANY($2::text[]))
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    ),
    moved AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending'
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING j.queue
    ),
    wake AS (
        SELECT count(pg_notify($4, q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM moved) AS q
    )
    SELECT count(*) AS n FROM moved, wake
;

-- JOB_RESCUE_STALE
-- Recovers up to `$1` held jobs whose lease expired before the database's
-- `now()`: back to `pending` while attempts remain, `failed` ("worker lost")
-- on the last attempt, `cancelled` if a cancel was requested. Safe to run
-- from many processes at once (SKIP LOCKED). Returns id and new status.
WITH next AS (
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
    by_id AS (
        SELECT array_agg(id ORDER BY id) AS ids,
               array_agg(next_status ORDER BY id) AS next_status,
               array_agg(error ORDER BY id) AS error
        FROM next
    )
    UPDATE jobqueue_jobs AS j
    SET status = by_id.next_status[width_bucket(j.id, by_id.ids)],
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'pending' THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'pending' THEN NULL ELSE j.worker_id END,
        lease_expires_at = NULL,
        last_error = by_id.error[width_bucket(j.id, by_id.ids)],
        errors = (CASE WHEN jsonb_array_length(j.errors) >= 10 THEN j.errors - 0 ELSE j.errors END) || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', by_id.error[width_bucket(j.id, by_id.ids)]))
    FROM by_id
    WHERE j.id = ANY(by_id.ids)
    RETURNING j.id, j.status
;

-- JOB_PRUNE
-- Deletes up to `$3` jobs in status `$1` finished more than `$2` seconds ago.
    WITH doomed AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = $1
          AND finished_at < now() - make_interval(secs => $2)
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jobqueue_jobs AS j
    WHERE j.id = ANY(ARRAY(SELECT id FROM doomed))
;

-- JOB_DEAD_TUPLES
-- Dead row versions in `jobqueue_jobs`, from the statistics views.
    SELECT coalesce(n_dead_tup, 0) AS dead
    FROM pg_stat_user_tables
    WHERE relid = 'jobqueue_jobs'::regclass
;

-- JOB_VACUUM
-- Vacuums the jobs table, unless another session already is, leaving the
-- empty pages at its end in place; and the queues table, whose row every
-- claim that takes from a queue with a global or rate limit rewrites (a
-- thousand such rows, unvacuumed, left 23,000 dead versions behind in a
-- minute of claims, and claims that took 50 ms instead of 10).
VACUUM (SKIP_LOCKED, TRUNCATE false) jobqueue_jobs, jobqueue_queues
;

-- JOB_VACUUM_TRUNCATE
-- [`JOB_VACUUM`] that also gives the empty pages at the tables' ends back
-- to the file system, under an `ACCESS EXCLUSIVE` lock of each table.
VACUUM (SKIP_LOCKED, TRUNCATE true) jobqueue_jobs, jobqueue_queues
;

-- JOB_INDEX_SIZES
-- The indexes named in `$1` (in that order, those that exist): size on
-- disk, entries by the planner's estimate (`reltuples`, as the last
-- vacuum, analyze or build left it; -1 when none has), whether valid, the
-- width of a key (fixed-length columns at their length, others at their
-- average width by the table's statistics, 32 bytes without), the block
-- size, and the statement that rebuilds it without blocking writes,
-- schema-qualified and quoted by the server (`format('%I')`).
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
    ORDER BY wanted.ord
;

-- JOB_INDEX_LEFTOVERS
-- What an interrupted `REINDEX INDEX CONCURRENTLY` of the jobs table's
-- indexes left behind: invalid indexes named `<index>_ccnew` (the copy
-- being built) or `<index>_ccold` (the original, after the swap), while
-- no index of the table is being built; with the statement that drops
-- each, quoted by the server.
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
    ORDER BY c.relname
;

-- JOB_INDEX_UPKEEP_LOCK
-- Takes, for this session until [`JOB_INDEX_UPKEEP_UNLOCK`], the advisory
-- lock that lets one runner at a time rebuild the jobs table's indexes;
-- false if another session holds it. The key is the ASCII of `jqreindx`,
-- a number no other jobqueue lock uses.
SELECT pg_try_advisory_lock(7670037420274771064) AS locked
;

-- JOB_INDEX_UPKEEP_UNLOCK
-- Releases [`JOB_INDEX_UPKEEP_LOCK`].
SELECT pg_advisory_unlock(7670037420274771064) AS locked
;

-- JOB_INDEX_REBUILD_LIMITS
-- The limits of a rebuild, set on the session before it (a rebuild runs
-- outside any transaction, so `SET LOCAL` would not hold): how long it
-- waits for a lock, or for the transactions it must outlast (each a lock
-- wait), and how long it may run in all.
SET lock_timeout = '10s'; SET statement_timeout = '30min'
;

-- JOB_INDEX_REBUILD_UNLIMIT
-- Puts the session's limits back after a rebuild.
RESET lock_timeout; RESET statement_timeout
;
