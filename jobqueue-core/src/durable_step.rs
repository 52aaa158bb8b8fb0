//! Durable steps inside one job: the output of each step a handler
//! finished is recorded on the job's row (`step_outputs`), in the
//! transaction of the step's own writes, fenced by the lease, so that a
//! retry, a rescue after a crash or a restart replays finished steps
//! instead of running them again; and the cursor of a handler's loop over
//! a large input (`step_cursor`), replaced at each advance in the
//! transaction of the work it covers. The runner's `JobContext::step` and
//! `JobContext::advance` are the handler's side; this is the row's.

use diesel::prelude::*;
use diesel::sql_types::{Integer, Text, Uuid};

use crate::lease::Lease;
use crate::{Error, JobRow, Result, sql};

/// Largest output of one step, in bytes of JSON.
pub const MAX_STEP_OUTPUT_BYTES: usize = 64 * 1024;

/// Largest durable cursor, in bytes of JSON.
pub const MAX_CURSOR_BYTES: usize = 8 * 1024;

/// Most steps one job records.
pub const MAX_STEPS: usize = 1000;

/// A step a handler finished in an earlier attempt.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordedStep {
    /// The name it was run under.
    pub name: String,
    /// Its output.
    pub output: serde_json::Value,
}

/// Step number `index` (from 0) as `row` recorded it, if it did.
pub fn recorded_step(row: &JobRow, index: usize) -> Option<RecordedStep> {
    let step = row.step_outputs.as_ref()?.get(index)?;
    Some(RecordedStep {
        name: step.get("name")?.as_str()?.to_owned(),
        output: step
            .get("output")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
    })
}

/// Records `output` (JSON text) as step number `index` (from 0), named
/// `name`, of the job `lease` holds, on `conn` (inside the transaction of
/// the step's own writes, so that both commit or neither).
///
/// [`Error::LeaseLost`] if the job is no longer held under the lease, or
/// its recorded steps are not `index` (the step was recorded already);
/// [`Error::InvalidOption`] for an output over [`MAX_STEP_OUTPUT_BYTES`]
/// or a step past [`MAX_STEPS`].
pub fn record_step(
    conn: &mut PgConnection,
    lease: &Lease,
    index: usize,
    name: &str,
    output: &str,
) -> Result<()> {
    if output.len() > MAX_STEP_OUTPUT_BYTES {
        return Err(Error::invalid(
            "step output",
            format!(
                "step `{name}` returned {} bytes of JSON; a step's output holds at most \
                 {MAX_STEP_OUTPUT_BYTES}: store large outputs elsewhere and return where they are",
                output.len()
            ),
        ));
    }
    if index >= MAX_STEPS {
        return Err(Error::invalid(
            "step",
            format!(
                "step `{name}` would be step {} of the job; a job records at most {MAX_STEPS}: \
                 loop inside a step over a batch of items instead",
                index + 1
            ),
        ));
    }
    crate::limits::check_storable("step output", output)?;
    let recorded = diesel::sql_query(sql::JOB_RECORD_STEP)
        .bind::<Uuid, _>(lease.job_id)
        .bind::<Integer, _>(lease.token)
        .bind::<Integer, _>(index as i32)
        .bind::<Text, _>(name)
        .bind::<Text, _>(output)
        .execute(conn)?;
    changed_under(lease, recorded)
}

/// Sets the durable cursor of the job `lease` holds to `cursor` (JSON
/// text), on `conn` (inside the transaction of the work the cursor
/// covers, so that both commit or neither).
///
/// [`Error::LeaseLost`] if the job is no longer held under the lease;
/// [`Error::InvalidOption`] for a cursor over [`MAX_CURSOR_BYTES`].
pub fn record_cursor(conn: &mut PgConnection, lease: &Lease, cursor: &str) -> Result<()> {
    if cursor.len() > MAX_CURSOR_BYTES {
        return Err(Error::invalid(
            "cursor",
            format!(
                "the cursor is {} bytes of JSON; a cursor holds at most {MAX_CURSOR_BYTES}: \
                 keep it to where the loop has got to (an offset, the last key), not what it found",
                cursor.len()
            ),
        ));
    }
    crate::limits::check_storable("cursor", cursor)?;
    let recorded = diesel::sql_query(sql::JOB_ADVANCE_CURSOR)
        .bind::<Uuid, _>(lease.job_id)
        .bind::<Integer, _>(lease.token)
        .bind::<Text, _>(cursor)
        .execute(conn)?;
    changed_under(lease, recorded)
}

/// `Ok` if the fenced statement changed the held row, else the lease is
/// lost.
fn changed_under(lease: &Lease, changed: usize) -> Result<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(Error::LeaseLost {
            job_id: lease.job_id,
            token: lease.token,
        })
    }
}
