//! Reading the jobs a test looks at, through the queue's own paged reads
//! (`jobqueue_core::browse`), and describing them in failure messages.

use chrono::{DateTime, SecondsFormat, Utc};
use diesel::PgConnection;
use jobqueue_core::browse::{JobCursor, JobOrder, JobQuery, browse_jobs};
use jobqueue_core::{JobRow, JobStatus, Result};

/// Rows per page read.
const PAGE: i64 = 500;

/// The jobs in any of `statuses`, of `job_type` if given, oldest first;
/// with `most`, only the latest `most` of them.
pub(crate) fn jobs(
    conn: &mut PgConnection,
    statuses: &[JobStatus],
    job_type: Option<&str>,
    most: Option<usize>,
) -> Result<Vec<JobRow>> {
    let mut rows = Vec::new();
    for &status in statuses {
        rows.extend(jobs_in(conn, status, job_type, most)?);
    }
    rows.sort_by_key(|row| row.id);
    if let Some(most) = most {
        let extra = rows.len().saturating_sub(most);
        rows.drain(..extra);
    }
    Ok(rows)
}

/// The jobs in `status`, of `job_type` if given, newest first, page by
/// page (a search that no index serves goes on past each window).
fn jobs_in(
    conn: &mut PgConnection,
    status: JobStatus,
    job_type: Option<&str>,
    most: Option<usize>,
) -> Result<Vec<JobRow>> {
    let mut rows = Vec::new();
    let mut cursor: Option<JobCursor> = None;
    loop {
        let query = JobQuery {
            status: Some(status),
            job_type: job_type.map(str::to_owned),
            order: JobOrder::Newest,
            cursor,
            ..JobQuery::default()
        };
        let page = browse_jobs(conn, &query, PAGE)?;
        rows.extend(page.jobs);
        cursor = page.next.or(page.searched_to);
        if cursor.is_none() || most.is_some_and(|most| rows.len() >= most) {
            return Ok(rows);
        }
    }
}

/// One job on one line: type, queue, priority, status, when due, unique
/// key and payload (cut to 300 characters).
pub(crate) fn describe(row: &JobRow) -> String {
    let mut payload = row.payload.to_string();
    if payload.chars().count() > 300 {
        payload = payload.chars().take(300).collect::<String>() + "…";
    }
    let key = row
        .unique_key
        .as_deref()
        .map(|key| format!(", unique key `{key}`"))
        .unwrap_or_default();
    format!(
        "{} in queue `{}`, priority {}, {}, due {}{key}: {payload}",
        row.job_type,
        row.queue,
        row.priority,
        row.status,
        time(row.run_at),
    )
}

/// A time as messages show it: RFC 3339, to the millisecond, UTC.
pub(crate) fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// `rows`, one per line, each as [`describe`] puts it, `note` saying
/// something about it (empty: nothing), under `title`; "none" if empty.
pub(crate) fn list(title: &str, rows: &[(&JobRow, String)]) -> String {
    if rows.is_empty() {
        return format!("{title}: none");
    }
    let mut text = format!("{title}:");
    for (row, note) in rows {
        text.push_str("\n  - ");
        text.push_str(&describe(row));
        if !note.is_empty() {
            text.push_str("\n      ");
            text.push_str(note);
        }
    }
    text
}
