//! Every SQL statement the queue runs, one file per table (a folder for
//! the jobs'). `jobqueue-core/sql/expanded/` holds each file's statements
//! whole, as PostgreSQL runs them, kept current by the test of
//! `expanded.rs`.
//!
//! Statements are named Noun+Verb (`JOB_CLAIM_QUEUES`, `JOB_COMPLETE_MANY`) so
//! they sort by table. Every value is a bound parameter; nothing is ever
//! interpolated into these strings. Time always comes from the database's
//! `now()`, never from the caller's clock.
//!
//! - `jobs/`: `jobqueue_jobs`, the jobs themselves (`JOB_*`), a file for
//!   each thing done with them (`insert.rs`, `claim.rs`, `finish.rs` for a
//!   worker's writes on held jobs, `operate.rs` for an operator's,
//!   `maintain.rs`, `browse.rs`), and in `mod.rs` what several share and
//!   the prepared hot-path statements' marker types (`sql::JobInsert`,
//!   ...).
//! - `queues.rs`: `jobqueue_queues`, each queue's pause and global limit
//!   (`QUEUE_*`).
//! - `keys.rs`: the admission of keyed jobs under their queue's key limit
//!   (`KEY_*`).
//! - `migrations.rs`: `jobqueue_schema_migrations`, the schema versions
//!   jobqueue applied (`MIGRATIONS_*`).
//! - `schedules.rs`: `jobqueue_schedules`, the periodic jobs (`SCHEDULE_*`).
//! - `results.rs`: `jobqueue_results`, the results enqueuers await
//!   (`RESULT_*`); the completions that keep them are in `jobs/finish.rs`.
//! - `runners.rs`: `jobqueue_runners`, the registry of running runners
//!   (`RUNNER_*`).
//! - `completions.rs`: `jobqueue_completions`, the per-minute counts of
//!   completed jobs (`COMPLETIONS_*`).
//! - `workflows.rs`: `jobqueue_workflows`, `jobqueue_workflow_steps` and
//!   `jobqueue_workflow_edges`, jobs that wait for other jobs
//!   (`WORKFLOW_*`); the completions of workflow jobs are in `jobs/finish.rs`.
//! - `doctor.rs`: the doctor's reads of the statistics views and catalogs
//!   (`DOCTOR_*`), and the one reading of the xmin horizon (`XMIN_HORIZON`).
//! - `session.rs`: what opens a queue transaction and sets up a queue
//!   session: isolation and planner settings (`*_BEGIN`, `SESSION_SETUP`);
//!   what a worker's new connection sets and probes (`SESSION_*`).
//!
//! A fragment (`macro_rules!`) lives in the file of the statements that
//! expand it; this file holds the ones that statements of several files
//! expand. They are defined before the modules are declared, which is what
//! puts them in scope there. Every statement is re-exported here, so the
//! rest of the crate names it `sql::NAME` whatever its table.

/// Live and failed jobs counted per queue and state, each from the partial
/// index of its state (held jobs: the lease index), index-only where the
/// index holds what is read, so the cost follows the backlog and the dead
/// letter, never the completed and cancelled history: rows of `queue`,
/// `kind` (a status), `n`, and on the `pending` row `oldest_due_secs`.
macro_rules! live_counts {
    () => {
        "SELECT queue, 'pending' AS kind, count(*) AS n,
                EXTRACT(EPOCH FROM now() - min(run_at))::float8 AS oldest_due_secs
         FROM jobqueue_jobs WHERE status = 'pending' GROUP BY queue
         UNION ALL
         SELECT queue, 'scheduled', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'scheduled' GROUP BY queue
         UNION ALL
         SELECT queue, 'waiting', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'waiting' GROUP BY queue
         UNION ALL
         SELECT queue, 'blocked', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'blocked' GROUP BY queue
         UNION ALL
         SELECT queue, 'unhandled', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'unhandled' GROUP BY queue
         UNION ALL
         SELECT queue, status, count(*), NULL
         FROM jobqueue_jobs WHERE lease_expires_at IS NOT NULL GROUP BY queue, status
         UNION ALL
         SELECT queue, 'failed', count(*), NULL
         FROM jobqueue_jobs WHERE status = 'failed' GROUP BY queue"
    };
}

/// The status of a job inserted with run_at `$run_at` (an SQL expression):
/// `pending` if it is due by the database's clock, else `scheduled`.
macro_rules! status_for_run_at {
    ($run_at:literal) => {
        concat!(
            "CASE WHEN ",
            $run_at,
            " <= now() THEN 'pending' ELSE 'scheduled' END"
        )
    };
}

/// The holders of key `$key` of queue `$queue` (SQL expressions): its jobs
/// admitted and not finished.
macro_rules! key_holders {
    ($queue:literal, $key:literal) => {
        concat!(
            "(SELECT count(*) FROM jobqueue_jobs AS h
              WHERE h.queue = ",
            $queue,
            " AND h.concurrency_key = ",
            $key,
            "
                AND h.concurrency_key IS NOT NULL
                AND h.status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running'))"
        )
    };
}

/// The status of a job inserted into queue `$queue` with run_at `$run_at`,
/// concurrency key `$key`, as the `$due_seat`-th due job of its key in its
/// batch and the `$seat`-th of any, with `$room` (SQL expressions): as
/// `status_for_run_at!` when it has no key or its queue no key limit;
/// else admitted at once (`pending`, or `scheduled` while its run_at is
/// ahead) when its key has room: `$room` is what the enqueue found with
/// the key's admission lock held and no job of the key waiting (null
/// otherwise, see `KEY_ROOM_FOR_INSERT` in `keys.rs`):
/// in a queue kept in order, the first of the batch within it; in another,
/// due and within it with the due jobs ahead of it in the batch. Otherwise
/// `waiting`, for an admission pass. The statement reads no other job:
/// what it decides by was counted before, in a statement planned for the
/// table as it is.
macro_rules! status_at_insert {
    ($run_at:literal, $queue:literal, $key:literal, $room:literal, $due_seat:literal,
     $seat:literal) => {
        concat!(
            "CASE WHEN ",
            $key,
            " IS NULL OR NOT EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = ",
            $queue,
            " AND kq.key_limit IS NOT NULL)
                  THEN (CASE WHEN ",
            $run_at,
            " <= now() THEN 'pending' ELSE 'scheduled' END)
              WHEN ",
            $room,
            " IS NOT NULL
                   AND (SELECT CASE WHEN kq.key_ordered THEN ",
            $seat,
            " <= ",
            $room,
            "
                                    ELSE ",
            $run_at,
            " <= now() AND ",
            $due_seat,
            " <= ",
            $room,
            " END
                        FROM jobqueue_queues AS kq WHERE kq.name = ",
            $queue,
            ")
                  THEN (CASE WHEN ",
            $run_at,
            " <= now() THEN 'pending' ELSE 'scheduled' END)
              ELSE 'waiting' END"
        )
    };
}

/// The status of a job inserted into queue `$queue` with run_at `$run_at`
/// and concurrency key `$key` (SQL expressions): `waiting` if it has a key
/// and its queue a key limit (admitted when its key has room, see
/// `keys.rs`), else as `status_for_run_at!`.
macro_rules! status_for_keyed {
    ($run_at:literal, $queue:literal, $key:literal) => {
        concat!(
            "CASE WHEN ",
            $key,
            " IS NOT NULL AND EXISTS (SELECT 1 FROM jobqueue_queues AS kq WHERE kq.name = ",
            $queue,
            " AND kq.key_limit IS NOT NULL) THEN 'waiting' WHEN ",
            $run_at,
            " <= now() THEN 'pending' ELSE 'scheduled' END"
        )
    };
}

/// CTE `wake`: wakes the queues of the jobs of CTE `$cte` (`queue`,
/// `status`) on channel `$channel`, once per queue: a queue that got due
/// jobs as `queue`, one that got jobs waiting for their key's room as
/// `waiting queue` (the runners' admission); jobs that are neither due nor
/// waiting wake nobody.
macro_rules! wake_queues_of {
    ($cte:literal, $channel:literal) => {
        concat!(
            "wake AS (
        SELECT count(pg_notify(",
            $channel,
            ", q.queue)) AS notified
        FROM (SELECT DISTINCT CASE WHEN status = 'waiting' THEN 'waiting ' || queue
                                   ELSE queue END AS queue
              FROM ",
            $cte,
            " WHERE status IN ('pending', 'waiting')) AS q
    )"
        )
    };
}

/// The release of the children of the workflow steps in CTE `ended`
/// (`job_id`, and what `$settles` reads of it): each unsettled edge out of
/// them for which `$settles` holds (an SQL condition on the edge `e` and
/// `ended`) is settled once, its child's count of parents left goes down,
/// and a child left with none becomes due (`pending`, `scheduled` while
/// its run_at is ahead, `waiting` behind its concurrency key). Its queue is
/// woken on channel `$channel`. CTEs `settled`, `counts`, `counted_down`,
/// `released` and `wake`.
///
/// A child is released by the one statement that takes its count to zero.
/// A child that is failed or cancelled as this statement's snapshot sees
/// it is looked at again on its newest row: a retry of it that committed
/// while this statement waited for the step's lock (the retry holds it
/// while it decides, see `requeue_where!` in `jobs/operate.rs`) made it `blocked`
/// by a count this statement then took to zero, and it is released here;
/// one still failed or cancelled is rewritten as it is (a rare write: a
/// child that ended before its last parent completed).
///
/// Concurrent releases of one child wait on its step's row lock, and each
/// counts down from what the last one left. The children are counted down
/// as the batch writes on jobs are, by `job_id = ANY(<their ids, sorted>)`
/// (one scan of the steps' primary key, in id order, so two completions
/// that share children lock them in the same order)
/// with each one's count found by `width_bucket`: no join whose cost
/// follows the table, under the hot path's planner settings.
macro_rules! release_children {
    ($settles:literal, $channel:literal) => {
        concat!(
            "
    settled AS (
        UPDATE jobqueue_workflow_edges AS e
        SET settled = true
        FROM ended
        WHERE e.parent_id = ended.job_id AND NOT e.settled AND (",
            $settles,
            ")
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
        SET status = CASE WHEN j.status = 'blocked' THEN ",
            status_for_keyed!("j.run_at", "j.queue", "j.concurrency_key"),
            " ELSE j.status END
        FROM counted_down AS c
        WHERE j.id = c.job_id AND c.parents_left = 0
          AND j.status IN ('blocked', 'failed', 'cancelled')
        RETURNING j.id, j.queue, j.status
    ),
    ",
            wake_queues_of!("released", $channel)
        )
    };
}

mod completions;
mod doctor;
#[cfg(test)]
mod expanded;
mod jobs;
mod keys;
mod migrations;
mod queues;
mod results;
mod runners;
mod schedules;
mod session;
mod workflows;

pub(crate) use completions::*;
pub(crate) use doctor::*;
pub(crate) use jobs::*;
pub(crate) use keys::*;
pub(crate) use migrations::*;
pub(crate) use queues::*;
pub(crate) use results::*;
pub(crate) use runners::*;
pub(crate) use schedules::*;
pub(crate) use session::*;
pub(crate) use workflows::*;
