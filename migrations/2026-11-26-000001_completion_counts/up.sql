-- Completed jobs are counted, not kept.
--
-- A runner's completion now deletes the job's row by default (a retention
-- of zero for completed jobs): rewriting the row as `completed` wrote a new
-- row version and two index entries, and a prune deleted it again later.
-- What the kept rows were still needed for, how many jobs completed per
-- minute, is counted here instead, in the completion's own statement.
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

-- With completed rows deleted, the table holds live jobs and the failed and
-- cancelled ones kept; a claim's new row version then fits on its page far
-- more often at 50 than at 70 (WAL per no-op job end to end, drained 50,000
-- at a time: 846 bytes at 70, 814 at 60, 770 at 50). Applies to pages
-- written from now on.
ALTER TABLE jobqueue_jobs SET (fillfactor = 50);
