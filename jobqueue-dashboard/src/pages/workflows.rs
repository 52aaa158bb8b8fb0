//! The newest workflows and batches: state, steps by state, name, when
//! enqueued; each links to its own page. `?unfinished=1` keeps those with
//! a step not ended yet.

use diesel::PgConnection;
use maud::html;

use super::layout::{Section, page};
use super::{Ctx, notice, status, when, when_opt};
use crate::form::Params;
use crate::refusal::Refusal;

/// Workflows listed at most.
const MOST_LISTED: i64 = 200;

pub(crate) fn list(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    params: &Params,
) -> Result<String, Refusal> {
    let unfinished = params.get("unfinished").is_some_and(|v| v == "1");
    let flows = jobqueue_core::list_workflows(conn, MOST_LISTED, unfinished)?;
    let content = html! {
        p.filters {
            @if unfinished {
                a #show-all href=(ctx.link("/workflows")) { "Show finished ones too" }
            } @else {
                a #show-unfinished href=(ctx.link("/workflows?unfinished=1")) { "Only unfinished" }
            }
        }
        @if flows.is_empty() {
            p.note #empty {
                @if unfinished { "No unfinished workflows." }
                @else { "No workflows (a finished one is kept for the runners' --retain-workflows-hours, 7 days by default)." }
            }
        } @else {
            table #workflows {
                thead { tr {
                    th { "name" } th { "state" } th.num { "steps" } th.num { "completed" }
                    th.num { "failed" } th.num { "cancelled" } th.num { "not ended" }
                    th { "on failure" } th { "created" } th { "last ended" }
                } }
                tbody {
                    @for flow in &flows {
                        tr data-workflow=(flow.id) {
                            td { a href=(ctx.link(&format!("/workflows/{}", flow.id))) { (flow.name) } }
                            td.state { (status(flow.state())) }
                            td.num { (flow.steps) } td.num { (flow.completed) }
                            td.num { (flow.failed) } td.num { (flow.cancelled) }
                            td.num { (flow.live) }
                            td { (flow.on_failure) }
                            td { (when(flow.created_at)) } td { (when_opt(flow.last_ended_at)) }
                        }
                    }
                }
            }
            @if flows.len() as i64 >= MOST_LISTED {
                p.note { "The newest " (MOST_LISTED) " are listed; `jobqueue workflow list --limit N` lists more." }
            }
        }
    };
    Ok(page(
        ctx,
        "Workflows",
        Section::Workflows,
        None,
        notice(params).as_deref(),
        content,
    ))
}
