//! One job in full: its facts, its timeline, its errors, its payload, and
//! the actions its status allows.

use chrono::{DateTime, Utc};
use diesel::PgConnection;
use jobqueue_core::browse::JobQuery;
use jobqueue_core::{JobId, JobLookup, JobRow, JobStatus};
use maud::html;

use super::layout::{Section, page};
use super::{Ctx, notice, status, when, when_opt};
use crate::form::Params;
use crate::refusal::Refusal;

/// One entry of the job's error history.
struct Failure {
    attempt: String,
    at: String,
    error: String,
}

/// The error history: `errors` is a JSON array of `{attempt, at, error}`.
fn failures(job: &JobRow) -> Vec<Failure> {
    let text = |value: Option<&serde_json::Value>| match value {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "-".into(),
    };
    job.errors
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|entry| Failure {
                    attempt: text(entry.get("attempt")),
                    at: text(entry.get("at")),
                    error: text(entry.get("error")),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What happened to the job, in order.
fn timeline(job: &JobRow) -> Vec<(DateTime<Utc>, String)> {
    let mut events: Vec<(DateTime<Utc>, String)> = vec![(job.created_at, "enqueued".into())];
    if job.run_at > job.created_at {
        events.push((job.run_at, "due".into()));
    }
    if let Some(at) = job.claimed_at {
        events.push((
            at,
            format!(
                "claimed by {} (claim {})",
                job.worker_id.as_deref().unwrap_or("-"),
                job.claim_count
            ),
        ));
    }
    if let Some(at) = job.started_at {
        events.push((at, "started".into()));
    }
    if let Some(at) = job.finished_at {
        events.push((at, job.status.as_str().to_owned()));
    }
    events.sort_by_key(|(at, _)| *at);
    events
}

/// The link to the list of `tag`'s jobs.
fn tag_list(ctx: &Ctx<'_>, tag: &str) -> String {
    let query = JobQuery {
        tag: Some(tag.to_owned()),
        ..JobQuery::default()
    };
    super::jobs::list_link(ctx, "/jobs", &query, None)
}

pub(crate) fn render(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    id: JobId,
    params: &Params,
) -> Result<String, Refusal> {
    let result = jobqueue_core::kept_result(conn, id)?;
    let job = match jobqueue_core::get_job(conn, id)? {
        JobLookup::Found(job) => job,
        JobLookup::NotFound(missing) => {
            let said = match &result {
                Some(result) => format!(
                    "job {id} completed and its row was deleted (completed rows are not \
                     kept); the result kept for its enqueuer is {result}"
                ),
                None => missing.to_string(),
            };
            return Err(Refusal::new(404, said));
        }
    };
    let payload =
        serde_json::to_string_pretty(&job.payload).unwrap_or_else(|_| job.payload.to_string());
    let errors = failures(&job);
    let path = |action: &str| format!("/jobs/{id}/{action}");
    let content = html! {
        div.actions {
            @if matches!(job.status, JobStatus::Failed | JobStatus::Cancelled) {
                (ctx.action(&path("retry"), "Retry", &[]))
            }
            @if !job.status.is_finished() {
                (ctx.action(&path("cancel"), "Cancel", &[]))
            }
            @if job.status.is_finished() {
                (ctx.action(&path("delete"), "Delete", &[]))
            }
        }
        dl.facts #facts {
            dt { "id" } dd { code { (job.id) } }
            dt { "type" } dd #job-type { (job.job_type) }
            dt { "queue" } dd #job-queue { (job.queue) }
            dt { "status" } dd #job-status { (status(job.status.as_str())) }
            dt { "priority" } dd { (job.priority) }
            dt { "attempts" } dd { (job.attempts) " of " (job.max_attempts)
                @if job.snoozes > 0 { " (snoozed " (job.snoozes) " times)" } }
            dt { "run at" } dd { (when(job.run_at)) }
            dt { "progress" } dd { (job.progress) " %"
                @if let Some(stage) = &job.current_stage { " · " (stage) } }
            dt { "worker" } dd { (job.worker_id.as_deref().unwrap_or("-")) }
            dt { "lease until" } dd { (when_opt(job.lease_expires_at)) }
            dt { "heartbeat" } dd { (when_opt(job.heartbeat_at)) }
            dt { "cancel requested" } dd { (if job.cancel_requested { "yes" } else { "no" }) }
            @if let Some(workflow) = job.workflow_id {
                dt { "workflow" } dd #workflow { a href=(ctx.link(&format!("/workflows/{workflow}"))) { code { (workflow) } } }
            }
            dt { "unique key" } dd #unique-key { (job.unique_key.as_deref().unwrap_or("-")) }
            dt { "tags" } dd #tags {
                @for (i, tag) in job.tags.iter().flatten().enumerate() {
                    @if i > 0 { " " }
                    a.tag href=(tag_list(ctx, tag)) { (tag) }
                }
                @if job.tags.is_none() { "-" }
            }
            @if let Some(metadata) = &job.metadata {
                dt { "metadata" } dd #metadata { code { (metadata) } }
            }
            @if let Some(steps) = &job.step_outputs {
                dt { "durable steps" } dd #durable-steps { code { (steps) } }
            }
            @if let Some(cursor) = &job.step_cursor {
                dt { "durable cursor" } dd #durable-cursor { code { (cursor) } }
            }
            @if let Some(result) = &result {
                dt { "result" } dd #job-result { code { (result) } }
            }
            dt { "traceparent" } dd #traceparent { (job.traceparent.as_deref().unwrap_or("-")) }
            dt { "last error" } dd.error #last-error { (job.last_error.as_deref().unwrap_or("-")) }
        }
        h2 { "Timeline" }
        table #timeline {
            tbody {
                @for (at, what) in timeline(&job) {
                    tr { td { (when(at)) } td { (what) } }
                }
            }
        }
        h2 { "Errors" }
        @if errors.is_empty() {
            p.note { "No failed attempt." }
        } @else {
            table #errors {
                thead { tr { th.num { "attempt" } th { "at" } th { "error" } } }
                tbody {
                    @for f in &errors {
                        tr { td.num { (f.attempt) } td { (f.at) } td.error { pre { (f.error) } } }
                    }
                }
            }
            p.note { "The last " (errors.len()) " failures are kept." }
        }
        h2 { "Payload" }
        pre #payload { (payload) }
    };
    Ok(page(
        ctx,
        &format!("Job {id}"),
        Section::Jobs,
        None,
        notice(params).as_deref(),
        content,
    ))
}
