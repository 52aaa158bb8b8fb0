//! Which page or action a request asks for, and the answer's headers.
//! (Who may ask is settled before, in `admission`.)

use jobqueue_core::{JobId, KeyLimit, RateLimit};

use crate::form::{Params, split};
use crate::pages;
use crate::refusal::Refusal;
use crate::security::{TOKEN_COOKIE, same_secret};
use crate::{Dashboard, Method, Request, Response, assets};

/// Headers of every answer: nothing is framed, sniffed, or loaded from
/// elsewhere; no page is cached.
fn common_headers(content_type: &str) -> Vec<(&'static str, String)> {
    vec![
        ("Content-Type", content_type.to_owned()),
        (
            "Content-Security-Policy",
            "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
                .to_owned(),
        ),
        ("X-Content-Type-Options", "nosniff".to_owned()),
        // Same-origin requests keep their Referer and, above all, their
        // Origin: under `no-referrer` a browser sends `Origin: null` with
        // a form, and actions from a null origin are refused.
        ("Referrer-Policy", "same-origin".to_owned()),
        ("Cache-Control", "no-store".to_owned()),
    ]
}

/// An HTML page with the common headers.
pub(crate) fn page(status: u16, body: String) -> Response {
    Response {
        status,
        headers: common_headers("text/html; charset=utf-8"),
        body: body.into_bytes(),
    }
}

fn asset(content_type: &str, body: &str) -> Response {
    let mut headers = common_headers(content_type);
    headers.retain(|(name, _)| *name != "Cache-Control");
    Response {
        status: 200,
        headers,
        body: body.as_bytes().to_vec(),
    }
}

/// A redirect after an action (POST, then GET: a reload repeats nothing).
fn see_other(location: String, cookie: Option<String>) -> Response {
    let mut headers = common_headers("text/plain; charset=utf-8");
    headers.push(("Location", location));
    if let Some(cookie) = cookie {
        headers.push(("Set-Cookie", cookie));
    }
    Response {
        status: 303,
        headers,
        body: Vec::new(),
    }
}

/// Answers a request that `admission` let through.
pub(crate) fn handle(dashboard: &Dashboard, request: &Request) -> Response {
    let (path, params) = split(&request.path);
    let ctx = pages::Ctx::new(dashboard);
    match (request.method, path) {
        (Method::Get, "/static/style.css") => return asset("text/css", assets::STYLE),
        (Method::Get, "/static/app.js") => return asset("text/javascript", assets::SCRIPT),
        (Method::Get, "/login") => return login(dashboard, &ctx, &params),
        _ => {}
    }
    let answer = match request.method {
        Method::Get => get(dashboard, &ctx, path, &params).map(|body| page(200, body)),
        Method::Post => post(dashboard, &ctx, path, &Params::parse(&request.body)),
        Method::Other => Err(Refusal::new(405, "only GET and POST are served")),
    };
    answer.unwrap_or_else(|refusal| {
        page(
            refusal.status,
            pages::layout::message(&ctx, refusal.title(), &refusal.message),
        )
    })
}

/// `/login?token=...`: sets the token's cookie and goes to the overview.
fn login(dashboard: &Dashboard, ctx: &pages::Ctx<'_>, params: &Params) -> Response {
    let (Some(expected), Some(given)) = (&dashboard.config.access_token, params.get("token"))
    else {
        return see_other(ctx.link("/"), None);
    };
    if !same_secret(given, expected) {
        return page(401, pages::layout::message(ctx, "Sign in", pages::SIGN_IN));
    }
    let path = if dashboard.config.base_path.is_empty() {
        "/"
    } else {
        &dashboard.config.base_path
    };
    let cookie = format!("{TOKEN_COOKIE}={given}; Path={path}; HttpOnly; SameSite=Strict");
    see_other(ctx.link("/"), Some(cookie))
}

/// The path's segments, percent-decoded once.
fn decoded(path: &str) -> Result<Vec<String>, Refusal> {
    crate::form::segments(path).ok_or_else(|| {
        Refusal::new(
            400,
            format!("the path {path} percent-encodes bytes that are not UTF-8"),
        )
    })
}

fn as_strs(segments: &[String]) -> Vec<&str> {
    segments.iter().map(String::as_str).collect()
}

/// The queue or schedule an action names in its form (`name`, as sent:
/// names are kept out of paths, where a browser would resolve `.`, `..`,
/// `?` and `#` in them).
fn named(form: &Params) -> Result<&str, Refusal> {
    form.exact("name")
        .ok_or_else(|| Refusal::new(400, "this action names no queue or schedule (`name`)"))
}

/// Acts on queue `name`: pauses or resumes it, sets or removes its rate
/// limit (`rate` in the form, `STARTS/PERIOD`), its key limit (`keys`:
/// `5`, `5 per key` or `ordered`) or its global limit (`limit`). Where to
/// go back to, and what to say.
fn queue_action(
    conn: &mut diesel::PgConnection,
    name: &str,
    action: &str,
    form: &Params,
) -> Result<(String, String), Refusal> {
    let notice = match action {
        "rate" => {
            let rate: RateLimit = form.exact("rate").unwrap_or_default().parse()?;
            jobqueue_core::set_queue_rate_limit(conn, name, Some(rate))?;
            format!(
                "queue {name}: at most {} jobs started per {} by all runners together",
                rate.starts(),
                rate.period_text()
            )
        }
        "remove-rate" => {
            jobqueue_core::set_queue_rate_limit(conn, name, None)?;
            format!("queue {name}: no rate limit")
        }
        "keys" => {
            let limit: KeyLimit = form.exact("keys").unwrap_or_default().parse()?;
            jobqueue_core::set_queue_key_limit(conn, name, Some(limit))?;
            if limit.is_ordered() {
                format!(
                    "queue {name}: one job of a key at a time, in enqueue order, by all runners \
                     together"
                )
            } else {
                format!(
                    "queue {name}: at most {} jobs of one key at once by all runners together",
                    limit.jobs_per_key()
                )
            }
        }
        "remove-keys" => {
            jobqueue_core::set_queue_key_limit(conn, name, None)?;
            format!("queue {name}: no key limit")
        }
        "limit" => {
            let limit = global_limit(form)?;
            let change = jobqueue_core::set_queue_limit(conn, name, Some(limit))?;
            let unused = if change.known {
                ""
            } else {
                " (no job names it yet)"
            };
            format!(
                "queue {name}: at most {limit} jobs held at once by all runners together{unused}"
            )
        }
        "remove-limit" => {
            jobqueue_core::set_queue_limit(conn, name, None)?;
            format!("queue {name}: no global limit")
        }
        _ => {
            let pause = pausing(action)?;
            let change = if pause {
                jobqueue_core::pause_queue(conn, name)?
            } else {
                jobqueue_core::resume_queue(conn, name)?
            };
            paused_notice(&format!("queue {name}"), pause, change.was_paused)
        }
    };
    Ok(("/".to_owned(), notice))
}

/// The global limit a form gives (`limit`): a whole number; its range is
/// the library's to check.
fn global_limit(form: &Params) -> Result<jobqueue_core::GlobalLimit, Refusal> {
    Ok(form.get("limit").unwrap_or_default().parse()?)
}

/// Pauses, resumes or runs schedule `name` now.
fn schedule_action(
    conn: &mut diesel::PgConnection,
    name: &str,
    action: &str,
) -> Result<(String, String), Refusal> {
    let notice = if action == "run" {
        let id = jobqueue_core::run_schedule_now(conn, name)?;
        format!("schedule {name}: job {id} enqueued")
    } else {
        let pause = pausing(action)?;
        let was_paused = jobqueue_core::set_schedule_paused(conn, name, pause)?;
        paused_notice(&format!("schedule {name}"), pause, was_paused)
    };
    Ok(("/schedules".to_owned(), notice))
}

/// Whether `action` pauses (`pause`) or resumes (`resume`).
fn pausing(action: &str) -> Result<bool, Refusal> {
    match action {
        "pause" => Ok(true),
        "resume" => Ok(false),
        _ => Err(Refusal::new(404, format!("no action {action}"))),
    }
}

/// What pausing (or resuming) `what` did, given whether it was paused.
fn paused_notice(what: &str, pause: bool, was_paused: bool) -> String {
    match (pause, was_paused) {
        (true, true) => format!("{what} was already paused"),
        (true, false) => format!("{what} paused"),
        (false, true) => format!("{what} resumed"),
        (false, false) => format!("{what} was not paused"),
    }
}

fn job_id(text: &str) -> Result<JobId, Refusal> {
    text.parse()
        .map_err(|_| Refusal::new(404, format!("`{text}` is not a job id")))
}

fn get(
    dashboard: &Dashboard,
    ctx: &pages::Ctx<'_>,
    path: &str,
    params: &Params,
) -> Result<String, Refusal> {
    let mut conn = dashboard.conn()?;
    let conn = &mut *conn;
    let segments = decoded(path)?;
    match as_strs(&segments).as_slice() {
        [""] => pages::overview::render(ctx, conn, params),
        ["jobs"] => pages::jobs::list(ctx, conn, params),
        ["jobs", id] => pages::job::render(ctx, conn, job_id(id)?, params),
        ["failed"] => pages::failed::list(ctx, conn, params),
        ["failed", "retry"] => pages::failed::confirm(ctx, conn, params),
        ["schedules"] => pages::schedules::render(ctx, conn, params),
        ["workflows"] => pages::workflows::list(ctx, conn, params),
        ["workflows", id] => pages::workflow::render(ctx, conn, job_id(id)?, params),
        _ => Err(Refusal::new(404, format!("no page at {path}"))),
    }
}

fn post(
    dashboard: &Dashboard,
    ctx: &pages::Ctx<'_>,
    path: &str,
    form: &Params,
) -> Result<Response, Refusal> {
    // Refused before the body was read (admission); checked again here
    // because nothing may change in a read-only dashboard.
    if dashboard.config.read_only {
        return Err(Refusal::new(
            403,
            "this dashboard is read-only: it shows, and changes nothing",
        ));
    }
    let token_ok = form
        .get("csrf")
        .is_some_and(|given| same_secret(given, &dashboard.csrf));
    if !token_ok {
        return Err(Refusal::new(
            403,
            "this form did not come from this dashboard (its CSRF token is missing or out of \
             date): reload the page and try again",
        ));
    }
    let mut conn = dashboard.conn()?;
    let conn = &mut *conn;
    let segments = decoded(path)?;
    let (back, notice) = match as_strs(&segments).as_slice() {
        ["jobs", id, action] => {
            let id = job_id(id)?;
            match *action {
                "retry" => {
                    jobqueue_core::retry_job(conn, id)?;
                    (format!("/jobs/{id}"), format!("job {id} is pending again"))
                }
                "cancel" => {
                    let notice = match jobqueue_core::cancel(conn, id)? {
                        jobqueue_core::CancelOutcome::Cancelled => format!("job {id} cancelled"),
                        jobqueue_core::CancelOutcome::Requested => {
                            format!("cancel requested: job {id} stops at its next heartbeat")
                        }
                        jobqueue_core::CancelOutcome::AlreadyFinished(status) => {
                            format!("job {id} had already finished ({status})")
                        }
                        other => format!("job {id}: {other:?}"),
                    };
                    (format!("/jobs/{id}"), notice)
                }
                "delete" => {
                    jobqueue_core::browse::delete_finished_job(conn, id)?;
                    ("/jobs".to_owned(), format!("job {id} deleted"))
                }
                _ => return Err(Refusal::new(404, format!("no action {action}"))),
            }
        }
        ["queues", action] => queue_action(conn, named(form)?, action, form)?,
        ["queues", name, action] => queue_action(conn, name, action, form)?,
        ["schedules", action] => schedule_action(conn, named(form)?, action)?,
        ["schedules", name, action] => schedule_action(conn, name, action)?,
        ["failed", "retry"] => {
            let retried = jobqueue_core::retry_failed(conn, form.get("queue"), form.get("type"))?;
            (
                "/failed".to_owned(),
                format!("{} failed jobs are pending again", retried.len()),
            )
        }
        _ => return Err(Refusal::new(404, format!("no action at {path}"))),
    };
    let separator = if back.contains('?') { '&' } else { '?' };
    let location = format!(
        "{back}{separator}{}",
        crate::form::query(&[("notice", Some(&notice))])
    );
    Ok(see_other(ctx.link(&location), None))
}
