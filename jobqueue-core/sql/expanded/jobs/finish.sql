-- Every statement of jobqueue-core/src/sql/jobs/finish.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- JOB_START_MANY
-- Marks held jobs as started (`claimed` -> `running`). Arrays `$1` ids, `$2` tokens.
    UPDATE jobqueue_jobs AS j
    SET status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id
;

-- JOB_COMPLETE_MANY
-- Completes held jobs in one statement, keeping their rows as `completed`
-- (a retention above zero for completed jobs), and counts them. Arrays
-- `$1` ids, `$2` tokens; returns the ids it completed (a job whose token no
-- longer matches is left alone).
    WITH done AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'completed',
            finished_at = now(),
            started_at = COALESCE(j.started_at, j.claimed_at),
            progress = 100,
            lease_expires_at = NULL,
            cancel_requested = false

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    )
    SELECT id FROM done
;

-- JOB_COMPLETE_DELETE_MANY
-- Completes held jobs by deleting them, and counts them, in one statement:
-- for completed jobs kept for no time (`Retention::completed` of zero).
-- A delete writes no new row version and no index entry, and
-- leaves nothing to prune. Arrays `$1` ids, `$2` tokens; returns the ids it
-- completed.
    WITH done AS (
        DELETE FROM jobqueue_jobs AS j

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    )
    SELECT id FROM done
;

-- JOB_COMPLETE_RESULTS_MANY
-- [`JOB_COMPLETE_MANY`] of jobs whose handlers recorded a result (outside
-- workflows): their results kept for their enqueuers in the same
-- statement (`keep_results!`).
    WITH done AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'completed',
            finished_at = now(),
            started_at = COALESCE(j.started_at, j.claimed_at),
            progress = 100,
            lease_expires_at = NULL,
            cancel_requested = false

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    ),
    kept AS (
        INSERT INTO jobqueue_results AS r (job_id, job_type, result, expires_at)
        SELECT done.id, done.job_type,
               CAST(($3::text[])[width_bucket(done.id, $1::uuid[])] AS jsonb),
               now() + make_interval(secs => $4::float8)
        FROM done
        ON CONFLICT (job_id) DO UPDATE
        SET result = EXCLUDED.result,
            completed_at = now(),
            expires_at = EXCLUDED.expires_at
        RETURNING r.job_id
    ),
    told AS (
        SELECT count(pg_notify('jobqueue_results', kept.job_id::text)) AS n FROM kept
    )
    SELECT done.id FROM done LEFT JOIN told ON true
;

-- JOB_COMPLETE_DELETE_RESULTS_MANY
-- [`JOB_COMPLETE_DELETE_MANY`] of jobs whose handlers recorded a result:
-- their rows deleted and their results kept (`keep_results!`).
    WITH done AS (
        DELETE FROM jobqueue_jobs AS j

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    ),
    kept AS (
        INSERT INTO jobqueue_results AS r (job_id, job_type, result, expires_at)
        SELECT done.id, done.job_type,
               CAST(($3::text[])[width_bucket(done.id, $1::uuid[])] AS jsonb),
               now() + make_interval(secs => $4::float8)
        FROM done
        ON CONFLICT (job_id) DO UPDATE
        SET result = EXCLUDED.result,
            completed_at = now(),
            expires_at = EXCLUDED.expires_at
        RETURNING r.job_id
    ),
    told AS (
        SELECT count(pg_notify('jobqueue_results', kept.job_id::text)) AS n FROM kept
    )
    SELECT done.id FROM done LEFT JOIN told ON true
;

-- JOB_COMPLETE_STEPS_MANY
-- [`JOB_COMPLETE_MANY`] of jobs of workflows: their steps completed and
-- their children released in the same statement (`complete_steps!`).
    WITH done AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'completed',
            finished_at = now(),
            started_at = COALESCE(j.started_at, j.claimed_at),
            progress = 100,
            lease_expires_at = NULL,
            cancel_requested = false

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    ),
    ended AS (
        UPDATE jobqueue_workflow_steps AS s
        SET state = 'completed',
            ended_at = now(),
            result = CAST(($3::text[])[width_bucket(s.job_id, $1::uuid[])] AS jsonb)
        FROM done
        WHERE s.job_id = done.id AND s.state <> 'completed'
        RETURNING s.job_id, s.result IS NOT NULL AS has_result
    ),
    settled AS (
        UPDATE jobqueue_workflow_edges AS e
        SET settled = true
        FROM ended
        WHERE e.parent_id = ended.job_id AND NOT e.settled AND (true)
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
        SELECT count(pg_notify($4, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM released WHERE status IN ('pending', 'waiting')) AS q
    ),
    told AS (
        SELECT count(pg_notify('jobqueue_results', ended.job_id::text)) AS n
        FROM ended WHERE ended.has_result
    )
    SELECT done.id FROM done LEFT JOIN wake ON true LEFT JOIN told ON true
;

-- JOB_COMPLETE_DELETE_STEPS_MANY
-- [`JOB_COMPLETE_DELETE_MANY`] of jobs of workflows: their steps
-- completed and their children released in the same statement
-- (`complete_steps!`).
    WITH done AS (
        DELETE FROM jobqueue_jobs AS j

        WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
        RETURNING j.id, j.queue, j.job_type
    ),
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    ),
    ended AS (
        UPDATE jobqueue_workflow_steps AS s
        SET state = 'completed',
            ended_at = now(),
            result = CAST(($3::text[])[width_bucket(s.job_id, $1::uuid[])] AS jsonb)
        FROM done
        WHERE s.job_id = done.id AND s.state <> 'completed'
        RETURNING s.job_id, s.result IS NOT NULL AS has_result
    ),
    settled AS (
        UPDATE jobqueue_workflow_edges AS e
        SET settled = true
        FROM ended
        WHERE e.parent_id = ended.job_id AND NOT e.settled AND (true)
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
        SELECT count(pg_notify($4, q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM released WHERE status IN ('pending', 'waiting')) AS q
    ),
    told AS (
        SELECT count(pg_notify('jobqueue_results', ended.job_id::text)) AS n
        FROM ended WHERE ended.has_result
    )
    SELECT done.id FROM done LEFT JOIN wake ON true LEFT JOIN told ON true
;

-- JOB_FAIL_MANY
-- Records failed attempts of held jobs in one statement.
--
-- Arrays: `$1` ids, `$2` tokens, `$3` retry delay in seconds (null: permanent
-- failure), `$4` error text. A job goes back to `scheduled` (`pending` if
-- the delay is zero) at `now() + delay` while it has attempts left, to `failed` otherwise, and to
-- `cancelled` if a cancel was requested meanwhile; the waiters of a job
-- that ended so (`jobqueue::wait_result`) are told on channel
-- `jobqueue_results` with its id. Returns id, new status and run_at of
-- each job it changed.
WITH next AS (
        SELECT j.id, l.delay, l.error,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN l.delay IS NULL OR j.attempts >= j.max_attempts THEN 'failed'
                    WHEN l.delay <= 0 THEN 'pending'
                    ELSE 'scheduled' END AS next_status
        FROM jobqueue_jobs AS j
        CROSS JOIN LATERAL (
            SELECT ($2::int4[])[i] AS token, ($3::float8[])[i] AS delay, ($4::text[])[i] AS error
            FROM width_bucket(j.id, $1::uuid[]) AS i
        ) AS l
        WHERE j.id = ANY($1::uuid[])
          AND j.claim_count = l.token
          AND j.status IN ('claimed', 'running')
        FOR UPDATE OF j
    ),
    by_id AS (
        SELECT array_agg(id ORDER BY id) AS ids,
               array_agg(next_status ORDER BY id) AS next_status,
               array_agg(delay ORDER BY id) AS delay,
               array_agg(error ORDER BY id) AS error
        FROM next
    ),
    failed AS (
    UPDATE jobqueue_jobs AS j
    SET status = by_id.next_status[width_bucket(j.id, by_id.ids)],
        run_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                      THEN now() + make_interval(secs => by_id.delay[width_bucket(j.id, by_id.ids)]) ELSE j.run_at END,
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.worker_id END,
        lease_expires_at = NULL,
        last_error = by_id.error[width_bucket(j.id, by_id.ids)],
        errors = (CASE WHEN jsonb_array_length(j.errors) >= 10 THEN j.errors - 0 ELSE j.errors END) || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', by_id.error[width_bucket(j.id, by_id.ids)]))
    FROM by_id
    WHERE j.id = ANY(by_id.ids)
    RETURNING j.id, j.status, j.run_at
    ),
    told AS (
        SELECT count(pg_notify('jobqueue_results', e.id::text)) AS n
        FROM failed AS e WHERE e.status IN ('failed', 'cancelled')
    )
    SELECT failed.id, failed.status, failed.run_at FROM failed LEFT JOIN told ON true
;

-- JOB_HEARTBEAT_MANY
-- Renews the leases of held jobs, and writes the progress their handlers
-- reported since the last renewal. Arrays `$1` ids, `$2` tokens, `$3`
-- lease in seconds; arrays parallel to the ids (or empty, when no job of
-- the batch reported any): `$4` percent (null: unchanged), `$5` stage
-- (null: unchanged), `$6` events (null: the job reported nothing, else it
-- marks it `running`), `$7` the event count at claim: where it is null,
-- the events add to the row's count; else they are all the events of the
-- claim so far, and the count becomes `$7` plus them unless it is higher
-- already (a beat sent again, or overtaken by a later one, counts nothing
-- twice). The event count stops at the column's largest value rather
-- than fail the batch. Returns each renewed job with
-- its cancel flag; jobs no longer held under their token are absent.
    UPDATE jobqueue_jobs AS j
    SET heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => $3),
        progress = COALESCE(($4::int2[])[width_bucket(j.id, $1::uuid[])], j.progress),
        current_stage = COALESCE(($5::text[])[width_bucket(j.id, $1::uuid[])], j.current_stage),
        events_count = LEAST(
            CASE WHEN ($7::int4[])[width_bucket(j.id, $1::uuid[])] IS NULL
                 THEN j.events_count::int8
                      + COALESCE(($6::int4[])[width_bucket(j.id, $1::uuid[])], 0)
                 ELSE greatest(j.events_count::int8,
                               ($7::int4[])[width_bucket(j.id, $1::uuid[])]::int8
                               + COALESCE(($6::int4[])[width_bucket(j.id, $1::uuid[])], 0))
            END,
            2147483647)::int4,
        status = CASE WHEN ($6::int4[])[width_bucket(j.id, $1::uuid[])] IS NULL
                      THEN j.status ELSE 'running' END,
        started_at = CASE WHEN ($6::int4[])[width_bucket(j.id, $1::uuid[])] IS NULL
                          THEN j.started_at ELSE COALESCE(j.started_at, now()) END
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id, j.cancel_requested
;

-- JOB_PROGRESS
-- Records progress of one held job: `$1` id, `$2` token, `$3` percent
-- (nullable: unchanged), `$4` stage (nullable: unchanged), `$5` events to add.
-- Marks the job running. Returns its cancel flag.
    UPDATE jobqueue_jobs AS j
    SET progress = COALESCE($3, j.progress),
        current_stage = COALESCE($4, j.current_stage),
        events_count = j.events_count + $5,
        status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = $1
      AND j.claim_count = $2
      AND j.status IN ('claimed', 'running')
    RETURNING j.cancel_requested
;

-- JOB_RECORD_STEP
-- Records the output of durable step number `$3` (from 0) of one held
-- job, `$1` id, `$2` token: appends `{"name": $4, "output": $5}` (JSON
-- text) to its `step_outputs`, only while it holds exactly `$3` of them,
-- so a step is recorded once and in its turn. Marks the job running.
-- Changes no row if the job is no longer held under the token, or its
-- steps moved on.
    UPDATE jobqueue_jobs AS j
    SET step_outputs = COALESCE(j.step_outputs, '[]'::jsonb)
                       || jsonb_build_array(jsonb_build_object('name', $4::text,
                                                               'output', CAST($5::text AS jsonb))),
        status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = $1
      AND j.claim_count = $2
      AND j.status IN ('claimed', 'running')
      AND jsonb_array_length(COALESCE(j.step_outputs, '[]'::jsonb)) = $3
;

-- JOB_ADVANCE_CURSOR
-- Sets the durable cursor of one held job, `$1` id, `$2` token, to `$3`
-- (JSON text), replacing the one before. Marks the job running. Changes
-- no row if the job is no longer held under the token.
    UPDATE jobqueue_jobs AS j
    SET step_cursor = CAST($3::text AS jsonb),
        status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = $1
      AND j.claim_count = $2
      AND j.status IN ('claimed', 'running')
;

-- JOB_CANCEL_HELD_MANY
-- Marks held jobs as cancelled (their handler stopped after a cancel request),
-- and tells their waiters (`tell_ended!`). Arrays `$1` ids, `$2` tokens;
-- returns the ids changed.
    WITH cancelled AS (
    UPDATE jobqueue_jobs AS j
    SET status = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id, j.status
    ),
    told AS (
        SELECT count(pg_notify('jobqueue_results', e.id::text)) AS n
        FROM cancelled AS e WHERE e.status IN ('failed', 'cancelled')
    )
    SELECT cancelled.id FROM cancelled LEFT JOIN told ON true
;

-- JOB_RELEASE_MANY
-- Hands held jobs back without using up an attempt (a runner shutting down
-- before it started them). Arrays `$1` ids, `$2` tokens; returns the ids.
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
        finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
        attempts = j.attempts - 1,
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id
;

-- JOB_SNOOZE_MANY
-- Snoozes held jobs: each goes back to `pending` (or `scheduled`) at
-- `now() + delay` without using up its attempt, its history recording the
-- snooze; a job already snoozed `$4` times fails instead. Arrays `$1`
-- ids, `$2` tokens, `$3` delays in seconds, `$5` whether the job's queue
-- backs off for its delay too (its `backoff_until` moved to at least
-- `now() + delay`: a rate-limited call). A job with a cancel request is
-- cancelled. Returns the ids and new statuses.
WITH next AS (
        SELECT j.id, l.delay, j.queue, l.backoff,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN j.snoozes >= $4 THEN 'failed'
                    WHEN l.delay <= 0 THEN 'pending'
                    ELSE 'scheduled' END AS next_status,
               CASE WHEN j.snoozes >= $4
                    THEN format('snoozed %s times, the most allowed (max_snoozes %s): gave up waiting', j.snoozes + 1, $4)
                    ELSE format('snoozed for %s s (snooze %s of at most %s; no attempt used)',
                                round(l.delay::numeric, 3), j.snoozes + 1, $4) END AS note
        FROM jobqueue_jobs AS j
        CROSS JOIN LATERAL (
            SELECT ($2::int4[])[i] AS token, ($3::float8[])[i] AS delay, ($5::bool[])[i] AS backoff
            FROM width_bucket(j.id, $1::uuid[]) AS i
        ) AS l
        WHERE j.id = ANY($1::uuid[])
          AND j.claim_count = l.token
          AND j.status IN ('claimed', 'running')
        FOR UPDATE OF j
    ),
    backoff AS (
        INSERT INTO jobqueue_queues AS c (name, backoff_until)
        SELECT queue, now() + make_interval(secs => max(delay))
        FROM next WHERE backoff
        GROUP BY queue
        ON CONFLICT (name) DO UPDATE
        SET backoff_until = greatest(c.backoff_until, EXCLUDED.backoff_until)
    ),
    by_id AS (
        SELECT array_agg(id ORDER BY id) AS ids,
               array_agg(next_status ORDER BY id) AS next_status,
               array_agg(delay ORDER BY id) AS delay,
               array_agg(note ORDER BY id) AS note
        FROM next
    )
    UPDATE jobqueue_jobs AS j
    SET status = by_id.next_status[width_bucket(j.id, by_id.ids)],
        run_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                      THEN now() + make_interval(secs => by_id.delay[width_bucket(j.id, by_id.ids)]) ELSE j.run_at END,
        attempts = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                        THEN j.attempts - 1 ELSE j.attempts END,
        snoozes = j.snoozes + 1,
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.worker_id END,
        started_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.started_at END,
        lease_expires_at = NULL,
        last_error = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'failed' THEN by_id.note[width_bucket(j.id, by_id.ids)] ELSE j.last_error END,
        errors = (CASE WHEN jsonb_array_length(j.errors) >= 10 THEN j.errors - 0 ELSE j.errors END) || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', by_id.note[width_bucket(j.id, by_id.ids)]))
    FROM by_id
    WHERE j.id = ANY(by_id.ids)
    RETURNING j.id, j.status
;

-- JOB_PARK_MANY
-- Sets held jobs aside as `unhandled` without using up an attempt: the
-- claiming runner has no handler for their type. Arrays `$1` ids, `$2`
-- tokens; `$3` names the runner (for the error text). Returns the ids.
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; set aside until a runner that handles it starts', j.job_type, $3, j.queue),
        attempts = j.attempts - 1,
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL
    WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')
    RETURNING j.id
;
