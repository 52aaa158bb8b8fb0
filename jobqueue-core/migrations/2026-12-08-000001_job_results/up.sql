-- Results an enqueuer awaits: what a job's handler recorded with
-- `JobContext::set_result`, kept after its row is deleted (completed rows
-- are deleted as they complete by default) for the retention the runner
-- sets (`Retention::results`, a day unless set). Written by the statement
-- that completes the job, fenced by its lease like it, so a result is kept
-- exactly when its completion commits; a job that records none writes
-- nothing here. `jobqueue::result` and `jobqueue::wait_result` read it,
-- woken by a notification on channel `jobqueue_results` (the job's id).
CREATE TABLE jobqueue_results (
    job_id       uuid        PRIMARY KEY,
    job_type     text        NOT NULL,
    result       jsonb       NOT NULL,
    completed_at timestamptz NOT NULL DEFAULT now(),
    -- NULL: kept until deleted by hand.
    expires_at   timestamptz
);

-- Expired results, oldest first: the prune's walk.
CREATE INDEX jobqueue_results_expires_idx
    ON jobqueue_results (expires_at)
    WHERE expires_at IS NOT NULL;

-- A role that may write jobs completes them, which keeps their results; a
-- role that may read jobs may read what became of them: each gets the same
-- on this table as it has on `jobqueue_jobs`.
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
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON jobqueue_results TO %s',
                           g.grantee);
        ELSIF g.reads THEN
            EXECUTE format('GRANT SELECT ON jobqueue_results TO %s', g.grantee);
        END IF;
    END LOOP;
END
$$;
