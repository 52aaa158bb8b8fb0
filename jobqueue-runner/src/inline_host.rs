//! What a job's context holds when the job is worked inline, on its
//! caller's thread (`inline.rs`) rather than a runner's worker: the
//! caller's registry and connection, the flags the caller sets, and every
//! progress report the handler makes.

use diesel::PgConnection;

use crate::registry::Registry;

/// One progress report of a handler, as it made it:
/// [`JobContext::progress`](crate::JobContext::progress) gives a percent
/// and a stage, [`JobContext::events`](crate::JobContext::events) a count.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The percent given (not capped), if any.
    pub percent: Option<u8>,
    /// The stage given, if any.
    pub stage: Option<String>,
    /// The events added.
    pub events: u32,
}

/// The inline side of a job's context.
pub(crate) struct InlineHost<'a> {
    /// Handlers and the application state they reach.
    pub(crate) registry: &'a Registry,
    /// The handler's connection, if the caller gave one.
    pub(crate) conn: Option<&'a mut PgConnection>,
    /// The job's row is stored and claimed on `conn`: completing it in the
    /// handler's transaction completes that row.
    pub(crate) stored: bool,
    /// What `JobContext::is_shutting_down` says.
    pub(crate) shutting_down: bool,
    /// Completed jobs are deleted rather than kept (the retention).
    pub(crate) deletes_completed: bool,
    /// The handler's progress reports, in order.
    pub(crate) reports: Vec<Report>,
    /// The results of the steps the job comes after, by step name in name
    /// order, as the caller gave them (`Inline::parent_result`): read
    /// instead of the database's.
    pub(crate) parents: Option<Vec<(String, Option<serde_json::Value>)>>,
}
