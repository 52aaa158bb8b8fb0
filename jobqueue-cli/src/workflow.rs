//! `jobqueue workflow list`: the newest workflows, their steps counted by
//! state; `jobqueue workflow show ID`: a workflow's steps, each one's
//! state, the steps it comes after and its result.

use chrono::{DateTime, Utc};
use jobqueue_core::{JobStatus, StepInfo, WorkflowInfo, WorkflowSummary};
use serde::Serialize;

use crate::CliError;
use crate::args::WorkflowCommand;
use crate::connect::{connect, parse_id};
use crate::output::{json_document, json_line, outln};
use crate::terminal::shown;

/// Runs a `workflow` subcommand on the database at `url`.
pub(crate) fn run(url: &str, command: WorkflowCommand) -> Result<(), CliError> {
    match command {
        WorkflowCommand::List {
            unfinished,
            limit,
            json,
        } => list(url, unfinished, limit, json),
        WorkflowCommand::Show { id, json } => show(url, &id, json),
    }
}

fn list(url: &str, unfinished: bool, limit: i64, json: bool) -> Result<(), CliError> {
    let flows = jobqueue_core::list_workflows(&mut connect(url)?, limit, unfinished)?;
    if json {
        for flow in &flows {
            json_line(&SummaryJson::of(flow))?;
        }
        return Ok(());
    }
    if flows.is_empty() {
        let which = if unfinished { "unfinished " } else { "" };
        outln!(
            "no {which}workflows (a finished one is kept for the runners' \
             --retain-workflows-hours, 7 days by default)"
        )?;
        return Ok(());
    }
    outln!(
        "{:<36} {:<10} {:>6} {:>9} {:>6} {:>9} {:>9} {:<25} name",
        "workflow",
        "state",
        "steps",
        "completed",
        "failed",
        "cancelled",
        "not ended",
        "created at"
    )?;
    for flow in &flows {
        outln!(
            "{:<36} {:<10} {:>6} {:>9} {:>6} {:>9} {:>9} {:<25} {}",
            flow.id,
            flow.state(),
            flow.steps,
            flow.completed,
            flow.failed,
            flow.cancelled,
            flow.live,
            flow.created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            shown(&flow.name)
        )?;
    }
    Ok(())
}

/// One line of `workflow list --json`.
#[derive(Serialize)]
struct SummaryJson<'a> {
    id: String,
    name: &'a str,
    state: &'static str,
    on_failure: &'a str,
    created_at: DateTime<Utc>,
    last_ended_at: Option<DateTime<Utc>>,
    steps: i64,
    completed: i64,
    failed: i64,
    cancelled: i64,
    not_ended: i64,
}

impl<'a> SummaryJson<'a> {
    fn of(flow: &'a WorkflowSummary) -> Self {
        SummaryJson {
            id: flow.id.to_string(),
            name: &flow.name,
            state: flow.state(),
            on_failure: &flow.on_failure,
            created_at: flow.created_at,
            last_ended_at: flow.last_ended_at,
            steps: flow.steps,
            completed: flow.completed,
            failed: flow.failed,
            cancelled: flow.cancelled,
            not_ended: flow.live,
        }
    }
}

fn show(url: &str, id: &str, json: bool) -> Result<(), CliError> {
    let id = parse_id(id)?;
    let flow = match jobqueue_core::get_workflow(&mut connect(url)?, id)? {
        jobqueue_core::WorkflowLookup::Found(flow) => flow,
        jobqueue_core::WorkflowLookup::NotFound(missing) => {
            return Err(CliError::Refused(format!(
                "no workflow with id {id}, and no step of one has it (the id is a \
                 workflow's, as `Workflow::enqueue` returned it, or one of its jobs'): {}",
                missing.reason
            )));
        }
    };
    if json {
        return json_document(&WorkflowJson::of(&flow));
    }
    let ended = |state: &str| flow.steps.iter().filter(|s| s.state == state).count();
    outln!("workflow:      {}", flow.id)?;
    outln!("name:          {}", shown(&flow.name))?;
    outln!("on failure:    {}", flow.on_failure)?;
    outln!("created at:    {}", flow.created_at.to_rfc3339())?;
    outln!(
        "steps:         {} ({} completed, {} failed, {} cancelled, {} not ended)",
        flow.steps.len(),
        ended("completed"),
        ended("failed"),
        ended("cancelled"),
        ended("live")
    )?;
    outln!()?;
    outln!(
        "{:<24} {:<10} {:<10} {:<36} {:<30} result",
        "step",
        "state",
        "job",
        "job id",
        "after"
    )?;
    for step in &flow.steps {
        outln!(
            "{:<24} {:<10} {:<10} {:<36} {:<30} {}",
            shown(&step.name),
            step.state,
            job_status(step),
            step.job_id,
            shown(&after(step)),
            shown(step.result.as_deref().unwrap_or("-"))
        )?;
    }
    Ok(())
}

/// A step's job status, or `-` once its row is gone.
fn job_status(step: &StepInfo) -> &'static str {
    step.job_status.map_or("-", JobStatus::as_str)
}

/// The steps a step comes after, with how many have not settled yet.
fn after(step: &StepInfo) -> String {
    if step.parents.is_empty() {
        return "-".into();
    }
    let names = step.parents.join(", ");
    if step.parents_left > 0 {
        format!("{names} ({} left)", step.parents_left)
    } else {
        names
    }
}

/// `workflow show --json`.
#[derive(Serialize)]
struct WorkflowJson<'a> {
    id: String,
    name: &'a str,
    on_failure: &'a str,
    created_at: DateTime<Utc>,
    finished: bool,
    steps: Vec<StepJson<'a>>,
}

#[derive(Serialize)]
struct StepJson<'a> {
    name: &'a str,
    job_id: String,
    job_type: &'a str,
    state: &'a str,
    job_status: Option<&'static str>,
    after: &'a [String],
    parents_left: i32,
    result: Option<serde_json::Value>,
    ended_at: Option<DateTime<Utc>>,
}

impl<'a> WorkflowJson<'a> {
    fn of(flow: &'a WorkflowInfo) -> Self {
        WorkflowJson {
            id: flow.id.to_string(),
            name: &flow.name,
            on_failure: &flow.on_failure,
            created_at: flow.created_at,
            finished: flow.is_finished(),
            steps: flow
                .steps
                .iter()
                .map(|step| StepJson {
                    name: &step.name,
                    job_id: step.job_id.to_string(),
                    job_type: &step.job_type,
                    state: &step.state,
                    job_status: step.job_status.map(JobStatus::as_str),
                    after: &step.parents,
                    parents_left: step.parents_left,
                    // Stored as JSON by the database: it parses.
                    result: step
                        .result
                        .as_deref()
                        .and_then(|text| serde_json::from_str(text).ok()),
                    ended_at: step.ended_at,
                })
                .collect(),
        }
    }
}
