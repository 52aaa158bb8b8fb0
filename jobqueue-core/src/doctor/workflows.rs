//! Workflows: steps that wait for a retry of a failed step (on purpose,
//! but someone has to retry it), and steps no runner can release any more.

use diesel::prelude::*;
use diesel::sql_types::BigInt;

use super::{Check, CheckStatus, DoctorOptions, read};
use crate::{Result, sql};

/// The name of the `workflows` check.
pub(super) const WORKFLOWS: &str = "workflows";

#[derive(QueryableByName)]
struct Stuck {
    #[diesel(sql_type = BigInt)]
    waiting_on_retry: i64,
    #[diesel(sql_type = BigInt)]
    unsettled: i64,
    #[diesel(sql_type = BigInt)]
    orphaned: i64,
    #[diesel(sql_type = BigInt)]
    stranded: i64,
}

/// `workflows`: fails when a blocked step has no parent left to settle
/// (nothing will release it), when steps ended (failed for good or
/// cancelled) a minute ago and more and no runner settled them, or when a
/// step not ended has lost its job's row (deleted outside the queue): the
/// steps after them wait for good. Warns when steps wait for a retry of a failed
/// step (`on_failure = wait`).
pub(super) fn workflows(conn: &mut PgConnection, _: &DoctorOptions) -> Result<Check> {
    let stuck = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_WORKFLOWS).get_result::<Stuck>(conn)?)
    })?;
    if stuck.stranded > 0 {
        return Ok(Check::graded(
            WORKFLOWS,
            CheckStatus::Fail,
            format!(
                "{} workflow steps are blocked with no parent left to settle: nothing will \
                 release them",
                stuck.stranded
            ),
            "cancel and retry each (`jobqueue cancel ID`, then `jobqueue retry ID`): the retry \
             finds no parent left and makes it due; list them with `jobqueue list --status \
             blocked`",
        ));
    }
    if stuck.unsettled > 0 || stuck.orphaned > 0 {
        return Ok(Check::graded(
            WORKFLOWS,
            CheckStatus::Fail,
            format!(
                "{} workflow steps ended over a minute ago and are not settled; {} steps not \
                 ended have no job row",
                stuck.unsettled, stuck.orphaned
            ),
            "unsettled ends: start a runner (each settles them every rescue interval); steps \
             without a job row were deleted outside jobqueue: cancel the steps after them \
             (`jobqueue workflow show ID` lists them, `jobqueue cancel ID`)",
        ));
    }
    if stuck.waiting_on_retry > 0 {
        return Ok(Check::graded(
            WORKFLOWS,
            CheckStatus::Warn,
            format!(
                "{} workflow steps wait for a retry of a step that failed or was cancelled (on \
                 failure: wait, or they were retried before it)",
                stuck.waiting_on_retry
            ),
            "retry the step they wait for (`jobqueue retry ID`, the dashboard's Retry; \
             `jobqueue workflow show ID` names it) to run them, or cancel them",
        ));
    }
    Ok(Check::ok(
        WORKFLOWS,
        "every ended step is settled; none waits for a retry",
    ))
}
