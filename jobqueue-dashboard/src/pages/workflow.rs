//! One workflow (or batch): its facts, its graph, and its steps with their
//! states, parents and results.

use diesel::PgConnection;
use jobqueue_core::JobId;
use maud::html;

use super::layout::{Section, page};
use super::workflow_graph::{MOST_DRAWN, draw};
use super::{Ctx, notice, status, when, when_opt};
use crate::form::Params;
use crate::refusal::Refusal;

/// Steps listed in the table at most.
const MOST_LISTED: usize = 1000;

pub(crate) fn render(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    id: JobId,
    params: &Params,
) -> Result<String, Refusal> {
    let flow = match jobqueue_core::get_workflow(conn, id)? {
        jobqueue_core::WorkflowLookup::Found(flow) => flow,
        jobqueue_core::WorkflowLookup::NotFound(missing) => {
            return Err(Refusal::new(
                404,
                format!(
                    "no workflow with id {id}, and no step of one has it (a finished workflow \
                     is kept for its retention, 7 days unless set otherwise): {}",
                    missing.reason
                ),
            ));
        }
    };
    let count = |state: &str| flow.steps.iter().filter(|s| s.state == state).count();
    let content = html! {
        dl.facts #workflow-facts {
            dt { "id" } dd { code { (flow.id) } }
            dt { "name" } dd #workflow-name { (flow.name) }
            dt { "on failure" } dd #workflow-on-failure { (flow.on_failure) }
            dt { "created" } dd { (when(flow.created_at)) }
            dt { "steps" } dd #workflow-counts {
                (flow.steps.len()) ": "
                (count("completed")) " completed, "
                (count("failed")) " failed, "
                (count("cancelled")) " cancelled, "
                (count("live")) " not ended"
            }
        }
        h2 { "Graph" }
        @if flow.steps.len() <= MOST_DRAWN {
            div.graph-frame { (draw(&flow.steps)) }
        } @else {
            p.note #graph-too-large {
                "The graph is drawn for workflows of up to " (MOST_DRAWN) " steps; this one has "
                (flow.steps.len()) "."
            }
        }
        h2 { "Steps" }
        table #workflow-steps {
            thead { tr {
                th { "step" } th { "state" } th { "job" } th { "after" }
                th.num { "parents left" } th { "result" } th { "ended" }
            } }
            tbody {
                @for step in flow.steps.iter().take(MOST_LISTED) {
                    tr data-step=(step.name) {
                        td { a href=(ctx.link(&format!("/jobs/{}", step.job_id))) { (step.name) } }
                        td { (status(&step.state)) }
                        td { (step.job_status.map_or("-", |s| s.as_str())) }
                        td { (if step.parents.is_empty() { "-".to_owned() } else { step.parents.join(", ") }) }
                        td.num { (step.parents_left) }
                        td { code { (step.result.as_deref().unwrap_or("-")) } }
                        td { (when_opt(step.ended_at)) }
                    }
                }
            }
        }
        @if flow.steps.len() > MOST_LISTED {
            p.note { "The first " (MOST_LISTED) " of " (flow.steps.len()) " steps are listed." }
        }
    };
    Ok(page(
        ctx,
        &format!("Workflow {}", flow.name),
        Section::Workflows,
        None,
        notice(params).as_deref(),
        content,
    ))
}
