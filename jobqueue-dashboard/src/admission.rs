//! Whether a request is answered at all, judged on its headers before its
//! body is read: the host it names, its method, its access token, and for
//! an action where it comes from and whether the dashboard acts.

use crate::hosts::Authority;
use crate::security::allowed;
use crate::{Dashboard, Method, Request, Response, pages, routes};

/// Paths answered without the access token (GET only): the style, the
/// script, and the sign-in.
const PUBLIC: [&str; 3] = ["/static/style.css", "/static/app.js", "/login"];

/// The longest part of a request's own text quoted back in a message.
const MOST_QUOTED: usize = 100;

/// The refusal of a request on its headers, or `None` if it may go on.
pub(crate) fn check(dashboard: &Dashboard, request: &Request) -> Option<Response> {
    let ctx = pages::Ctx::new(dashboard);
    let refuse = |status: u16, title: &str, text: &str| {
        Some(routes::page(
            status,
            pages::layout::message(&ctx, title, text),
        ))
    };
    let Some(named) = request.host.as_deref().map(str::trim) else {
        return refuse(
            400,
            "Not understood",
            "This request names no host (it has no Host header): send the host name or \
             address the dashboard is reached at, as browsers do.",
        );
    };
    let host = match Authority::parse(named) {
        Some(host) if dashboard.hosts.allows(&host) => host,
        _ => {
            return refuse(
                421,
                "Wrong host",
                &format!(
                    "This dashboard does not answer to the host `{}`. It answers to {}. To \
                     reach it under another name, add that name to its allowed hosts \
                     (`jobqueue dashboard --allowed-host NAME`, the variable \
                     JOBQUEUE_DASHBOARD_ALLOWED_HOSTS, or DashboardConfig::allowed_hosts \
                     in an application).",
                    quoted(named),
                    dashboard.hosts.describe()
                ),
            );
        }
    };
    if request.method == Method::Other {
        return refuse(405, "Error", "Only GET, HEAD and POST are served here.").map(|mut r| {
            r.headers.push(("Allow", "GET, HEAD, POST".to_owned()));
            r
        });
    }
    let (path, _) = request.path.split_once('?').unwrap_or((&request.path, ""));
    let public = request.method == Method::Get && PUBLIC.contains(&path);
    let token = dashboard.config.access_token.as_deref();
    if !public
        && !allowed(
            token,
            request.cookie.as_deref(),
            request.authorization.as_deref(),
        )
    {
        return refuse(401, "Sign in", pages::SIGN_IN);
    }
    if request.method == Method::Post {
        let origin = dashboard.hosts.same_origin(
            &host,
            request.origin.as_deref(),
            request.referer.as_deref(),
        );
        if let Err(why) = origin {
            log::warn!(
                "dashboard: refused an action on {} from another site: {why}",
                crate::security::shown_path(&request.path)
            );
            return refuse(
                403,
                "Refused",
                &format!(
                    "This action was refused: {}. Actions are taken only from the \
                     dashboard's own pages: open the dashboard at {host} and use its \
                     buttons. (If it is reached through a proxy under another name, add \
                     that name to its allowed hosts.)",
                    quoted(&why)
                ),
            );
        }
        if dashboard.config.read_only {
            return refuse(
                403,
                "Refused",
                "This dashboard is read-only: it shows, and changes nothing.",
            );
        }
    }
    None
}

/// `text`, cut to [`MOST_QUOTED`] characters.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(MOST_QUOTED) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
