//! Writing one inline attempt's outcome on the caller's connection, with
//! the engine's calls, as a runner's completer writes a batch of them: the
//! handler's unwritten progress first (for an outcome that keeps the row),
//! then the completion, failure, snooze, cancellation or set-aside.

use diesel::PgConnection;
use jobqueue_core::engine::{self, Failure, Snooze};
use jobqueue_core::{JobRow, Result, Retention};
use jobqueue_runner::inline::{Attempt, Outcome};

/// The worker id drained jobs are claimed (and set aside) under.
pub(crate) const WORKER_ID: &str = "jobqueue-testing";

/// What decides how an outcome is written: a runner's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writing {
    pub(crate) retention: Retention,
    pub(crate) max_snoozes: i32,
}

/// Writes `attempt`'s outcome for `row`, held under its lease.
pub(crate) fn outcome(
    conn: &mut PgConnection,
    row: &JobRow,
    attempt: &Attempt,
    writing: Writing,
) -> Result<()> {
    let lease = &row.lease();
    let deletes = writing.retention.deletes_completed();
    let keeps_row = match attempt.outcome {
        Outcome::Completed => !deletes,
        Outcome::Retried { .. }
        | Outcome::Failed { .. }
        | Outcome::Snoozed(_)
        | Outcome::RateLimited(_)
        | Outcome::Cancelled => true,
        _ => false,
    };
    if keeps_row && let Some(progress) = &attempt.unwritten {
        engine::report_progress(conn, lease, progress)?;
    }
    let written = match &attempt.outcome {
        Outcome::Completed => {
            let done = engine::StepDone {
                lease: *lease,
                result: attempt.result.clone(),
            };
            if row.workflow_id.is_none() && done.result.is_some() {
                // Kept for its enqueuer, as a runner keeps it.
                engine::complete_with_result(conn, &done, deletes, writing.retention.results)
            } else {
                engine::complete_step(conn, &done, deletes)
            }
        }
        Outcome::Retried { error, policy } => {
            engine::fail(conn, &Failure::retry(*lease, error.clone(), policy)).map(drop)
        }
        Outcome::Failed { error } => {
            engine::fail(conn, &Failure::permanent(*lease, error.clone())).map(drop)
        }
        Outcome::Snoozed(delay) | Outcome::RateLimited(delay) => {
            let snooze = Snooze {
                lease: *lease,
                delay: *delay,
                queue_backoff: matches!(attempt.outcome, Outcome::RateLimited(_)),
            };
            engine::snooze_many(conn, &[snooze], writing.max_snoozes).map(drop)
        }
        Outcome::Cancelled => engine::cancel_held_many(conn, &[*lease]).map(drop),
        Outcome::Unhandled => engine::park_many(conn, &[*lease], WORKER_ID).map(drop),
        // Completed by the handler itself, or no longer held: nothing to write.
        _ => Ok(()),
    };
    written?;
    if !keeps_row || matches!(attempt.outcome, Outcome::Completed) {
        return Ok(());
    }
    // A step of a workflow that failed for good or was cancelled: the
    // steps after it go as its workflow says, as a runner's completer has
    // them go.
    engine::settle_ended_of(conn, &[lease.job_id]).map(drop)
}
