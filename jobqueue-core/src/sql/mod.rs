//! Every SQL statement the queue runs, one file per table.
//!
//! Statements are named Noun+Verb (`JOB_CLAIM_QUEUES`, `JOB_COMPLETE_MANY`) so
//! they sort by table. Every value is a bound parameter; nothing is ever
//! interpolated into these strings. Time always comes from the database's
//! `now()`, never from the caller's clock.
//!
//! - `jobs.rs`: `jobqueue_jobs`, the jobs themselves (`JOB_*`), and the
//!   prepared hot-path statements' marker types (`sql::JobInsert`, ...).
//! - `queues.rs`: `jobqueue_queues`, each queue's pause and global limit
//!   (`QUEUE_*`).
//! - `keys.rs`: the admission of keyed jobs under their queue's key limit
//!   (`KEY_*`).
//! - `schedules.rs`: `jobqueue_schedules`, the periodic jobs (`SCHEDULE_*`).
//! - `runners.rs`: `jobqueue_runners`, the registry of running runners
//!   (`RUNNER_*`).
//! - `completions.rs`: `jobqueue_completions`, the per-minute counts of
//!   completed jobs (`COMPLETIONS_*`).
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

mod completions;
mod doctor;
mod jobs;
mod keys;
mod queues;
mod runners;
mod schedules;
mod session;

pub(crate) use completions::*;
pub(crate) use doctor::*;
pub(crate) use jobs::*;
pub(crate) use keys::*;
pub(crate) use queues::*;
pub(crate) use runners::*;
pub(crate) use schedules::*;
pub(crate) use session::*;
