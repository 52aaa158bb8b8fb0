//! The overview: every queue with its counts and the settings an operator
//! changed of its declaration in code, the last hour's finished and failed
//! jobs per minute, and the live runners.

use chrono::{Duration, DurationRound, Utc};
use diesel::PgConnection;
use jobqueue_core::{JobStatus, Override, QueueInfo};
use maud::{Markup, html};

use super::layout::{Section, page};
use super::{Ctx, ago, human, notice, status};
use crate::form::Params;
use crate::refusal::Refusal;

pub(crate) fn render(
    ctx: &Ctx<'_>,
    conn: &mut PgConnection,
    params: &Params,
) -> Result<String, Refusal> {
    let queues = jobqueue_core::list_queues(conn, jobqueue_core::Counting::Live)?;
    let (minutes, capped) = jobqueue_core::browse::throughput(conn)?;
    let runners = jobqueue_core::list_runners(conn)?;
    // What operators changed of what the code declares, queue by queue.
    let overridden: Vec<Vec<Override>> = queues.iter().map(QueueInfo::overrides).collect();
    let content = html! {
        h2 { "Queues" }
        @if queues.is_empty() {
            p.note { "No queues yet: a queue comes into being when a job names it." }
        } @else {
            table #queues {
                thead { tr {
                    th { "queue" } th { "state" } th.num { "due" } th.num { "scheduled" }
                    th.num { "unhandled" } th.num { "held" } th.num { "failed" }
                    th.num { "oldest due" } th.num { "limit" } th.num { "rate" }
                    th.num { "keys" } th.num { "keyed" } th {}
                } }
                tbody {
                    @for (q, overrides) in queues.iter().zip(&overridden) {
                        tr data-queue=(q.queue) {
                            td {
                                a href=(ctx.link(&format!("/jobs?{}", crate::form::query(&[("queue", Some(&q.queue))])))) { (q.queue) }
                                (overrides_of(overrides))
                            }
                            td.state { (state(q)) }
                            td.num { (q.count(JobStatus::Pending)) } td.num { (q.count(JobStatus::Scheduled)) }
                            td.num { (q.count(JobStatus::Unhandled)) } td.num { (q.held()) }
                            td.num { a href=(ctx.link(&format!("/failed?{}", crate::form::query(&[("queue", Some(&q.queue))])))) { (q.count(JobStatus::Failed)) } }
                            td.num { (q.oldest_due_age().map(human).unwrap_or_else(|| "-".into())) }
                            td.num.limit { (q.global_limit.map(|n| n.to_string()).unwrap_or_else(|| "-".into())) }
                            td.num.rate { (rate(q)) }
                            td.num.keys { (q.key_limit.map(|limit| limit.to_string()).unwrap_or_else(|| "-".into())) }
                            td.num.keyed { (keyed(q)) }
                            td {
                                @if q.paused {
                                    (ctx.action("/queues/resume", "Resume", &[("name", &q.queue)]))
                                } @else {
                                    (ctx.action("/queues/pause", "Pause", &[("name", &q.queue)]))
                                }
                                @if q.global_limit.is_some() {
                                    " " (ctx.action("/queues/remove-limit", "Remove limit", &[("name", &q.queue)]))
                                }
                                @if q.rate_limit.is_some() {
                                    " " (ctx.action("/queues/remove-rate", "Remove rate", &[("name", &q.queue)]))
                                }
                                @if q.key_limit.is_some() {
                                    " " (ctx.action("/queues/remove-keys", "Remove key limit", &[("name", &q.queue)]))
                                }
                            }
                        }
                    }
                }
            }
            @if overridden.iter().any(|o| !o.is_empty()) {
                p.note #overrides-note {
                    "A note under a queue's name, such as " em { "limit 5 (code declares 3)" }
                    ", is a setting the code declares for the queue that was " (SET_AT_RUN_TIME) "."
                }
            }
            @if !ctx.read_only() {
                (limit_forms(ctx, &queues))
            }
        }
        h2 { "Last hour" }
        (chart(&minutes))
        p.note {
            "Jobs completed per minute, and failed for good on top in red, from the pruning index"
            @if capped {
                ": counted from the latest " (jobqueue_core::browse::THROUGHPUT_MOST)
                " finished jobs only, so the older minutes show less than they had"
            }
            "."
        }
        h2 { "Runners" }
        @if runners.is_empty() {
            p.note { "No runner has registered." }
        } @else {
            table #runners {
                thead { tr {
                    th { "worker" } th { "host" } th.num { "pid" } th { "version" }
                    th.num { "workers" } th { "queues" } th { "last seen" } th { "state" }
                } }
                tbody {
                    @for r in &runners {
                        tr {
                            td { (r.worker_id) } td { (r.host) } td.num { (r.pid) } td { (r.version) }
                            td.num { (r.concurrency) }
                            td { (if r.queues.is_empty() { "every queue".to_owned() } else { r.queues.join(", ") }) }
                            td { (ago(Some(r.last_seen))) }
                            td { (status(if r.is_gone() { "gone" } else { "live" })) }
                        }
                    }
                }
            }
        }
    };
    Ok(page(
        ctx,
        "Overview",
        Section::Overview,
        Some(5),
        notice(params).as_deref(),
        content,
    ))
}

/// What an override's tooltip and the note under the table say of it.
const SET_AT_RUN_TIME: &str =
    "set at run time (by an operator): it stands until the code declares another value";

/// The settings of a queue's declaration in code that an operator changed
/// since, one note each (`limit 5 (code declares 3)`, `working (code
/// declares paused)`), under the queue's name; nothing if none.
fn overrides_of(overrides: &[Override]) -> Markup {
    if overrides.is_empty() {
        return html! {};
    }
    html! {
        ul.overrides {
            @for o in overrides {
                li.override data-setting=(o.setting) aria-describedby="overrides-note"
                    title={ (setting(o.setting, &o.now)) ", " (SET_AT_RUN_TIME) "; the code declares "
                        (setting(o.setting, &o.declared)) "." } {
                    (setting(o.setting, &o.now)) " (code declares " (o.declared) ")"
                }
            }
        }
    }
}

/// A setting with its value (`limit 5`); `paused` and `working` name
/// themselves.
fn setting(name: &str, value: &str) -> String {
    if name == "paused" {
        value.to_owned()
    } else {
        format!("{name} {value}")
    }
}

/// A queue's state: paused, backing off after a handler's "rate limited,
/// retry after" (with the time left), or active.
fn state(q: &QueueInfo) -> Markup {
    match (q.paused, q.backoff_left()) {
        (true, _) => status("paused"),
        (false, Some(left)) => html! {
            (status("backoff")) " " span.note title="after a handler's \"rate limited, retry after\"" {
                (human(left)) " left"
            }
        },
        (false, None) => status("active"),
    }
}

/// A queue's rate limit with the starts in its current window (`37 of
/// 50/1s`), `-` without one.
fn rate(q: &QueueInfo) -> Markup {
    match q.rate_limit {
        Some(limit) => html! {
            span title={ (q.rate_used) " jobs started in the current window; at most " (limit.starts())
                " per " (format!("{:?}", limit.period())) " by all runners together" } {
                (q.rate_used) " of " (limit)
            }
        },
        None => html! { "-" },
    }
}

/// A queue's keyed jobs: the keys held and the jobs waiting on their key
/// (`12 held, 340 waiting`), `-` without a key limit or jobs still
/// waiting from one.
fn keyed(q: &QueueInfo) -> Markup {
    let waiting = q.count(JobStatus::Waiting);
    if q.key_limit.is_none() && waiting == 0 {
        return html! { "-" };
    }
    html! {
        span title={ (q.keys_held) " keys with jobs admitted and not finished; " (waiting)
            " jobs waiting for room in their key" } {
            (q.keys_held) " held, " (waiting) " waiting"
        }
    }
}

/// The forms that set a queue's rate limit, key limit and global limit.
fn limit_forms(ctx: &Ctx<'_>, queues: &[QueueInfo]) -> Markup {
    // One form per limit: the queue, the limit's field, its button.
    let form = |id: &str, path: &str, field: Markup, button: &str| {
        html! {
            form.filters id=(id) method="post" action=(ctx.link(path)) {
                (ctx.csrf_field())
                label { "queue"
                    select name="name" {
                        @for q in queues { option value=(q.queue) { (q.queue) } }
                    }
                }
                (field)
                button type="submit" { (button) }
            }
        }
    };
    html! {
        h2 { "Limits" }
        (form("set-rate", "/queues/rate", html! {
            label { "rate limit (starts/period)"
                input type="text" name="rate" placeholder="50/1s" size="10" required;
            }
        }, "Set rate limit"))
        (form("set-keys", "/queues/keys", html! {
            label { "key limit (jobs of one key at once, or ordered)"
                input type="text" name="keys" placeholder="5" size="10" required;
            }
        }, "Set key limit"))
        (form("set-limit", "/queues/limit", html! {
            label { "global limit (jobs held at once)"
                input type="number" name="limit" min="1" placeholder="5" required;
            }
        }, "Set global limit"))
        p.note {
            "All hold for all runners together. A rate limit is jobs started per period: "
            code { "50/1s" } ", " code { "100/1m" } ", " code { "10/250ms" }
            " (units ms, s, m, h, d; " code { "50/s" } " is 50 a second). A key limit is jobs of one "
            "concurrency key at once, 1 to 10000 (" code { "5" } "), or " code { "ordered" }
            ": one at a time in enqueue order; the keyed jobs beyond it wait. A global limit is jobs "
            "held (claimed or running) at once. Remove any of them with its button in the queue's row."
        }
    }
}

/// Sixty bars, one a minute, the last at the right: completed jobs, with
/// the failed ones stacked on top in red.
fn chart(minutes: &[jobqueue_core::browse::MinuteCount]) -> Markup {
    const WIDTH: i64 = 600;
    const HEIGHT: i64 = 80;
    let bar = WIDTH / 60;
    let now = Utc::now()
        .duration_trunc(Duration::minutes(1))
        .unwrap_or_else(|_| Utc::now());
    let most = minutes
        .iter()
        .map(|m| m.completed + m.failed)
        .max()
        .unwrap_or(0)
        .max(1);
    let height = |n: i64| (n * HEIGHT) / most;
    html! {
        svg.chart width=(WIDTH) height=(HEIGHT) viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
            role="img" aria-label="jobs completed and failed per minute over the last hour" {
            @for m in minutes {
                @let slot = 59 - (now - m.minute).num_minutes().clamp(0, 59);
                @let x = slot * bar;
                @let (done, failed) = (height(m.completed), height(m.failed));
                rect.completed x=(x) y=(HEIGHT - done) width=(bar - 1) height=(done) {
                    title { (m.minute.format("%H:%M")) ": " (m.completed) " completed, " (m.failed) " failed" }
                }
                @if m.failed > 0 {
                    rect.failed x=(x) y=(HEIGHT - done - failed) width=(bar - 1) height=(failed) {}
                }
            }
        }
    }
}
