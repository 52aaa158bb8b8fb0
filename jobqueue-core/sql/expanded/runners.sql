-- Every statement of jobqueue-core/src/sql/runners.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- RUNNER_REGISTER
-- Registers runner `$1` (`$2` host, `$3` pid, `$4` version, `$5` queues,
-- `$6` job types, `$7` concurrency, `$8` lease in seconds), started and
-- seen now, and deletes runners gone for a day.
    WITH forgotten AS (
        DELETE FROM jobqueue_runners WHERE last_seen < now() - interval '1 day'
    )
    INSERT INTO jobqueue_runners
        (worker_id, host, pid, version, queues, job_types, concurrency, lease_secs)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (worker_id) DO UPDATE
    SET host = EXCLUDED.host, pid = EXCLUDED.pid, version = EXCLUDED.version,
        queues = EXCLUDED.queues, job_types = EXCLUDED.job_types,
        concurrency = EXCLUDED.concurrency, lease_secs = EXCLUDED.lease_secs,
        started_at = now(), last_seen = now()
;

-- RUNNER_SEEN
-- Runner `$1` is alive, its last maintenance pass ended `$2` seconds ago,
-- and pass `$3` is under way (null: none): returns whether its row was
-- there.
    UPDATE jobqueue_runners
    SET last_seen = now(),
        maintained_at = now() - make_interval(secs => $2),
        maintenance_pass = $3
    WHERE worker_id = $1
;

-- RUNNER_TYPES_ELSEWHERE
-- The job types that a live runner other than `$1` handles (one seen
-- within its lease) and `$3` (a runner's own types) does not, of runners
-- that work a queue of `$2` (every queue when empty, on either side):
-- `job_type`, each once.
    SELECT DISTINCT t.job_type
    FROM jobqueue_runners AS r
    CROSS JOIN unnest(r.job_types) AS t(job_type)
    WHERE r.worker_id <> $1
      AND r.last_seen > now() - make_interval(secs => r.lease_secs)
      AND (cardinality(r.queues) = 0 OR cardinality($2::text[]) = 0
           OR r.queues && $2::text[])
      AND t.job_type <> ALL($3::text[])
    ORDER BY t.job_type
;

-- RUNNER_DEREGISTER
-- Runner `$1` stopped.
    DELETE FROM jobqueue_runners WHERE worker_id = $1
;

-- RUNNER_LIST
-- Every registered runner, with how long since it was last seen.
    SELECT worker_id, host, pid, version, queues, job_types, concurrency, lease_secs,
           started_at, last_seen,
           EXTRACT(EPOCH FROM now() - last_seen)::float8 AS silent_secs,
           EXTRACT(EPOCH FROM now() - maintained_at)::float8 AS maintenance_silent_secs,
           maintenance_pass
    FROM jobqueue_runners
    ORDER BY started_at, worker_id
;

-- RUNNER_LEAD_GAUGES
-- Takes, for the rest of this session, the advisory lock that makes its
-- runner the one computing the table-wide queue gauges; false if another
-- session holds it. The key is the ASCII of `jqgauges`, a number no other
-- jobqueue lock uses (applications using advisory locks should avoid it).
SELECT pg_try_advisory_lock(7670025308667864435) AS leading
;
