//! The pages: one file each, sharing the layout and a few fragments.

pub(crate) mod failed;
pub(crate) mod job;
pub(crate) mod jobs;
pub(crate) mod layout;
pub(crate) mod overview;
pub(crate) mod schedules;
pub(crate) mod workflow;
mod workflow_graph;
pub(crate) mod workflows;

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use crate::Dashboard;

/// What a page answers to a request without the access token.
pub(crate) const SIGN_IN: &str = "This dashboard needs its access token: open \
    /login?token=YOUR_TOKEN once (it is then kept in a cookie), or send \
    `Authorization: Bearer YOUR_TOKEN`.";

/// What every page needs from the dashboard: where it is mounted, whether
/// it may act, and the token its forms carry.
pub(crate) struct Ctx<'a> {
    dashboard: &'a Dashboard,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(dashboard: &'a Dashboard) -> Self {
        Ctx { dashboard }
    }

    /// `path` (from the dashboard's root) under its base path.
    pub(crate) fn link(&self, path: &str) -> String {
        format!("{}{path}", self.dashboard.config.base_path)
    }

    pub(crate) fn read_only(&self) -> bool {
        self.dashboard.config.read_only
    }

    /// A button that POSTs to `path` with the CSRF token (nothing in a
    /// read-only dashboard). `extra`: hidden fields.
    pub(crate) fn action(&self, path: &str, label: &str, extra: &[(&str, &str)]) -> Markup {
        if self.read_only() {
            return html! {};
        }
        let danger = matches!(label, "Cancel" | "Delete" | "Pause");
        html! {
            form.inline method="post" action=(self.link(path)) {
                (self.csrf_field())
                @for (name, value) in extra {
                    input type="hidden" name=(name) value=(value);
                }
                button.danger[danger] type="submit" { (label) }
            }
        }
    }

    /// The hidden field that carries the CSRF token in an action's form.
    pub(crate) fn csrf_field(&self) -> Markup {
        html! { input type="hidden" name="csrf" value=(self.dashboard.csrf); }
    }
}

/// A status (or state) as a colored label.
pub(crate) fn status(text: &str) -> Markup {
    html! { span class={ "status " (text) } { (text) } }
}

/// An instant as `2026-11-23 13:44:31`, UTC.
pub(crate) fn when(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// An optional instant, `-` if none.
pub(crate) fn when_opt(at: Option<DateTime<Utc>>) -> String {
    at.map(when).unwrap_or_else(|| "-".into())
}

pub(crate) use jobqueue_core::browse::human_duration as human;

/// How long ago `at` was (`-` if none).
pub(crate) fn ago(at: Option<DateTime<Utc>>) -> String {
    match at {
        Some(at) => format!(
            "{} ago",
            human((Utc::now() - at).to_std().unwrap_or_default())
        ),
        None => "-".into(),
    }
}

/// The notice an action left (`?notice=...`), shown once.
pub(crate) fn notice(params: &crate::form::Params) -> Option<String> {
    params.get("notice").map(str::to_owned)
}
