//! Reading workflows: the newest ones with their steps counted by state,
//! and one workflow's steps, each one's state, parents and result.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Integer, Nullable, Text, Timestamptz, Uuid};

use crate::{JobId, JobStatus, Result, limits, sql};

/// A workflow as [`list_workflows`] reads it: its steps counted by state.
#[derive(Debug, Clone, PartialEq, QueryableByName)]
#[non_exhaustive]
pub struct WorkflowSummary {
    /// Its id.
    #[diesel(sql_type = Uuid)]
    pub id: JobId,
    /// Its name.
    #[diesel(sql_type = Text)]
    pub name: String,
    /// What a failed step does to the steps after it (`cancel`, `run`,
    /// `wait`).
    #[diesel(sql_type = Text)]
    pub on_failure: String,
    /// When it was enqueued.
    #[diesel(sql_type = Timestamptz)]
    pub created_at: DateTime<Utc>,
    /// Its steps.
    #[diesel(sql_type = BigInt)]
    pub steps: i64,
    /// Steps not ended yet.
    #[diesel(sql_type = BigInt)]
    pub live: i64,
    /// Steps completed.
    #[diesel(sql_type = BigInt)]
    pub completed: i64,
    /// Steps failed for good.
    #[diesel(sql_type = BigInt)]
    pub failed: i64,
    /// Steps cancelled.
    #[diesel(sql_type = BigInt)]
    pub cancelled: i64,
    /// When its last step ended, if one did.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub last_ended_at: Option<DateTime<Utc>>,
}

impl WorkflowSummary {
    /// `running` while a step has not ended; once all have: `failed` if
    /// one failed, else `cancelled` if one was cancelled, else `completed`.
    pub fn state(&self) -> &'static str {
        if self.live > 0 {
            "running"
        } else if self.failed > 0 {
            "failed"
        } else if self.cancelled > 0 {
            "cancelled"
        } else {
            "completed"
        }
    }
}

/// Up to `limit` workflows (1 to 100,000), newest first; only those with
/// a step not ended yet if `unfinished`. Finished workflows are kept for
/// `Retention::workflows` (7 days by default).
pub fn list_workflows(
    conn: &mut PgConnection,
    limit: i64,
    unfinished: bool,
) -> Result<Vec<WorkflowSummary>> {
    limits::check_batch(limit)?;
    crate::isolation::report(conn, |conn| {
        Ok(diesel::sql_query(sql::WORKFLOW_LIST)
            .bind::<BigInt, _>(limit)
            .bind::<Bool, _>(unfinished)
            .load::<WorkflowSummary>(conn)?)
    })
}

/// A workflow as [`get_workflow`] reads it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkflowInfo {
    /// Its id.
    pub id: JobId,
    /// Its name.
    pub name: String,
    /// What a failed step does to the steps after it (`cancel`, `run`,
    /// `wait`).
    pub on_failure: String,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// Its steps, in the order they were added.
    pub steps: Vec<StepInfo>,
}

impl WorkflowInfo {
    /// Whether every step ended (completed, failed or cancelled).
    pub fn is_finished(&self) -> bool {
        self.steps.iter().all(|step| step.state != "live")
    }
}

/// One step of a [`WorkflowInfo`].
#[derive(Debug, Clone, PartialEq, QueryableByName)]
#[non_exhaustive]
pub struct StepInfo {
    /// Its job's id.
    #[diesel(sql_type = Uuid)]
    pub job_id: JobId,
    /// Its name in the workflow.
    #[diesel(sql_type = Text)]
    pub name: String,
    /// Its job's type.
    #[diesel(sql_type = Text)]
    pub job_type: String,
    /// `live` until its job ends, then `completed`, `failed` or
    /// `cancelled`.
    #[diesel(sql_type = Text)]
    pub state: String,
    /// Its job's status while the row exists (a completed job's row is
    /// deleted unless completed jobs are kept).
    #[diesel(sql_type = Nullable<Text>)]
    pub job_status: Option<JobStatus>,
    /// Parents whose edges have not settled yet.
    #[diesel(sql_type = Integer)]
    pub parents_left: i32,
    /// The names of the steps it comes after.
    #[diesel(sql_type = Array<Text>)]
    pub parents: Vec<String>,
    /// The result its handler recorded (JSON text), if any.
    #[diesel(sql_type = Nullable<Text>)]
    pub result: Option<String>,
    /// When it ended.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub ended_at: Option<DateTime<Utc>>,
}

#[derive(QueryableByName)]
struct WorkflowRow {
    #[diesel(sql_type = Uuid)]
    id: JobId,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    on_failure: String,
    #[diesel(sql_type = Timestamptz)]
    created_at: DateTime<Utc>,
}

#[derive(QueryableByName)]
struct WorkflowId {
    #[diesel(sql_type = Uuid)]
    id: JobId,
}

/// A workflow looked up by id ([`get_workflow`]), as [`crate::JobLookup`]
/// is a job: found, or why not, as far as the id tells.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkflowLookup {
    /// The workflow and its steps.
    Found(WorkflowInfo),
    /// No workflow has this id, nor a step of one; what the id says about
    /// why (a workflow is pruned with its steps once they all finished,
    /// after the retention of workflows).
    NotFound(crate::MissingJob),
}

impl WorkflowLookup {
    /// The workflow, if found.
    pub fn found(self) -> Option<WorkflowInfo> {
        match self {
            WorkflowLookup::Found(flow) => Some(flow),
            WorkflowLookup::NotFound(_) => None,
        }
    }

    /// The workflow, or why there is none as an error.
    pub fn into_result(self) -> std::result::Result<WorkflowInfo, crate::MissingJob> {
        match self {
            WorkflowLookup::Found(flow) => Ok(flow),
            WorkflowLookup::NotFound(missing) => Err(missing),
        }
    }
}

/// The workflow with id `id`, or the one whose step has job id `id`; if
/// neither exists, why not, as far as the id tells (as [`crate::get_job`]).
pub fn get_workflow(conn: &mut PgConnection, id: JobId) -> Result<WorkflowLookup> {
    crate::isolation::report(conn, |conn| {
        let mut row = read_workflow(conn, id)?;
        if row.is_none()
            && let Some(of_step) = diesel::sql_query(sql::WORKFLOW_OF_STEP)
                .bind::<Uuid, _>(id)
                .get_result::<WorkflowId>(conn)
                .optional()?
        {
            row = read_workflow(conn, of_step.id)?;
        }
        let Some(row) = row else {
            return Ok(WorkflowLookup::NotFound(crate::lookup::why_missing(
                conn, id,
            )?));
        };
        let steps = diesel::sql_query(sql::WORKFLOW_STEPS)
            .bind::<Uuid, _>(row.id)
            .load::<StepInfo>(conn)?;
        Ok(WorkflowLookup::Found(WorkflowInfo {
            id: row.id,
            name: row.name,
            on_failure: row.on_failure,
            created_at: row.created_at,
            steps,
        }))
    })
}

fn read_workflow(conn: &mut PgConnection, id: JobId) -> Result<Option<WorkflowRow>> {
    Ok(diesel::sql_query(sql::WORKFLOW_GET)
        .bind::<Uuid, _>(id)
        .get_result::<WorkflowRow>(conn)
        .optional()?)
}

#[derive(QueryableByName)]
struct ParentResult {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Nullable<Text>)]
    result: Option<String>,
}

/// The results of the steps that step `job_id` comes after, by step name
/// (in name order), `None` for a parent that recorded none; empty for a
/// job outside any workflow.
pub fn parent_results(
    conn: &mut PgConnection,
    job_id: JobId,
) -> Result<Vec<(String, Option<serde_json::Value>)>> {
    let rows = diesel::sql_query(sql::WORKFLOW_PARENT_RESULTS)
        .bind::<Uuid, _>(job_id)
        .load::<ParentResult>(conn)?;
    rows.into_iter()
        .map(|row| {
            let value = row
                .result
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .map_err(|source| crate::Error::Deserialize {
                    job_type: format!("result of step `{}`", row.name),
                    source,
                })?;
            Ok((row.name, value))
        })
        .collect()
}
