//! Durable execution inside one job, the handler's side: steps whose
//! outputs are recorded once and replayed by later attempts, and the
//! cursor of a loop over a large input. Each record is written on the
//! handler's connection in the transaction of the work it covers, fenced by
//! the attempt's lease (`jobqueue_core::engine::record_step`,
//! `record_cursor`).

use std::sync::atomic::Ordering;

use diesel::PgConnection;
use jobqueue_core::engine::Lease;

use crate::context::{JobContext, in_read_committed};
use crate::job_error::JobError;

impl JobContext<'_> {
    /// Runs `work` as the job's next durable step, named `name`, once: its
    /// output is recorded on the job's row in the transaction of `work`'s
    /// own writes (READ COMMITTED, on [`conn`](Self::conn)), so the two
    /// commit together or not at all. A later attempt (a retry, a rescue
    /// after a crash, a runner stopped mid-job) that comes to the same
    /// step gets the recorded output back without running `work` again:
    /// the steps a handler finished are never redone, and what each wrote
    /// through the connection it was given happened exactly once.
    ///
    /// Steps are matched by their order: the step an attempt comes to
    /// first is step 1, and so on. One whose name differs from the name
    /// recorded at its place (the handler changed between deploys) fails
    /// the job for good, naming both, rather than hand a step's output to
    /// another (retrying it replays the recorded steps again). An output
    /// must serialize as JSON of at most 64 KiB
    /// ([`MAX_STEP_OUTPUT_BYTES`](jobqueue_core::engine::MAX_STEP_OUTPUT_BYTES)),
    /// and a job records at most 1,000 steps: both fail the job for good.
    /// [`JobError::LeaseLost`] if the runner no longer holds the job (the
    /// step's writes roll back). A job worked inline without a stored row
    /// (the testing kit's `perform`) runs each step and records nothing.
    pub fn step<T>(
        &mut self,
        name: &str,
        work: impl FnOnce(&mut PgConnection) -> Result<T, JobError>,
    ) -> Result<T, JobError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        let index = self.steps_taken;
        self.steps_taken += 1;
        if let Some(recorded) = jobqueue_core::engine::recorded_step(self.row(), index) {
            if recorded.name != name {
                return Err(JobError::fail(format!(
                    "durable step {} is `{name}` in this attempt but was recorded as `{}`: the \
                     handler's steps changed since it was recorded; the job fails rather than \
                     hand one step's output to another (run it with the handler that recorded \
                     its steps to finish it, or cancel it; a retry replays the same record)",
                    index + 1,
                    recorded.name
                )));
            }
            return serde_json::from_value(recorded.output).map_err(|e| {
                JobError::fail(format!(
                    "durable step `{name}`: its recorded output does not decode as this \
                     attempt's type: {e}"
                ))
            });
        }
        self.recorded_with(work, |conn, lease, value| {
            let output = serde_json::to_string(value).map_err(|e| {
                JobError::fail(format!(
                    "durable step `{name}`: its output does not serialize: {e}"
                ))
            })?;
            written(jobqueue_core::engine::record_step(
                conn, lease, index, name, &output,
            ))
        })
    }

    /// The job's durable cursor: where its loop had got to when it last
    /// advanced it ([`advance`](Self::advance)), in this attempt or an
    /// earlier one; `None` if it never did. A handler that loops over a
    /// large input starts from here, so a retry, a rescue after a crash or
    /// a runner stopped mid-job goes on where the last attempt left off
    /// rather than from the beginning.
    ///
    /// A cursor that does not decode as `C` (the handler's cursor type
    /// changed between deploys) fails the job for good, naming the error.
    pub fn cursor<C>(&self) -> Result<Option<C>, JobError>
    where
        C: serde::de::DeserializeOwned,
    {
        let Some(cursor) = &self.cursor else {
            return Ok(None);
        };
        C::deserialize(cursor).map(Some).map_err(|e| {
            JobError::fail(format!(
                "the job's durable cursor {cursor} does not decode as this attempt's cursor \
                 type: {e} (run it with the handler that advanced it, or cancel it)"
            ))
        })
    }

    /// Records `cursor` as where the job's loop has got to, in a
    /// transaction of its own. For work whose effect must happen exactly
    /// once, use [`advance_with`](Self::advance_with), which commits the
    /// work and the cursor together.
    pub fn advance<C>(&mut self, cursor: &C) -> Result<(), JobError>
    where
        C: serde::Serialize,
    {
        self.advance_with(cursor, |_| Ok(()))
    }

    /// Runs `work` on [`conn`](Self::conn) and records `cursor` in the same
    /// READ COMMITTED transaction, so that the work's writes and the
    /// cursor that says they were done commit together or not at all: a
    /// later attempt that resumes from [`cursor`](Self::cursor) never
    /// redoes what it covers, nor skips what it did not.
    ///
    /// A cursor must serialize as JSON of at most 8 KiB
    /// ([`MAX_CURSOR_BYTES`](jobqueue_core::engine::MAX_CURSOR_BYTES)), else
    /// the job fails for good: it says where the loop is, not what it
    /// found. [`JobError::LeaseLost`] if the runner no longer holds the job
    /// (the work's writes roll back). A job worked inline without a stored
    /// row (the testing kit's `perform`) keeps the cursor for the attempt
    /// and records nothing.
    pub fn advance_with<C, T>(
        &mut self,
        cursor: &C,
        work: impl FnOnce(&mut PgConnection) -> Result<T, JobError>,
    ) -> Result<T, JobError>
    where
        C: serde::Serialize,
    {
        let value = serde_json::to_value(cursor)
            .map_err(|e| JobError::fail(format!("the durable cursor does not serialize: {e}")))?;
        let text = value.to_string();
        let result = self.recorded_with(work, |conn, lease, _| {
            written(jobqueue_core::engine::record_cursor(conn, lease, &text))
        });
        if result.is_ok() {
            self.cursor = Some(value);
        }
        result
    }

    /// Runs `work` and then `record` (when the job's row is stored) in one
    /// READ COMMITTED transaction on the handler's connection; a lost
    /// lease is noted for the runner.
    fn recorded_with<T>(
        &mut self,
        work: impl FnOnce(&mut PgConnection) -> Result<T, JobError>,
        record: impl FnOnce(&mut PgConnection, &Lease, &T) -> Result<(), JobError>,
    ) -> Result<T, JobError> {
        let state = self.job_state();
        let lease = state.lease;
        let stored = self.records_durably();
        let conn = self.conn()?;
        let result = in_read_committed(conn, |conn| {
            let value = work(conn)?;
            if stored {
                record(conn, &lease, &value)?;
            }
            Ok(value)
        });
        if matches!(result, Err(JobError::LeaseLost)) {
            state.lost.store(true, Ordering::Relaxed);
        }
        result
    }
}

/// A record's write, as the handler's outcome: a lost lease as
/// [`JobError::LeaseLost`], a refused value for good, anything else
/// retried.
fn written(result: jobqueue_core::Result<()>) -> Result<(), JobError> {
    match result {
        Ok(()) => Ok(()),
        Err(jobqueue_core::Error::LeaseLost { .. }) => Err(JobError::LeaseLost),
        Err(e @ jobqueue_core::Error::InvalidOption { .. }) => Err(JobError::fail(e)),
        Err(e) => Err(JobError::retry(e)),
    }
}
