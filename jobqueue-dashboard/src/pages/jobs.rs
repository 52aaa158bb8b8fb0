//! The job list: filters, a bounded count, keyset pages.

use diesel::PgConnection;
use jobqueue_core::browse::{JobCursor, JobOrder, JobQuery};
use jobqueue_core::{JobRow, JobStatus};
use maud::{Markup, html};

use super::layout::{Section, page};
use super::{Ctx, notice, status, when};
use crate::form::{Params, query};
use crate::refusal::Refusal;

/// Jobs per page.
const PAGE: i64 = 50;

/// The most a job list counts.
pub(crate) const COUNT_BOUND: i64 = 10_000;

/// The query a request's parameters ask for.
pub(crate) fn job_query(params: &Params) -> Result<JobQuery, Refusal> {
    let status = match params.get("status") {
        None => None,
        Some(text) => Some(
            text.parse::<JobStatus>()
                .map_err(|_| Refusal::new(400, format!("`{text}` is not a job status")))?,
        ),
    };
    let order = match params.get("order") {
        None => JobOrder::Newest,
        Some(text) => text
            .parse::<JobOrder>()
            .map_err(|e| Refusal::new(400, e.to_string()))?,
    };
    let cursor = match params.get("cursor") {
        None => None,
        Some(text) => Some(
            text.parse::<JobCursor>()
                .map_err(|_| Refusal::new(400, format!("`{text}` is not a page cursor")))?,
        ),
    };
    Ok(JobQuery {
        status,
        queue: params.get("queue").map(str::to_owned),
        job_type: params.get("type").map(str::to_owned),
        unique_key: params.get("key").map(str::to_owned),
        tag: params.get("tag").map(str::to_owned),
        order,
        cursor,
    })
}

/// The link to a list with `query`'s filters, starting at `cursor`.
pub(crate) fn list_link(
    ctx: &Ctx<'_>,
    path: &str,
    q: &JobQuery,
    cursor: Option<JobCursor>,
) -> String {
    let cursor = cursor.map(|cursor| cursor.to_string());
    let order = (q.order != JobOrder::Newest).then(|| q.order.as_str());
    ctx.link(&format!(
        "{path}?{}",
        query(&[
            ("status", q.status.map(JobStatus::as_str)),
            ("queue", q.queue.as_deref()),
            ("type", q.job_type.as_deref()),
            ("key", q.unique_key.as_deref()),
            ("tag", q.tag.as_deref()),
            ("order", order),
            ("cursor", cursor.as_deref()),
        ])
    ))
}

pub(crate) fn list(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    params: &Params,
) -> Result<String, Refusal> {
    if let Some(id) = params.get("id") {
        let id = id
            .parse()
            .map_err(|_| Refusal::new(400, format!("`{id}` is not a job id")))?;
        return super::job::render(ctx, conn, id, params);
    }
    let q = job_query(params)?;
    let count = jobqueue_core::browse::count_jobs(conn, &q, COUNT_BOUND)?;
    let found = jobqueue_core::browse::browse_jobs(conn, &q, PAGE)?;
    let content = html! {
        (filters(ctx, "/jobs", &q, true))
        p.note #count {
            @if count.capped {
                "More than " (COUNT_BOUND) " jobs match (the count stops there, so it never reads the whole history)"
            } @else {
                (count.n) " jobs match"
            }
            @if count.windowed {
                " among the latest " (jobqueue_core::browse::SEARCH_WINDOW) " " (searched(&q)) " (no index serves these filters: older jobs are searched a window at a time)"
            }
            "."
        }
        (table(ctx, &found.jobs))
        @if found.jobs.is_empty() && q.status == Some(JobStatus::Completed) {
            p.note #completed-not-kept {
                "Completed jobs are deleted as they complete unless the runners keep them "
                "(" code { "--retain-completed-hours" } "); the overview's chart counts them per minute."
            }
        }
        @if let Some(next) = found.next {
            p.pager { a #next href=(list_link(ctx, "/jobs", &q, Some(next))) { "Next page →" } }
        }
        @if let Some(older) = found.searched_to {
            p.pager #searched-to {
                "Searched the latest " (jobqueue_core::browse::SEARCH_WINDOW) " " (searched(&q)) " from here. "
                a #older href=(list_link(ctx, "/jobs", &q, Some(older))) { "Search older jobs →" }
            }
        }
    };
    Ok(page(
        ctx,
        "Jobs",
        Section::Jobs,
        None,
        notice(params).as_deref(),
        content,
    ))
}

/// What a windowed search of `q` searches: tagged jobs for a tag, else
/// all jobs.
fn searched(q: &JobQuery) -> &'static str {
    if q.tag.is_some() {
        "tagged jobs"
    } else {
        "jobs"
    }
}

/// The filter form; `all_statuses`: offer every status and the order.
pub(crate) fn filters(ctx: &Ctx<'_>, path: &str, q: &JobQuery, all_statuses: bool) -> Markup {
    let selected = |s: JobStatus| q.status == Some(s);
    html! {
        form.filters method="get" action=(ctx.link(path)) {
            @if all_statuses {
                label { "status"
                    select name="status" {
                        option value="" { "any" }
                        @for s in JobStatus::ALL {
                            option value=(s.as_str()) selected[selected(s)] { (s.as_str()) }
                        }
                    }
                }
            }
            label { "queue" input name="queue" value=[q.queue.as_deref()]; }
            label { "type" input name="type" value=[q.job_type.as_deref()]; }
            @if all_statuses {
                label { "id" input name="id" size="36"; }
                label { "unique key" input name="key" value=[q.unique_key.as_deref()]; }
                label { "tag" input name="tag" value=[q.tag.as_deref()]; }
                label { "order"
                    select name="order" {
                        option value="newest" { "newest first" }
                        option value="run_at" selected[q.order == JobOrder::RunAt] { "by run_at (a live status)" }
                        option value="finished" selected[q.order == JobOrder::Finished] { "latest finished (a finished status)" }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
    }
}

/// A table of jobs, each linking to its page.
pub(crate) fn table(ctx: &Ctx<'_>, jobs: &[JobRow]) -> Markup {
    html! {
        @if jobs.is_empty() {
            p.note #empty { "No jobs here." }
        } @else {
            table #jobs {
                thead { tr {
                    th { "id" } th { "type" } th { "queue" } th { "status" } th.num { "attempts" }
                    th { "run at" } th { "finished" } th { "last error" }
                } }
                tbody {
                    @for job in jobs {
                        tr data-id=(job.id) {
                            td { a href=(ctx.link(&format!("/jobs/{}", job.id))) { code { (job.id) } } }
                            td { (job.job_type) } td { (job.queue) }
                            td { (status(job.status.as_str())) }
                            td.num { (job.attempts) "/" (job.max_attempts) }
                            td { (when(job.run_at)) }
                            td { (super::when_opt(job.finished_at)) }
                            td.error { (job.last_error.as_deref().map(short).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    }
}

/// The first line of an error, at most 160 characters.
fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(160) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}
