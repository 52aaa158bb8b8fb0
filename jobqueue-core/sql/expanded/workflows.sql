-- Every statement of jobqueue-core/src/sql/workflows.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- WORKFLOW_INSERT
-- Inserts a workflow, its steps, its edges and its jobs in one statement,
-- and wakes the queues of the steps due at once.
--
-- `$1` workflow id, `$2` name, `$3` on_failure; per step, arrays parallel
-- to each other: `$4` job ids, `$5` step names, `$6` job types, `$7`
-- queues, `$8` priorities, `$9` payloads (JSON text), `$10` max attempts,
-- `$11` run_at (null: `now()` plus `$12`, the delay in seconds), `$13`
-- concurrency keys, `$14` counts of parents; per edge: `$15` parents,
-- `$16` children, `$17` kinds; `$18` the traceparent of them all, `$19`
-- the notify channel; per step again, `$20` tags (array literals) and
-- `$21` metadata (JSON text), each nullable. A step with parents is inserted `blocked`; the
-- others as any job (`status_for_keyed!`). Returns the number of jobs.
WITH workflow AS (
        INSERT INTO jobqueue_workflows (id, name, on_failure)
        VALUES ($1, $2, $3)
        RETURNING id
    ),
    steps AS (
        INSERT INTO jobqueue_workflow_steps (job_id, workflow_id, name, job_type, parents_left)
        SELECT u.id, w.id, u.name, u.job_type, u.parents
        FROM workflow AS w,
             unnest($4::uuid[], $5::text[], $6::text[], $14::int4[])
             AS u(id, name, job_type, parents)
    ),
    edges AS (
        INSERT INTO jobqueue_workflow_edges (parent_id, child_id, workflow_id, kind)
        SELECT e.parent, e.child, w.id, e.kind
        FROM workflow AS w,
             unnest($15::uuid[], $16::uuid[], $17::text[]) AS e(parent, child, kind)
    ),
    inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status,
             traceparent, concurrency_key, workflow_id, tags, metadata)
        SELECT t.id, t.job_type, t.queue, t.priority, CAST(t.payload AS jsonb),
               t.max_attempts, t.run_at,
               CASE WHEN t.parents > 0 THEN 'blocked' ELSE CASE WHEN t.concurrency_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = t.queue AND kq.key_limit IS NOT NULL) THEN 'waiting' WHEN t.run_at <= now() THEN 'pending' ELSE 'scheduled' END END,
               $18::text, t.concurrency_key, w.id, CAST(t.tags AS text[]),
               CAST(t.metadata AS jsonb)
        FROM workflow AS w,
             (SELECT u.id, u.job_type, u.queue, u.priority, u.payload, u.max_attempts,
                     COALESCE(u.run_at, now() + make_interval(secs => u.delay)) AS run_at,
                     u.concurrency_key, u.parents, u.tags, u.metadata
              FROM unnest($4::uuid[], $6::text[], $7::text[], $8::int4[], $9::text[],
                          $10::int4[], $11::timestamptz[], $12::float8[], $13::text[],
                          $14::int4[], $20::text[], $21::text[])
                   AS u(id, job_type, queue, priority, payload, max_attempts, run_at, delay,
                        concurrency_key, parents, tags, metadata)) AS t
        RETURNING id, queue, status
    ),
    wake AS (
        SELECT count(pg_notify($19, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM inserted WHERE status IN ('pending', 'waiting')) AS q
    )
    SELECT count(*) AS n FROM inserted LEFT JOIN wake ON true
;

-- WORKFLOW_SETTLE_ENDED
-- Settles the ends that no completion released: of a page of steps
-- still `live` (CTE `page`), those whose jobs failed for good or were
-- cancelled (by a handler, an operator, a rescue, or this statement), or
-- whose job row is gone (a cancelled row deleted, or pruned, before its
-- step was settled: settled as cancelled), each marked with its job's
-- status (CTE `ended`, with its workflow's `on_failure`), in one
-- statement. The steps looked at are those of the jobs in `$3` when it
-- is not null (planned with its value: a look at those jobs, not at every
-- step); else up to `$1` live steps after step `$4` (from the first when
-- null) in id order, through `jobqueue_workflow_steps_live_idx` (`page`:
-- a sweep reads a bounded page per statement, whatever number of steps
-- is live, and goes on from the page's `last` step), and, when `$5` is
-- not null, up to `$6` live steps whose jobs failed or were cancelled
-- within the last `$5` seconds, through `jobqueue_jobs_workflow_ended_idx`
-- (`recent`: what changed lately, read in full each pass, while the page
-- walk repairs the rest, a page at a time).
-- Steps another sweep has locked are skipped. The jobs are locked too
-- (shared), and their status read from the locked row: a retry that
-- committed after this statement's snapshot finds its job pending and
-- leaves its step live, and one that comes later waits for this statement
-- (see `requeue_where!` in `jobs/operate.rs`), then revives the step it ended.
--
-- Their edges of kind `finished`, and all of them under `on_failure =
-- 'run'`, settle (`release_children!`, waking queues on channel `$2`);
-- under `cancel`, the blocked children of their other edges are
-- cancelled, and the next round settles those in turn, down the graph;
-- under `wait`, those edges stay until the job is retried and completes.
-- A step whose parent ends in the same round is `deferred` to the next:
-- that parent's settling counts it down, and one statement may not also
-- mark it ended (PostgreSQL applies one of two updates of a row in one
-- statement, and drops the other).
--
-- It never waits for a step another transaction holds: the children of
-- the ended steps are locked with `SKIP LOCKED` (`children_locked`, in id
-- order), and a step with a child it did not get (a completion is
-- counting that child down) is `busy`, left live for a later sweep. A
-- completion locks its children in id order and may wait for this
-- statement's candidate; were this statement to wait for the
-- completion's children in turn (a diamond: P before C and Y, C before
-- Y, Y's id lower than C's, C cancelled while P completes), the two would
-- wait on each other. Returns how many steps ended, the children it
-- cancelled, the steps it deferred, and of a page of the sweep, its size
-- and last step (`paged`, `last`).
WITH page AS MATERIALIZED (
        SELECT s.job_id
        FROM jobqueue_workflow_steps AS s
        WHERE $3::uuid[] IS NULL AND s.state = 'live'
          AND s.job_id > coalesce($4::uuid, '00000000-0000-0000-0000-000000000000')
        ORDER BY s.job_id
        LIMIT $1
    ),
    recent AS MATERIALIZED (
        SELECT j.id AS job_id
        FROM jobqueue_jobs AS j
        WHERE $3::uuid[] IS NULL AND $5::float8 IS NOT NULL
          AND j.workflow_id IS NOT NULL AND j.status IN ('failed', 'cancelled')
          AND j.finished_at >= now() - make_interval(secs => $5::float8)
          AND EXISTS (SELECT 1 FROM jobqueue_workflow_steps AS s
                      WHERE s.job_id = j.id AND s.state = 'live')
        LIMIT $6
    ),
    asked AS (
        SELECT job_id FROM page
        UNION
        SELECT job_id FROM recent
        UNION
        SELECT a.job_id FROM unnest($3::uuid[]) AS a(job_id)
    ),
    ended_jobs AS (
        SELECT s.job_id, j.status
        FROM asked AS a
        JOIN jobqueue_workflow_steps AS s ON s.job_id = a.job_id
        JOIN jobqueue_jobs AS j ON j.id = s.job_id
        WHERE s.state = 'live' AND j.status IN ('failed', 'cancelled')
        FOR UPDATE OF s SKIP LOCKED
        FOR SHARE OF j SKIP LOCKED
    ),
    rows_gone AS (
        SELECT s.job_id, 'cancelled'::text AS status
        FROM asked AS a
        JOIN jobqueue_workflow_steps AS s ON s.job_id = a.job_id
        WHERE s.state = 'live'
          AND NOT EXISTS (SELECT 1 FROM jobqueue_jobs AS j WHERE j.id = s.job_id)
        FOR UPDATE OF s SKIP LOCKED
    ),
    candidate AS (
        SELECT job_id, status FROM ended_jobs
        UNION ALL
        SELECT job_id, status FROM rows_gone
    ),
    deferred AS (
        SELECT c.job_id
        FROM candidate AS c
        WHERE EXISTS (SELECT 1 FROM jobqueue_workflow_edges AS e
                      JOIN candidate AS p ON p.job_id = e.parent_id
                      WHERE e.child_id = c.job_id AND NOT e.settled)
    ),
    children_locked AS MATERIALIZED (
        SELECT s.job_id
        FROM jobqueue_workflow_steps AS s
        WHERE s.job_id = ANY(ARRAY(SELECT e.child_id
                                   FROM jobqueue_workflow_edges AS e
                                   JOIN candidate AS c ON c.job_id = e.parent_id
                                   WHERE NOT e.settled))
        ORDER BY s.job_id
        FOR UPDATE SKIP LOCKED
    ),
    busy AS (
        SELECT DISTINCT e.parent_id AS job_id
        FROM jobqueue_workflow_edges AS e
        JOIN candidate AS c ON c.job_id = e.parent_id
        WHERE NOT e.settled
          AND NOT EXISTS (SELECT 1 FROM children_locked AS l WHERE l.job_id = e.child_id)
    ),
    ended AS (
        UPDATE jobqueue_workflow_steps AS s
        SET state = c.status, ended_at = now()
        FROM candidate AS c, jobqueue_workflows AS w
        WHERE s.job_id = c.job_id AND w.id = s.workflow_id
          AND c.job_id NOT IN (SELECT job_id FROM deferred)
          AND c.job_id NOT IN (SELECT job_id FROM busy)
        RETURNING s.job_id, s.name, w.on_failure
    ),
    settled AS (
        UPDATE jobqueue_workflow_edges AS e
        SET settled = true
        FROM ended
        WHERE e.parent_id = ended.job_id AND NOT e.settled AND (e.kind = 'finished' OR ended.on_failure = 'run')
        RETURNING e.child_id
    ),
    counts AS (
        SELECT array_agg(g.child_id ORDER BY g.child_id) AS ids,
               array_agg(g.n ORDER BY g.child_id) AS n
        FROM (SELECT child_id, count(*)::int4 AS n FROM settled GROUP BY child_id) AS g
    ),
    counted_down AS (
        UPDATE jobqueue_workflow_steps AS s
        SET parents_left = s.parents_left - counts.n[width_bucket(s.job_id, counts.ids)]
        FROM counts
        WHERE s.job_id = ANY(counts.ids)
        RETURNING s.job_id, s.parents_left
    ),
    released AS (
        UPDATE jobqueue_jobs AS j
        SET status = CASE WHEN j.status = 'blocked' THEN CASE WHEN j.concurrency_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = j.queue AND kq.key_limit IS NOT NULL) THEN 'waiting' WHEN j.run_at <= now() THEN 'pending' ELSE 'scheduled' END ELSE j.status END
        FROM counted_down AS c
        WHERE j.id = c.job_id AND c.parents_left = 0
          AND j.status IN ('blocked', 'failed', 'cancelled')
        RETURNING j.id, j.queue, j.status
    ),
    wake AS (
        SELECT count(pg_notify($2, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM released WHERE status IN ('pending', 'waiting')) AS q
    ),
    doomed AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'cancelled',
            finished_at = now(),
            last_error = 'cancelled: step `' || ended.name
                         || '`, which it waits for, did not complete'
        FROM jobqueue_workflow_edges AS e, ended
        WHERE e.parent_id = ended.job_id AND NOT e.settled AND e.kind = 'completed'
          AND ended.on_failure = 'cancel'
          AND j.id = e.child_id AND j.status = 'blocked'
        RETURNING j.id
    )
    SELECT (SELECT count(*) FROM ended) AS ended,
           ARRAY(SELECT id FROM doomed) AS cancelled,
           ARRAY(SELECT job_id FROM deferred) AS deferred,
           (SELECT count(*) FROM page) AS paged,
           (SELECT p.job_id FROM page AS p ORDER BY p.job_id DESC LIMIT 1) AS last,
           (SELECT notified FROM wake) AS notified
;

-- WORKFLOW_PARENT_RESULTS
-- The results of the parents of step `$1`: `name`, `result` (JSON text,
-- null when none was recorded), in name order.
    SELECT s.name, CAST(s.result AS text) AS result
    FROM jobqueue_workflow_edges AS e
    JOIN jobqueue_workflow_steps AS s ON s.job_id = e.parent_id
    WHERE e.child_id = $1
    ORDER BY s.name
;

-- WORKFLOW_GET
-- Workflow `$1`: `id`, `name`, `on_failure`, `created_at`.
    SELECT id, name, on_failure, created_at
    FROM jobqueue_workflows
    WHERE id = $1
;

-- WORKFLOW_STEPS
-- The steps of workflow `$1` in insert order, each with its job's
-- current status (null once the row is gone: a completed job deleted, or
-- a finished one pruned) and the names of its parents.
    SELECT s.job_id, s.name, s.job_type, s.state, s.parents_left,
           CAST(s.result AS text) AS result, s.ended_at, j.status AS job_status,
           ARRAY(SELECT p.name
                 FROM jobqueue_workflow_edges AS e
                 JOIN jobqueue_workflow_steps AS p ON p.job_id = e.parent_id
                 WHERE e.child_id = s.job_id
                 ORDER BY p.name) AS parents
    FROM jobqueue_workflow_steps AS s
    LEFT JOIN jobqueue_jobs AS j ON j.id = s.job_id
    WHERE s.workflow_id = $1
    ORDER BY s.job_id
;

-- WORKFLOW_LIST
-- Up to `$1` workflows, newest first (`created_at`, then id), only those
-- with a step not ended yet if `$2`: `id`, `name`, `on_failure`,
-- `created_at`, their steps counted by state (`steps`, `live`,
-- `completed`, `failed`, `cancelled`) and when the last one ended
-- (`last_ended_at`). Reads the workflows newest first through
-- `jobqueue_workflows_created_idx` and each one's steps through
-- `step_name_unique` (`workflow_id, name`).
    SELECT w.id, w.name, w.on_failure, w.created_at,
           count(s.job_id)::int8 AS steps,
           count(s.job_id) FILTER (WHERE s.state = 'live')::int8 AS live,
           count(s.job_id) FILTER (WHERE s.state = 'completed')::int8 AS completed,
           count(s.job_id) FILTER (WHERE s.state = 'failed')::int8 AS failed,
           count(s.job_id) FILTER (WHERE s.state = 'cancelled')::int8 AS cancelled,
           max(s.ended_at) AS last_ended_at
    FROM (SELECT f.id, f.name, f.on_failure, f.created_at
          FROM jobqueue_workflows AS f
          WHERE NOT $2
             OR EXISTS (SELECT 1 FROM jobqueue_workflow_steps AS l
                        WHERE l.workflow_id = f.id AND l.state = 'live')
          ORDER BY f.created_at DESC, f.id DESC
          LIMIT $1) AS w
    LEFT JOIN jobqueue_workflow_steps AS s ON s.workflow_id = w.id
    GROUP BY w.id, w.name, w.on_failure, w.created_at
    ORDER BY w.created_at DESC, w.id DESC
;

-- WORKFLOW_OF_STEP
-- The workflow of job `$1`, if it is a step of one.
    SELECT workflow_id AS id FROM jobqueue_workflow_steps WHERE job_id = $1
;

-- WORKFLOW_PRUNE
-- Deletes up to `$2` workflows whose steps all ended more than `$1`
-- seconds ago (and that were enqueued before that), and none of whose jobs
-- is still kept as failed, with their steps and edges (`ON DELETE
-- CASCADE`): a failed step can be retried for as long as its row is
-- kept, and its retry needs its step and edges (pruned first, the retry
-- would run it as a job of its own, its parents' results gone).
-- Workflows another prune has locked are skipped.
--
-- Each test is a probe of `jobqueue_workflow_steps_state_idx`
-- (`workflow_id, state, ended_at`): a live step, a step that ended within
-- `$1`, the failed steps (whose jobs are looked up); a workflow still
-- running costs one probe, however many steps it has.
    WITH doomed AS (
        SELECT w.id
        FROM jobqueue_workflows AS w
        WHERE w.created_at < now() - make_interval(secs => $1)
          AND NOT EXISTS (SELECT 1 FROM jobqueue_workflow_steps AS s
                          WHERE s.workflow_id = w.id AND s.state = 'live')
          AND NOT EXISTS (SELECT 1 FROM jobqueue_workflow_steps AS s
                          WHERE s.workflow_id = w.id
                            AND s.state IN ('completed', 'failed', 'cancelled')
                            AND s.ended_at >= now() - make_interval(secs => $1))
          AND NOT EXISTS (SELECT 1 FROM jobqueue_workflow_steps AS s
                          JOIN jobqueue_jobs AS j ON j.id = s.job_id
                          WHERE s.workflow_id = w.id AND s.state = 'failed'
                            AND j.status = 'failed')
        ORDER BY w.created_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jobqueue_workflows AS w
    WHERE w.id IN (SELECT id FROM doomed)
;
