//! A worker's writes on the jobs it holds, each naming a job and the
//! fencing token of its claim: start, complete (in place, by delete, with
//! workflow steps), fail, heartbeat, progress, cancel, release, snooze and
//! park.

/// The rows of `jobqueue_jobs AS j` still held under the leases of arrays
/// `$1` ids (sorted) and `$2` tokens: a job recovered meanwhile, and maybe
/// claimed again under another token, is left alone.
macro_rules! held_by_token {
    () => {
        "WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')"
    };
}

/// Marks held jobs as started (`claimed` -> `running`). Arrays `$1` ids, `$2` tokens.
pub(crate) const JOB_START_MANY: &str = concat!(
    "
    UPDATE jobqueue_jobs AS j
    SET status = 'running',
        started_at = COALESCE(j.started_at, now())
    ",
    held_by_token!(),
    "
    RETURNING j.id"
);

/// Adds the jobs of CTE `done` (`queue`, `job_type`) to this minute's
/// completion counts of the connection's own server process (see the
/// `completion_counts` migration): the second half of both completions,
/// so completed jobs are counted whether their rows are kept or not.
macro_rules! count_completed {
    () => {
        "
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    )"
    };
}

/// The rows of `held_by_token!`, as the completions' CTE `done` returns
/// them.
macro_rules! completed_held {
    () => {
        concat!(
            "
        ",
            held_by_token!(),
            "
        RETURNING j.id, j.queue, j.job_type
    ),"
        )
    };
}

/// The completions' CTE `done`: the held jobs of `completed_held!`
/// rewritten as `completed`.
macro_rules! completed_in_place {
    () => {
        concat!(
            "
    WITH done AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'completed',
            finished_at = now(),
            started_at = COALESCE(j.started_at, j.claimed_at),
            progress = 100,
            lease_expires_at = NULL,
            cancel_requested = false
",
            completed_held!()
        )
    };
}

/// The completions' CTE `done`: the held jobs of `completed_held!`
/// deleted.
macro_rules! completed_by_delete {
    () => {
        concat!(
            "
    WITH done AS (
        DELETE FROM jobqueue_jobs AS j
",
            completed_held!()
        )
    };
}

/// Completes held jobs in one statement, keeping their rows as `completed`
/// (a retention above zero for completed jobs), and counts them. Arrays
/// `$1` ids, `$2` tokens; returns the ids it completed (a job whose token no
/// longer matches is left alone).
pub(crate) const JOB_COMPLETE_MANY: &str = concat!(
    completed_in_place!(),
    count_completed!(),
    "
    SELECT id FROM done"
);

/// Completes held jobs by deleting them, and counts them, in one statement:
/// for completed jobs kept for no time (`Retention::completed` of zero).
/// A delete writes no new row version and no index entry, and
/// leaves nothing to prune. Arrays `$1` ids, `$2` tokens; returns the ids it
/// completed.
pub(crate) const JOB_COMPLETE_DELETE_MANY: &str = concat!(
    completed_by_delete!(),
    count_completed!(),
    "
    SELECT id FROM done"
);

/// The steps of the workflow jobs of CTE `done` (completed), marked
/// `completed` with their results (array `$3`, JSON text parallel to the
/// ids `$1`; null: none), as CTE `ended`; then their children released
/// (`release_children!`) and their queues woken on channel `$4`; the
/// waiters of a step that recorded a result told on channel
/// `jobqueue_results` with its id. Returns the ids completed.
macro_rules! complete_steps {
    () => {
        concat!(
            ",
    ended AS (
        UPDATE jobqueue_workflow_steps AS s
        SET state = 'completed',
            ended_at = now(),
            result = CAST(($3::text[])[width_bucket(s.job_id, $1::uuid[])] AS jsonb)
        FROM done
        WHERE s.job_id = done.id AND s.state <> 'completed'
        RETURNING s.job_id, s.result IS NOT NULL AS has_result
    ),",
            release_children!("true", "$4"),
            ",
    told AS (
        SELECT count(pg_notify('jobqueue_results', ended.job_id::text)) AS n
        FROM ended WHERE ended.has_result
    )
    SELECT done.id FROM done LEFT JOIN wake ON true LEFT JOIN told ON true"
        )
    };
}

/// The results of the jobs of CTE `done` (completed), kept in
/// `jobqueue_results` (array `$3`, JSON text parallel to the ids `$1`)
/// for `$4` seconds (NULL: until deleted), and each job's waiters told on
/// channel `jobqueue_results` with its id. Returns the ids completed.
macro_rules! keep_results {
    () => {
        ",
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
    SELECT done.id FROM done LEFT JOIN told ON true"
    };
}

/// [`JOB_COMPLETE_MANY`] of jobs whose handlers recorded a result (outside
/// workflows): their results kept for their enqueuers in the same
/// statement (`keep_results!`).
pub(crate) const JOB_COMPLETE_RESULTS_MANY: &str =
    concat!(completed_in_place!(), count_completed!(), keep_results!());

/// [`JOB_COMPLETE_DELETE_MANY`] of jobs whose handlers recorded a result:
/// their rows deleted and their results kept (`keep_results!`).
pub(crate) const JOB_COMPLETE_DELETE_RESULTS_MANY: &str =
    concat!(completed_by_delete!(), count_completed!(), keep_results!());

/// [`JOB_COMPLETE_MANY`] of jobs of workflows: their steps completed and
/// their children released in the same statement (`complete_steps!`).
pub(crate) const JOB_COMPLETE_STEPS_MANY: &str =
    concat!(completed_in_place!(), count_completed!(), complete_steps!());

/// [`JOB_COMPLETE_DELETE_MANY`] of jobs of workflows: their steps
/// completed and their children released in the same statement
/// (`complete_steps!`).
pub(crate) const JOB_COMPLETE_DELETE_STEPS_MANY: &str = concat!(
    completed_by_delete!(),
    count_completed!(),
    complete_steps!()
);

/// The jobs of arrays `$1` ids still held under the tokens `$2`, rows
/// locked, each with its delay `$3` (seconds) and the columns `$more` adds
/// (`, ($4::text[])[i] AS error`), as `l`: the `FROM` and `WHERE` of a CTE
/// `next` of `update_by_id!`.
macro_rules! held_with_delays {
    ($more:literal) => {
        concat!(
            "FROM jobqueue_jobs AS j
        CROSS JOIN LATERAL (
            SELECT ($2::int4[])[i] AS token, ($3::float8[])[i] AS delay",
            $more,
            "
            FROM width_bucket(j.id, $1::uuid[]) AS i
        ) AS l
        WHERE j.id = ANY($1::uuid[])
          AND j.claim_count = l.token
          AND j.status IN ('claimed', 'running')
        FOR UPDATE OF j"
        )
    };
}

/// Records failed attempts of held jobs in one statement.
///
/// Arrays: `$1` ids, `$2` tokens, `$3` retry delay in seconds (null: permanent
/// failure), `$4` error text. A job goes back to `scheduled` (`pending` if
/// the delay is zero) at `now() + delay` while it has attempts left, to `failed` otherwise, and to
/// `cancelled` if a cancel was requested meanwhile; the waiters of a job
/// that ended so (`jobqueue::wait_result`) are told on channel
/// `jobqueue_results` with its id. Returns id, new status and run_at of
/// each job it changed.
pub(crate) const JOB_FAIL_MANY: &str = concat!(
    "WITH next AS (
        SELECT j.id, l.delay, l.error,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN l.delay IS NULL OR j.attempts >= j.max_attempts THEN 'failed'
                    WHEN l.delay <= 0 THEN 'pending'
                    ELSE 'scheduled' END AS next_status
        ",
    held_with_delays!(", ($4::text[])[i] AS error"),
    "
    ),
    ",
    update_by_id_as!("failed"; "delay", "error"),
    "
        run_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                      THEN now() + make_interval(secs => by_id.delay[width_bucket(j.id, by_id.ids)]) ELSE j.run_at END,
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.worker_id END,",
    error_by_id!(),
    "
    RETURNING j.id, j.status, j.run_at
    ),",
    tell_ended!("failed"),
    "
    SELECT failed.id, failed.status, failed.run_at FROM failed LEFT JOIN told ON true"
);

/// Renews the leases of held jobs, and writes the progress their handlers
/// reported since the last renewal. Arrays `$1` ids, `$2` tokens, `$3`
/// lease in seconds; arrays parallel to the ids (or empty, when no job of
/// the batch reported any): `$4` percent (null: unchanged), `$5` stage
/// (null: unchanged), `$6` events (null: the job reported nothing, else it
/// marks it `running`), `$7` the event count at claim: where it is null,
/// the events add to the row's count; else they are all the events of the
/// claim so far, and the count becomes `$7` plus them unless it is higher
/// already (a beat sent again, or overtaken by a later one, counts nothing
/// twice). The event count stops at the column's largest value rather
/// than fail the batch. Returns each renewed job with
/// its cancel flag; jobs no longer held under their token are absent.
pub(crate) const JOB_HEARTBEAT_MANY: &str = concat!(
    "
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
    ",
    held_by_token!(),
    "
    RETURNING j.id, j.cancel_requested"
);

/// Records progress of one held job: `$1` id, `$2` token, `$3` percent
/// (nullable: unchanged), `$4` stage (nullable: unchanged), `$5` events to add.
/// Marks the job running. Returns its cancel flag.
pub(crate) const JOB_PROGRESS: &str = "
    UPDATE jobqueue_jobs AS j
    SET progress = COALESCE($3, j.progress),
        current_stage = COALESCE($4, j.current_stage),
        events_count = j.events_count + $5,
        status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = $1
      AND j.claim_count = $2
      AND j.status IN ('claimed', 'running')
    RETURNING j.cancel_requested";

/// Records the output of durable step number `$3` (from 0) of one held
/// job, `$1` id, `$2` token: appends `{"name": $4, "output": $5}` (JSON
/// text) to its `step_outputs`, only while it holds exactly `$3` of them,
/// so a step is recorded once and in its turn. Marks the job running.
/// Changes no row if the job is no longer held under the token, or its
/// steps moved on.
pub(crate) const JOB_RECORD_STEP: &str = "
    UPDATE jobqueue_jobs AS j
    SET step_outputs = COALESCE(j.step_outputs, '[]'::jsonb)
                       || jsonb_build_array(jsonb_build_object('name', $4::text,
                                                               'output', CAST($5::text AS jsonb))),
        status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = $1
      AND j.claim_count = $2
      AND j.status IN ('claimed', 'running')
      AND jsonb_array_length(COALESCE(j.step_outputs, '[]'::jsonb)) = $3";

/// Sets the durable cursor of one held job, `$1` id, `$2` token, to `$3`
/// (JSON text), replacing the one before. Marks the job running. Changes
/// no row if the job is no longer held under the token.
pub(crate) const JOB_ADVANCE_CURSOR: &str = "
    UPDATE jobqueue_jobs AS j
    SET step_cursor = CAST($3::text AS jsonb),
        status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = $1
      AND j.claim_count = $2
      AND j.status IN ('claimed', 'running')";

/// Marks held jobs as cancelled (their handler stopped after a cancel request),
/// and tells their waiters (`tell_ended!`). Arrays `$1` ids, `$2` tokens;
/// returns the ids changed.
pub(crate) const JOB_CANCEL_HELD_MANY: &str = concat!(
    "
    WITH cancelled AS (
    UPDATE jobqueue_jobs AS j
    SET status = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL
    ",
    held_by_token!(),
    "
    RETURNING j.id, j.status
    ),",
    tell_ended!("cancelled"),
    "
    SELECT cancelled.id FROM cancelled LEFT JOIN told ON true"
);

/// The end of an `UPDATE` of held jobs (`held_by_token!`) handed back
/// unstarted: the attempt their claim took is not used up, and no runner
/// holds them.
macro_rules! given_back {
    () => {
        concat!(
            "attempts = j.attempts - 1,
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL
    ",
            held_by_token!()
        )
    };
}

/// Hands held jobs back without using up an attempt (a runner shutting down
/// before it started them). Arrays `$1` ids, `$2` tokens; returns the ids.
pub(crate) const JOB_RELEASE_MANY: &str = concat!(
    "
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
        finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
        ",
    given_back!(),
    "
    RETURNING j.id"
);

/// Snoozes held jobs: each goes back to `pending` (or `scheduled`) at
/// `now() + delay` without using up its attempt, its history recording the
/// snooze; a job already snoozed `$4` times fails instead. Arrays `$1`
/// ids, `$2` tokens, `$3` delays in seconds, `$5` whether the job's queue
/// backs off for its delay too (its `backoff_until` moved to at least
/// `now() + delay`: a rate-limited call). A job with a cancel request is
/// cancelled. Returns the ids and new statuses.
pub(crate) const JOB_SNOOZE_MANY: &str = concat!(
    "WITH next AS (
        SELECT j.id, l.delay, j.queue, l.backoff,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN j.snoozes >= $4 THEN 'failed'
                    WHEN l.delay <= 0 THEN 'pending'
                    ELSE 'scheduled' END AS next_status,
               CASE WHEN j.snoozes >= $4
                    THEN format('snoozed %s times, the most allowed (max_snoozes %s): gave up \
                                 waiting', j.snoozes + 1, $4)
                    ELSE format('snoozed for %s s (snooze %s of at most %s; no attempt used)',
                                round(l.delay::numeric, 3), j.snoozes + 1, $4) END AS note
        ",
    held_with_delays!(", ($5::bool[])[i] AS backoff"),
    "
    ),
    backoff AS (
        INSERT INTO jobqueue_queues AS c (name, backoff_until)
        SELECT queue, now() + make_interval(secs => max(delay))
        FROM next WHERE backoff
        GROUP BY queue
        ON CONFLICT (name) DO UPDATE
        SET backoff_until = greatest(c.backoff_until, EXCLUDED.backoff_until)
    ),
    ",
    update_by_id!("delay", "note"),
    "
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
        errors = ",
    push_error!("by_id.note[width_bucket(j.id, by_id.ids)]"),
    "
    FROM by_id
    WHERE j.id = ANY(by_id.ids)
    RETURNING j.id, j.status"
);

/// Sets held jobs aside as `unhandled` without using up an attempt: the
/// claiming runner has no handler for their type. Arrays `$1` ids, `$2`
/// tokens; `$3` names the runner (for the error text). Returns the ids.
pub(crate) const JOB_PARK_MANY: &str = concat!(
    "
    UPDATE jobqueue_jobs AS j
    SET ",
    set_aside!("$3"),
    ",
        ",
    given_back!(),
    "
    RETURNING j.id"
);
