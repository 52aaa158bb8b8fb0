-- Completed jobs are counted as they complete.
--
-- A runner that keeps no completed jobs (a retention of zero) deletes each
-- job's row as it completes it: the least WAL per job, since rewriting the
-- row as `completed` writes a new row version and two index entries, and a
-- prune deletes it again later. What the kept rows were still needed for,
-- how many jobs completed per minute, is counted here, in the completion's
-- own statement, whether the rows are kept or not.
--
-- One row per minute, queue, job type and server process (`backend`, the
-- completing connection's `pg_backend_pid()`): a connection only ever
-- updates its own rows, so completions on different connections never wait
-- for each other's commits. Maintenance folds the rows of minutes older
-- than an hour into one per minute, queue and type (`backend` 0) and
-- deletes counts older than 30 days.
CREATE TABLE jobqueue_completions (
    minute    timestamptz NOT NULL,
    queue     text        NOT NULL,
    job_type  text        NOT NULL,
    backend   integer     NOT NULL,
    completed bigint      NOT NULL CHECK (completed > 0),
    PRIMARY KEY (minute, queue, job_type, backend)
);

-- A role that may complete jobs (UPDATE or DELETE on the jobs table) must
-- be able to count them, or its completions would fail; one that may read
-- the jobs may read the counts (the dashboard's chart).
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS grantee,
               bool_or(a.privilege_type IN ('UPDATE', 'DELETE')) AS writes,
               bool_or(a.privilege_type = 'SELECT') AS reads
        FROM pg_class AS c
        CROSS JOIN LATERAL aclexplode(c.relacl) AS a
        LEFT JOIN pg_roles AS r ON r.oid = a.grantee
        WHERE c.oid = 'jobqueue_jobs'::regclass
          AND a.grantee <> c.relowner
        GROUP BY 1
    LOOP
        IF g.writes THEN
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON jobqueue_completions TO %s',
                           g.grantee);
        ELSIF g.reads THEN
            EXECUTE format('GRANT SELECT ON jobqueue_completions TO %s', g.grantee);
        END IF;
    END LOOP;
END
$$;

-- The completed jobs already kept are counted once, as of when they
-- finished (`backend` 0, as folded counts are).
INSERT INTO jobqueue_completions (minute, queue, job_type, backend, completed)
SELECT date_trunc('minute', finished_at), queue, job_type, 0, count(*)
FROM jobqueue_jobs
WHERE status = 'completed'
GROUP BY 1, 2, 3;
