//! The periodic schedules: last and next slot, paused or orphaned, and
//! pause, resume, run now.

use diesel::PgConnection;
use maud::html;

use super::layout::{Section, page};
use super::{Ctx, notice, status, when, when_opt};
use crate::form::Params;
use crate::refusal::Refusal;

pub(crate) fn render(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    params: &Params,
) -> Result<String, Refusal> {
    let schedules = jobqueue_core::list_schedules(conn)?;
    let content = html! {
        @if schedules.is_empty() {
            p.note #empty { "No schedules: worker binaries declare them (Cli::periodic, Registry::periodic)." }
        } @else {
            table #schedules {
                thead { tr {
                    th { "name" } th { "cron" } th { "time zone" } th { "job type" } th { "queue" }
                    th { "last slot" } th { "next slot" } th { "state" } th {}
                } }
                tbody {
                    @for s in &schedules {
                        @let state = if s.is_orphaned() { "orphaned" } else if s.paused { "paused" } else { "active" };
                        tr data-schedule=(s.name) {
                            td { (s.name) } td { code { (s.cron) } }
                            td { (s.time_zone.as_deref().unwrap_or("UTC")) }
                            td { (s.job_type) } td { (s.queue) }
                            td { (when(s.last_slot)) } td { (when_opt(s.next_slot())) }
                            td.state { (status(state)) }
                            td {
                                @if s.paused {
                                    (ctx.action("/schedules/resume", "Resume", &[("name", &s.name)]))
                                } @else {
                                    (ctx.action("/schedules/pause", "Pause", &[("name", &s.name)]))
                                }
                                " "
                                (ctx.action("/schedules/run", "Run now", &[("name", &s.name)]))
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(page(
        ctx,
        "Schedules",
        Section::Schedules,
        None,
        notice(params).as_deref(),
        content,
    ))
}
