//! The dead letter: failed jobs, each retried on its own or every one
//! matching a filter after saying how many that is.

use diesel::PgConnection;
use jobqueue_core::JobStatus;
use jobqueue_core::browse::JobQuery;
use maud::html;

use super::jobs::{COUNT_BOUND, filters, job_query, list_link};
use super::layout::{Section, page};
use super::{Ctx, notice, when_opt};
use crate::form::{Params, query};
use crate::refusal::Refusal;

/// Failed jobs per page.
const PAGE: i64 = 50;

/// The query of a failed-jobs page: failed, latest failure first (the
/// dead letter's own index).
fn failed_query(params: &Params) -> Result<JobQuery, Refusal> {
    Ok(JobQuery {
        status: Some(JobStatus::Failed),
        order: jobqueue_core::browse::JobOrder::Finished,
        unique_key: None,
        ..job_query(params)?
    })
}

pub(crate) fn list(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    params: &Params,
) -> Result<String, Refusal> {
    let q = failed_query(params)?;
    let count = jobqueue_core::browse::count_jobs(conn, &q, COUNT_BOUND)?;
    let found = jobqueue_core::browse::browse_jobs(conn, &q, PAGE)?;
    let retry_all = ctx.link(&format!(
        "/failed/retry?{}",
        query(&[
            ("queue", q.queue.as_deref()),
            ("type", q.job_type.as_deref())
        ])
    ));
    let content = html! {
        (filters(ctx, "/failed", &q, false))
        p.note #count {
            @if count.capped { "More than " (COUNT_BOUND) " failed jobs match." }
            @else { (count.n) " failed jobs match." }
            @if !ctx.read_only() && count.n > 0 {
                " " a #retry-all href=(retry_all) { "Retry every one of them…" }
            }
        }
        @if found.jobs.is_empty() {
            p.note #empty { "No failed jobs here." }
        } @else {
            table #jobs {
                thead { tr {
                    th { "id" } th { "type" } th { "queue" } th.num { "attempts" }
                    th { "failed at" } th { "error" } th {}
                } }
                tbody {
                    @for job in &found.jobs {
                        tr data-id=(job.id) {
                            td { a href=(ctx.link(&format!("/jobs/{}", job.id))) { code { (job.id) } } }
                            td { (job.job_type) } td { (job.queue) }
                            td.num { (job.attempts) "/" (job.max_attempts) }
                            td { (when_opt(job.finished_at)) }
                            td.error { (job.last_error.as_deref().unwrap_or("-")) }
                            td { (ctx.action(&format!("/jobs/{}/retry", job.id), "Retry", &[])) }
                        }
                    }
                }
            }
        }
        @if let Some(next) = found.next {
            p.pager { a #next href=(list_link(ctx, "/failed", &q, Some(next))) { "Next page →" } }
        }
    };
    Ok(page(
        ctx,
        "Failed jobs",
        Section::Failed,
        None,
        notice(params).as_deref(),
        content,
    ))
}

/// What retrying every matching failed job will touch, and the button.
pub(crate) fn confirm(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    params: &Params,
) -> Result<String, Refusal> {
    let q = failed_query(params)?;
    let count = jobqueue_core::browse::count_jobs(conn, &q, i64::from(i32::MAX))?;
    let mut fields: Vec<(&str, &str)> = Vec::new();
    if let Some(queue) = &q.queue {
        fields.push(("queue", queue));
    }
    if let Some(job_type) = &q.job_type {
        fields.push(("type", job_type));
    }
    let scope = match (&q.queue, &q.job_type) {
        (None, None) => "every queue and type".to_owned(),
        (Some(queue), None) => format!("queue {queue}"),
        (None, Some(job_type)) => format!("type {job_type}"),
        (Some(queue), Some(job_type)) => format!("queue {queue}, type {job_type}"),
    };
    let content = html! {
        p #will-touch {
            "This puts " strong { (count.n) } " failed jobs (" (scope)
            ") back to pending, due now, with their attempts reset. Jobs whose unique key a live job holds stay failed."
        }
        div.actions {
            (ctx.action("/failed/retry", &format!("Retry {} jobs", count.n), &fields))
            a href=(list_link(ctx, "/failed", &q, None)) { "Back" }
        }
    };
    Ok(page(
        ctx,
        "Retry failed jobs",
        Section::Failed,
        None,
        None,
        content,
    ))
}
