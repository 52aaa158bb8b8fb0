//! The statements of `jobqueue_jobs`: every job, from its insert to its
//! pruning.
//!
//! "Due" jobs are `pending`; jobs whose `run_at` is still ahead are
//! `scheduled` until [`JOB_PROMOTE_DUE`] moves them. "Held" means
//! `status IN ('claimed', 'running')`. A write that acts for a
//! worker (complete, fail, heartbeat, progress) names the job AND the fencing
//! token it got from the claim (`claim_count`), and only touches the row while
//! it is still held under that token.
//!
//! A statement on a batch of jobs reads the table by `id = ANY(<ids>)`,
//! one scan of the primary key, and joins the batch's other values to
//! nothing: they come in arrays parallel to the ids, sorted by id, and each
//! row finds its own by binary search (`width_bucket(j.id, ids)`); a CTE
//! that computes per-job values hands them on the same way
//! (`update_by_id!`). A join of the table with the batch would leave
//! the plan to the statistics and the plan cache: with statistics that
//! call the table empty it walked the whole primary key per statement, and
//! with the id list also matched by `ANY`, a generic plan compared every
//! row with every id (a million comparisons for a batch of 1,000).
//! `tests/it/plans.rs` checks both, with custom and generic plans.
//!
//! What the statements rely on (see the migrations):
//!
//! - the primary key `id` (a UUIDv7, so id order is insert order): the
//!   batch writes on held jobs, a job read by id, the pages of jobs newest
//!   first;
//! - `claim_count`, the fencing token a claim bumps, and `lease_expires_at`,
//!   set exactly while a job is held (constraint `lease_only_while_held`);
//! - `jobqueue_jobs_fetch_idx` (`queue, priority DESC, run_at, id` of the
//!   `pending` jobs): both claims (one ordered range per queue, and the
//!   skip from queue to queue of [`JOB_CLAIM_ANY`]), a queue's head, the
//!   counts of due jobs;
//! - `jobqueue_jobs_scheduled_idx` (`run_at` of the `scheduled` jobs): the
//!   promotion of due jobs;
//! - `jobqueue_jobs_unhandled_idx` (`job_type, queue` of the `unhandled`
//!   jobs): taking parked jobs back;
//! - `jobqueue_jobs_lease_idx` (`queue, lease_expires_at` of the held
//!   jobs): the rescue of expired leases, the counts of held jobs;
//! - `jobqueue_jobs_finished_idx` (`finished_at` of the finished jobs):
//!   pruning, and the pages and throughput of finished jobs;
//! - `jobqueue_jobs_failed_idx` (`finished_at, queue` of the `failed`
//!   jobs): the counts of the dead letter;
//! - `jobqueue_jobs_unique_key_idx` (the unique `unique_key` of the live
//!   jobs, predicate `live_predicate!`): the inserts' `ON CONFLICT`, the
//!   holders of a key, a job list filtered by key.
//!
//! Other tables some of them touch: the claims read `jobqueue_queues`
//! (`paused`, `global_limit`), both completions add to
//! `jobqueue_completions` (`count_completed!`), and [`JOB_THROUGHPUT`]
//! reads it. The statements of other tables that insert jobs (a schedule's
//! slots) are in `schedules.rs`.

/// The live statuses covered by the unique-key index.
macro_rules! live_predicate {
    () => {
        "unique_key IS NOT NULL \
         AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running')"
    };
}

/// Appends one entry to the bounded error history of row `j`.
/// `$err` is the SQL expression giving the error text.
macro_rules! push_error {
    ($err:literal) => {
        concat!(
            "(CASE WHEN jsonb_array_length(j.errors) >= 10 THEN j.errors - 0 ELSE j.errors END) \
             || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', ",
            $err,
            "))"
        )
    };
}

/// The columns of row `j` set aside as `unhandled` by runner `$runner`
/// (an SQL expression): no runner it reached has a handler for its type.
/// A job whose cancellation was asked for is cancelled instead.
macro_rules! set_aside {
    ($runner:literal) => {
        concat!(
            "status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; \
                                 set aside until a runner that handles it starts', j.job_type, ",
            $runner,
            ", j.queue)"
        )
    };
}

/// The rows of a CTE `next` (each job's `id`, `next_status` and the
/// columns named in `$col`s) as arrays in id order: CTE `by_id`, unclosed
/// (`update_by_id!` closes it).
macro_rules! by_id {
    ($($col:literal),*) => {
        concat!(
            "by_id AS (
        SELECT array_agg(id ORDER BY id) AS ids,
               array_agg(next_status ORDER BY id) AS next_status",
            $(",
               array_agg(", $col, " ORDER BY id) AS ", $col,)*
            "
        FROM next
    )"
        )
    };
}

/// The `UPDATE` of the jobs of CTE `by_id` that sets each one's status to
/// its `next_status`, and reads its other values the same way:
/// `by_id.<column>[width_bucket(j.id, by_id.ids)]`.
macro_rules! update_from_by_id {
    () => {
        "
    UPDATE jobqueue_jobs AS j
    SET status = by_id.next_status[width_bucket(j.id, by_id.ids)],"
    };
}

/// CTE `by_id` of the `$col`s (`by_id!`), then the `UPDATE` of its jobs
/// (`update_from_by_id!`).
macro_rules! update_by_id {
    ($($col:literal),*) => {
        concat!(by_id!($($col),*), update_from_by_id!())
    };
}

/// `update_by_id!`, the `UPDATE` made CTE `$cte` of the statement (closed
/// by the caller's `RETURNING ... )`), for a statement that goes on from
/// the rows it changed.
macro_rules! update_by_id_as {
    ($cte:literal; $($col:literal),*) => {
        concat!(by_id!($($col),*), ",
    ", $cte, " AS (", update_from_by_id!())
    };
}

/// CTE `told`: the waiters (`jobqueue::wait_result`) of the jobs of CTE
/// `$cte` (columns `id`, `status`) that ended failed or cancelled are told
/// on channel `jobqueue_results` with each one's id. A statement selects
/// from it (`LEFT JOIN told ON true`) so that it runs.
macro_rules! tell_ended {
    ($cte:literal) => {
        concat!(
            "
    told AS (
        SELECT count(pg_notify('jobqueue_results', e.id::text)) AS n
        FROM ",
            $cte,
            " AS e WHERE e.status IN ('failed', 'cancelled')
    )"
        )
    };
}

/// The end of an `update_by_id!` of jobs no runner holds any more, whose
/// `by_id` has each one's `error`: no lease; the error recorded as the
/// last, and in the history.
macro_rules! error_by_id {
    () => {
        concat!(
            "
        lease_expires_at = NULL,
        last_error = by_id.error[width_bucket(j.id, by_id.ids)],
        errors = ",
            push_error!("by_id.error[width_bucket(j.id, by_id.ids)]"),
            "
    FROM by_id
    WHERE j.id = ANY(by_id.ids)"
        )
    };
}

// The statements, by what they do. The fragments above are shared by
// several of these files; each file's own are in it.
mod browse;
mod claim;
mod finish;
mod insert;
mod maintain;
mod operate;

pub(crate) use browse::*;
pub(crate) use claim::*;
pub(crate) use finish::*;
pub(crate) use insert::*;
pub(crate) use maintain::*;
pub(crate) use operate::*;

// The hot-path statements, run prepared (see `prepared.rs`).
crate::prepared::statements! {
    JobInsert => JOB_INSERT,
    JobInsertQuiet => JOB_INSERT_QUIET,
    JobInsertMany => JOB_INSERT_MANY,
    JobLiveHolders => JOB_LIVE_HOLDERS,
    JobClaimQueues => JOB_CLAIM_QUEUES,
    JobClaimAny => JOB_CLAIM_ANY,
    JobClaimQueuesLimited => JOB_CLAIM_QUEUES_LIMITED,
    JobClaimAnyLimited => JOB_CLAIM_ANY_LIMITED,
    JobStartMany => JOB_START_MANY,
    JobCompleteMany => JOB_COMPLETE_MANY,
    JobCompleteDeleteMany => JOB_COMPLETE_DELETE_MANY,
    JobCompleteStepsMany => JOB_COMPLETE_STEPS_MANY,
    JobCompleteDeleteStepsMany => JOB_COMPLETE_DELETE_STEPS_MANY,
    JobCompleteResultsMany => JOB_COMPLETE_RESULTS_MANY,
    JobCompleteDeleteResultsMany => JOB_COMPLETE_DELETE_RESULTS_MANY,
    JobFailMany => JOB_FAIL_MANY,
    JobReleaseMany => JOB_RELEASE_MANY,
    JobParkMany => JOB_PARK_MANY,
    JobSnoozeMany => JOB_SNOOZE_MANY,
    JobCancelHeldMany => JOB_CANCEL_HELD_MANY,
    JobHeartbeatMany => JOB_HEARTBEAT_MANY,
}
