-- Every statement of jobqueue-core/src/sql/doctor.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- DOCTOR_LIMITS
-- Limits of each doctor transaction: a check waits for no lock and runs
-- no statement for long (a health check that hangs tells nothing).
SET LOCAL lock_timeout = '5s'; SET LOCAL statement_timeout = '30s'
;

-- DOCTOR_SEES_ALL_SESSIONS
-- Whether this session sees the transactions of every role in
-- `pg_stat_activity` (a superuser, or a member of `pg_read_all_stats`).
    SELECT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false)
           OR pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER') AS sees_all
;

-- DOCTOR_SLOTS
-- Replication slots that hold an xmin or a catalog_xmin (they hold back
-- vacuum in every database), oldest horizon first, with the WAL each
-- keeps from being recycled.
    SELECT slot_name::text AS name,
           slot_type AS kind,
           active,
           age(xmin)::int8 AS xmin_age,
           age(catalog_xmin)::int8 AS catalog_xmin_age,
           pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn()
                                ELSE pg_current_wal_lsn() END, restart_lsn)::float8 AS wal_bytes
    FROM pg_replication_slots
    WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
    ORDER BY greatest(coalesce(age(xmin), 0), coalesce(age(catalog_xmin), 0)) DESC, slot_name
;

-- DOCTOR_PREPARED
-- Prepared transactions of this database, oldest first.
    SELECT gid,
           owner::text AS owner,
           greatest(EXTRACT(EPOCH FROM now() - prepared), 0)::float8 AS age_secs
    FROM pg_prepared_xacts
    WHERE database = current_database()
    ORDER BY prepared, gid
;

-- DOCTOR_SCHEMA
-- Which of the tables the checks of the jobs read exist.
    SELECT array_remove(ARRAY[
               CASE WHEN to_regclass('jobqueue_jobs') IS NULL THEN 'jobqueue_jobs' END,
               CASE WHEN to_regclass('jobqueue_queues') IS NULL THEN 'jobqueue_queues' END,
               CASE WHEN to_regclass('jobqueue_runners') IS NULL THEN 'jobqueue_runners' END
           ], NULL) AS missing_tables
;

-- DOCTOR_TABLE_STATS
-- Live and dead row versions of the jobs table by the statistics views,
-- its last (auto)vacuum, and whether autovacuum may visit it.
    SELECT s.n_live_tup AS live,
           s.n_dead_tup AS dead,
           EXTRACT(EPOCH FROM now() - s.last_vacuum)::float8 AS vacuum_secs,
           EXTRACT(EPOCH FROM now() - s.last_autovacuum)::float8 AS autovacuum_secs,
           current_setting('autovacuum')::boolean AS server_autovacuum,
           coalesce((SELECT o.option_value::boolean
                     FROM pg_options_to_table(c.reloptions) AS o
                     WHERE o.option_name = 'autovacuum_enabled'), true) AS table_autovacuum
    FROM pg_stat_user_tables AS s
    JOIN pg_class AS c ON c.oid = s.relid
    WHERE s.relid = 'jobqueue_jobs'::regclass
;

-- DOCTOR_FETCH_INDEX
-- The fetch index: whether it exists and is valid, and its size on disk.
    SELECT i.indisvalid AS valid,
           pg_relation_size(i.indexrelid) AS bytes
    FROM pg_index AS i
    WHERE i.indexrelid = to_regclass('jobqueue_jobs_fetch_idx')
;

-- DOCTOR_TABLE_ESTIMATE
-- The planner's estimate of the jobs table's rows (`reltuples`: -1 if
-- never analyzed).
    SELECT reltuples::float8 AS rows FROM pg_class WHERE oid = 'jobqueue_jobs'::regclass
;

-- DOCTOR_COUNT_PENDING
-- Due jobs: the entries the fetch index should hold (read from it).
    SELECT count(*) AS n FROM jobqueue_jobs WHERE status = 'pending'
;

-- DOCTOR_HELD
-- Held jobs by worker (read from the lease index): how many, how many past
-- their lease, how long since the first of those expired, and how long
-- until the soonest of the others does.
    SELECT worker_id,
           count(*) AS held,
           count(*) FILTER (WHERE lease_expires_at < now()) AS expired,
           greatest(EXTRACT(EPOCH FROM now() - min(lease_expires_at)), 0)::float8 AS expired_secs,
           greatest(EXTRACT(EPOCH FROM min(lease_expires_at) - now()), 0)::float8 AS lease_left_secs
    FROM jobqueue_jobs
    WHERE lease_expires_at IS NOT NULL
    GROUP BY worker_id
    ORDER BY worker_id
;

-- DOCTOR_WAITING
-- Jobs waiting to run (waiting on a key, scheduled, pending, unhandled)
-- by type, queue and status, each status read from its partial index.
    SELECT job_type, queue, status, count(*) AS jobs
    FROM (
        SELECT job_type, queue, status FROM jobqueue_jobs WHERE status = 'pending'
        UNION ALL
        SELECT job_type, queue, status FROM jobqueue_jobs WHERE status = 'scheduled'
        UNION ALL
        SELECT job_type, queue, status FROM jobqueue_jobs WHERE status = 'unhandled'
        UNION ALL
        SELECT job_type, queue, status FROM jobqueue_jobs WHERE status = 'waiting'
    ) AS waiting
    GROUP BY job_type, queue, status
    ORDER BY job_type, queue, status
;

-- DOCTOR_DUE_QUEUES
-- Queues with due jobs (read from the fetch index): how many, the age of
-- the oldest, and whether the queue is paused.
    SELECT d.queue, d.due, d.oldest_secs, coalesce(c.paused, false) AS paused
    FROM (
        SELECT queue, count(*) AS due,
               greatest(EXTRACT(EPOCH FROM now() - min(run_at)), 0)::float8 AS oldest_secs
        FROM jobqueue_jobs
        WHERE status = 'pending'
        GROUP BY queue
    ) AS d
    LEFT JOIN jobqueue_queues AS c ON c.name = d.queue
    ORDER BY d.queue
;

-- DOCTOR_NOTIFY_USAGE
-- How full the `LISTEN`/`NOTIFY` queue is, 0 to 1.
SELECT pg_notification_queue_usage() AS usage
;

-- DOCTOR_CONNECTIONS
-- Client connections in use, and the limits they count against.
    SELECT (SELECT count(*) FROM pg_stat_activity
            WHERE backend_type = 'client backend') AS used,
           current_setting('max_connections')::int8 AS max_connections,
           current_setting('superuser_reserved_connections')::int8 AS superuser_reserved,
           coalesce(current_setting('reserved_connections', true)::int8, 0) AS reserved
;

-- DOCTOR_FETCH_INDEX_DEFINITION
-- The fetch index as the migrations create it (for the advice of a
-- doctor that finds it missing or invalid).
CREATE INDEX CONCURRENTLY jobqueue_jobs_fetch_idx ON jobqueue_jobs (queue, priority DESC, run_at, id) WHERE status = 'pending'
;

-- XMIN_HORIZON
-- What holds this database's xmin horizon back now: the oldest of the
-- transaction ids and snapshots still open anywhere that bind the vacuum
-- of its tables, with who holds it (no row: nothing but this session).
--
-- Holders: a session of this database (or a process of none, such as a
-- WAL sender relaying a standby's feedback) by its own transaction id
-- (`backend_xid`) or its snapshot (`backend_xmin`); a prepared transaction
-- of this database; a replication slot's `xmin`. Autovacuum workers are
-- left out: since PostgreSQL 14 a vacuum's snapshot holds back no other
-- vacuum. On a tie (a snapshot taken while the oldest transaction was
-- open has its id as xmin) the transaction itself is named. `since` is
-- when the holding transaction began or was prepared (`NULL` for a slot,
-- or a process with no transaction), by the database's clock.
--
-- Readable without privileges; sessions of other roles show no xid or
-- xmin to a role that is neither a superuser nor a member of
-- `pg_read_all_stats`, so such a role sees only its own sessions' holds.
    WITH holders AS (
        SELECT 'session'::text AS kind, h.xid, h.by_transaction, a.xact_start AS since,
               a.pid, a.backend_type::text AS backend_type,
               coalesce(a.application_name, '') AS application_name,
               coalesce(host(a.client_addr),
                        CASE WHEN a.client_port = -1 THEN 'local socket' END, '') AS client,
               coalesce(a.state, '') AS state,
               coalesce(a.query, '') AS query,
               NULL::text AS name, NULL::text AS owner, NULL::bool AS active
        FROM pg_stat_activity AS a
        CROSS JOIN LATERAL (VALUES (a.backend_xid, true), (a.backend_xmin, false))
            AS h (xid, by_transaction)
        WHERE (a.datname = current_database() OR a.datname IS NULL)
          AND a.pid <> pg_backend_pid()
          AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
          AND h.xid IS NOT NULL
        UNION ALL
        SELECT 'prepared', p.transaction, true, p.prepared, NULL, NULL, '', '', '', '',
               p.gid, p.owner::text, NULL
        FROM pg_prepared_xacts AS p
        WHERE p.database = current_database()
        UNION ALL
        SELECT 'slot', s.xmin, false, NULL, s.active_pid, NULL, '', '', '', '',
               s.slot_name::text, NULL, s.active
        FROM pg_replication_slots AS s
        WHERE s.xmin IS NOT NULL
    )
    SELECT kind, xid::text::int8 AS xid, age(xid)::int8 AS xid_age, by_transaction, since,
           greatest(EXTRACT(EPOCH FROM now() - since), 0)::float8 AS held_secs,
           pid, backend_type, application_name, client, state, query, name, owner, active
    FROM holders
    ORDER BY age(xid) DESC, by_transaction DESC, since NULLS LAST
    LIMIT 1
;

-- DOCTOR_WORKFLOWS
-- Workflow steps that wait in vain, or until someone acts:
-- `waiting_on_retry` (live steps with an unsettled edge from a step that
-- failed for good or was cancelled: in `wait` workflows by design, in
-- others after the step was retried before the one it waits for),
-- `unsettled` (live steps whose
-- jobs failed or were cancelled over a minute ago: no sweep settled them),
-- `orphaned` (live steps whose job row is gone) and `stranded` (blocked
-- jobs whose step has no parent left to settle: nothing will release
-- them). Reads every live step, through `jobqueue_workflow_steps_live_idx`,
-- and every blocked job.
    SELECT
        (SELECT count(*) FROM jobqueue_workflow_steps AS s
         WHERE s.state = 'live'
           AND EXISTS (SELECT 1 FROM jobqueue_workflow_edges AS e
                       JOIN jobqueue_workflow_steps AS p ON p.job_id = e.parent_id
                       WHERE e.child_id = s.job_id AND NOT e.settled
                         AND p.state IN ('failed', 'cancelled'))) AS waiting_on_retry,
        (SELECT count(*) FROM jobqueue_workflow_steps AS s
         JOIN jobqueue_jobs AS j ON j.id = s.job_id
         WHERE s.state = 'live' AND j.status IN ('failed', 'cancelled')
           AND j.finished_at < now() - interval '1 minute') AS unsettled,
        (SELECT count(*) FROM jobqueue_workflow_steps AS s
         WHERE s.state = 'live'
           AND NOT EXISTS (SELECT 1 FROM jobqueue_jobs AS j WHERE j.id = s.job_id)) AS orphaned,
        (SELECT count(*) FROM jobqueue_jobs AS j
         JOIN jobqueue_workflow_steps AS s ON s.job_id = j.id
         WHERE j.status = 'blocked' AND s.parents_left = 0) AS stranded
;

-- DOCTOR_KEYS
-- Keys whose jobs have waited for their key's room for over a minute
-- although the key has room (fewer holders than its queue's key limit, or
-- no limit any more): `keys`, and `example`, one of them as `queue/key`.
-- No admission looked at them since they came due; a runner of their
-- queue admits them within its rescue interval. Reads every waiting job,
-- through `jobqueue_jobs_key_waiting_idx`.
WITH lines AS (
        SELECT queue, concurrency_key AS key
        FROM jobqueue_jobs
        WHERE status = 'waiting' AND run_at < now() - interval '1 minute'
        GROUP BY queue, concurrency_key
    ),
    with_room AS (
        SELECT k.queue, k.key
        FROM lines AS k
        LEFT JOIN jobqueue_queues AS c ON c.name = k.queue
        WHERE c.key_limit IS NULL OR c.key_limit > (SELECT count(*) FROM jobqueue_jobs AS h
              WHERE h.queue = k.queue AND h.concurrency_key = k.key
                AND h.concurrency_key IS NOT NULL
                AND h.status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running'))
    )
    SELECT count(*) AS keys, min(queue || '/' || key) AS example FROM with_room
;
