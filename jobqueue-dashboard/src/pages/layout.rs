//! The page shell: head, navigation, notice, content.

use maud::{DOCTYPE, Markup, html};

use super::Ctx;

/// The sections of the navigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Overview,
    Jobs,
    Failed,
    Workflows,
    Schedules,
    None,
}

const SECTIONS: [(Section, &str, &str); 5] = [
    (Section::Overview, "/", "Overview"),
    (Section::Jobs, "/jobs", "Jobs"),
    (Section::Failed, "/failed", "Failed"),
    (Section::Workflows, "/workflows", "Workflows"),
    (Section::Schedules, "/schedules", "Schedules"),
];

/// A whole page. `refresh`: reload every so many seconds.
pub(crate) fn page(
    ctx: &Ctx<'_>,
    title: &str,
    here: Section,
    refresh: Option<u32>,
    notice: Option<&str>,
    content: Markup,
) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · jobqueue" }
                link rel="stylesheet" href=(ctx.link("/static/style.css"));
            }
            body data-refresh=[refresh] {
                header {
                    span.brand { "jobqueue" }
                    nav {
                        @for (section, path, label) in SECTIONS {
                            a.here[section == here] href=(ctx.link(path)) { (label) }
                        }
                    }
                    @if ctx.read_only() {
                        span.mode { "read-only" }
                    }
                }
                main {
                    h1 { (title) }
                    @if let Some(notice) = notice {
                        p.notice role="status" { (notice) }
                    }
                    (content)
                }
                script src=(ctx.link("/static/app.js")) {}
            }
        }
    }
    .into_string()
}

/// A page that only says something (an error, a refusal, sign in).
pub(crate) fn message(ctx: &Ctx<'_>, title: &str, text: &str) -> String {
    page(
        ctx,
        title,
        Section::None,
        None,
        None,
        html! { p.notice.error { (text) } },
    )
}
