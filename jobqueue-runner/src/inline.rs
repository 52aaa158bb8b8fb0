//! Working one job on the caller's own thread and connection, without a
//! runner: what the testing kit (the `jobqueue-testing` crate) drains
//! queues and performs handlers with.
//!
//! An inline attempt takes the path a runner's worker takes for each job:
//! the registry's handler for the job's type (its payload decoded as the
//! type), a [`JobContext`] with the registry's application state, a caught
//! panic, and the retry decision (the type's backoff, else the runner's).
//! It writes nothing of the outcome: it says what the outcome is
//! ([`Attempt`]), and the caller writes it (a runner's completer does; the
//! kit does with the engine's calls).
//!
//! The handler's [`JobContext::conn`] is the caller's connection, or none.
//! When that connection is inside a transaction (a test's), the attempt
//! runs in a savepoint of it, released afterwards; if a statement of the
//! handler failed (which leaves a PostgreSQL transaction refusing every
//! later statement), the savepoint is rolled back instead, with the
//! handler's writes of that attempt, and [`Attempt::rolled_back`] says so.
//! Inline, a job never times out, and sees a cancel request or a shutdown
//! only if the caller says so.
//!
//! ```no_run
//! use diesel::prelude::*;
//! use jobqueue_core::Job;
//! use jobqueue_core::engine::{Claim, claim};
//! use jobqueue_runner::inline::{Inline, Outcome};
//! use jobqueue_runner::{JobContext, JobError, Perform, Registry};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Job)]
//! #[job(type = "email.send")]
//! struct SendEmail { to: String }
//!
//! impl Perform for SendEmail {
//!     fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
//!         Ok(())
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::new().register::<SendEmail>();
//! let mut conn = PgConnection::establish("postgres://postgres@127.0.0.1/app")?;
//! for row in claim(&mut conn, &Claim::new("inline").limit(1))? {
//!     let attempt = Inline::claimed(&registry, &row, &mut conn).run()?;
//!     if attempt.outcome == Outcome::Completed {
//!         jobqueue_core::engine::complete(&mut conn, &row.lease())?;
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use diesel::PgConnection;
use diesel::connection::{AnsiTransactionManager, TransactionManager};
use jobqueue_core::engine::Progress;
use jobqueue_core::{JobRow, Retention, RetryPolicy};

use crate::attempt;
pub use crate::attempt::Outcome;
use crate::config::RunnerConfig;
use crate::context::JobContext;
use crate::inline_host::InlineHost;
pub use crate::inline_host::Report;
use crate::job_state::JobState;
use crate::registry::Registry;

/// One attempt of one job, to be worked inline: built for a claimed job
/// ([`Inline::claimed`]) or one not stored at all ([`Inline::unstored`]),
/// then [`run`](Inline::run).
#[must_use = "nothing runs until `.run()` is called"]
pub struct Inline<'a> {
    registry: &'a Registry,
    row: Cow<'a, JobRow>,
    conn: Option<&'a mut PgConnection>,
    stored: bool,
    retry: RetryPolicy,
    retention: Retention,
    cancel_requested: bool,
    shutting_down: bool,
    parents: Option<Vec<(String, Option<serde_json::Value>)>>,
}

impl std::fmt::Debug for Inline<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inline")
            .field("job_id", &self.row.id)
            .field("job_type", &self.row.job_type)
            .field("has_conn", &self.conn.is_some())
            .field("stored", &self.stored)
            .finish()
    }
}

/// What an inline attempt came to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Attempt {
    /// What the handler's attempt came to: what a runner would write.
    pub outcome: Outcome,
    /// Every progress report the handler made, in order.
    pub reports: Vec<Report>,
    /// The progress a runner would write with the outcome (the latest
    /// percent and stage, the events added up), if the handler reported
    /// any that its own completion did not write.
    pub unwritten: Option<Progress>,
    /// The result the handler recorded for the steps after it (a step of
    /// a workflow; JSON text), if any.
    pub result: Option<String>,
    /// The handler panicked (its message is the outcome's error).
    pub panicked: bool,
    /// A statement of the handler failed inside the caller's transaction,
    /// so the attempt's savepoint was rolled back, with every write the
    /// handler made on the connection in this attempt.
    pub rolled_back: bool,
}

impl<'a> Inline<'a> {
    /// `row`, a job claimed on `conn` (its lease token current), worked
    /// with `registry`'s handler for its type; the handler's connection is
    /// `conn`, and completing the job in its own transaction completes the
    /// row.
    pub fn claimed(registry: &'a Registry, row: &'a JobRow, conn: &'a mut PgConnection) -> Self {
        Self::new(registry, Cow::Borrowed(row), Some(conn), true)
    }

    /// `row`, a job stored nowhere (see [`JobRow::unstored`]), worked with
    /// `registry`'s handler for its type: no database is needed, and the
    /// handler has no connection unless [`conn`](Self::conn) gives one.
    pub fn unstored(registry: &'a Registry, row: JobRow) -> Self {
        Self::new(registry, Cow::Owned(row), None, false)
    }

    /// `stored`: the row is in the database, claimed on `conn`.
    fn new(
        registry: &'a Registry,
        row: Cow<'a, JobRow>,
        conn: Option<&'a mut PgConnection>,
        stored: bool,
    ) -> Self {
        Inline {
            registry,
            row,
            conn,
            stored,
            retry: RetryPolicy::DEFAULT,
            retention: Retention::default(),
            cancel_requested: false,
            shutting_down: false,
            parents: None,
        }
    }

    /// Gives the handler of a job stored nowhere a connection, for its own
    /// statements; its own completion runs its work there and completes
    /// no row.
    pub fn conn(mut self, conn: &'a mut PgConnection) -> Self {
        self.conn = Some(conn);
        self
    }

    /// Works a job stored nowhere as its attempt number `attempt`: what
    /// [`JobContext::attempt`] says. (A claimed job is the attempt its
    /// claim made.)
    pub fn attempt(mut self, attempt: i32) -> Self {
        if !self.stored {
            self.row.to_mut().attempts = attempt;
        }
        self
    }

    /// Decides as a runner configured by `config` would: its retry policy
    /// for types that declare none, and its retention of completed jobs
    /// (whether a completion in the handler's transaction deletes the row).
    pub fn config(mut self, config: &RunnerConfig) -> Self {
        self.retry = config.retry;
        self.retention = config.retention;
        self
    }

    /// The handler sees a cancel request ([`JobContext::is_cancelled`]),
    /// as if one came while it ran. A claimed row's own request counts
    /// without this.
    pub fn cancel_requested(mut self) -> Self {
        self.cancel_requested = true;
        self
    }

    /// The handler sees its runner shutting down
    /// ([`JobContext::is_shutting_down`]).
    pub fn shutting_down(mut self) -> Self {
        self.shutting_down = true;
        self
    }

    /// Works the job as a step of a workflow that comes after a step
    /// named `step` whose result was `value`:
    /// [`JobContext::parent_result`] and
    /// [`parent_results`](JobContext::parent_results) read the parents
    /// given this way (in name order) instead of the database's, and a job
    /// stored nowhere gets a workflow id
    /// ([`JobContext::workflow_id`]). What the handler records with
    /// [`JobContext::set_result`] is [`Attempt::result`]. Giving the same
    /// step twice keeps the last value.
    ///
    /// Panics if `value` does not serialize to JSON, as a handler's own
    /// `set_result` of it would fail.
    #[track_caller]
    pub fn parent_result<T: serde::Serialize + ?Sized>(self, step: &str, value: &T) -> Self {
        match serde_json::to_value(value) {
            Ok(value) => self.parent(step, Some(value)),
            Err(e) => panic!("the result given for step `{step}` does not serialize: {e}"),
        }
    }

    /// Works the job as a step that comes after a step named `step` that
    /// recorded no result (see [`parent_result`](Self::parent_result)).
    pub fn parent_without_result(self, step: &str) -> Self {
        self.parent(step, None)
    }

    fn parent(mut self, step: &str, value: Option<serde_json::Value>) -> Self {
        if !self.stored && self.row.workflow_id.is_none() {
            self.row.to_mut().workflow_id = Some(jobqueue_core::JobId::new());
        }
        let parents = self.parents.get_or_insert_with(Vec::new);
        parents.retain(|(name, _)| name != step);
        parents.push((step.to_owned(), value));
        parents.sort_by(|a, b| a.0.cmp(&b.0));
        self
    }

    /// Runs the attempt and says what came of it. Errors are those of the
    /// caller's connection opening or ending the attempt's savepoint.
    pub fn run(self) -> Result<Attempt, jobqueue_core::Error> {
        let row: &JobRow = &self.row;
        let Some(handler) = self.registry.get(&row.job_type) else {
            return Ok(Attempt {
                outcome: Outcome::Unhandled,
                reports: Vec::new(),
                unwritten: None,
                result: None,
                panicked: false,
                rolled_back: false,
            });
        };
        let state = JobState::new(
            row.lease(),
            row.job_type.clone(),
            None,
            false,
            row.events_count,
        );
        state.cancel.store(
            self.cancel_requested || row.cancel_requested,
            Ordering::Relaxed,
        );
        let mut conn = self.conn;
        let depth = match conn.as_deref_mut() {
            Some(conn) => open_savepoint(conn)?,
            None => None,
        };
        let host = InlineHost {
            registry: self.registry,
            conn: conn.as_deref_mut(),
            stored: self.stored,
            shutting_down: self.shutting_down,
            deletes_completed: self.retention.deletes_completed(),
            reports: Vec::new(),
            parents: self.parents,
        };
        let mut ctx = JobContext::inline(host, row, &state);
        let attempted = attempt::run(handler, self.registry, row, &mut ctx, &state, self.retry);
        let reports = ctx.take_reports();
        drop(ctx);
        let rolled_back = match (conn, depth) {
            (Some(conn), Some(depth)) => close_savepoint(conn, depth)?,
            _ => false,
        };
        Ok(Attempt {
            outcome: attempted.outcome,
            reports,
            unwritten: state.progress.take(),
            result: crate::sync::lock(&state.result).take(),
            panicked: attempted.panicked,
            rolled_back,
        })
    }
}

/// Opens a savepoint when `conn` is inside a transaction; returns the
/// transaction depth it was at (none: no transaction, no savepoint).
fn open_savepoint(conn: &mut PgConnection) -> Result<Option<u32>, jobqueue_core::Error> {
    let depth = transaction_depth(conn)?;
    if depth.is_some() {
        AnsiTransactionManager::begin_transaction(conn)?;
    }
    Ok(depth)
}

/// Releases the savepoint opened at `depth`, or, if the transaction no
/// longer takes statements (a statement failed in it), rolls back to it;
/// true if it rolled back.
fn close_savepoint(conn: &mut PgConnection, depth: u32) -> Result<bool, jobqueue_core::Error> {
    if AnsiTransactionManager::commit_transaction(conn).is_ok() {
        return Ok(false);
    }
    // Diesel rolls some failed releases back itself: only a savepoint
    // still open is ours to roll back.
    if transaction_depth(conn)?.is_some_and(|now| now > depth) {
        AnsiTransactionManager::rollback_transaction(conn)?;
    }
    Ok(true)
}

/// How many transactions and savepoints `conn` is inside (none: none).
fn transaction_depth(conn: &mut PgConnection) -> Result<Option<u32>, jobqueue_core::Error> {
    let depth = AnsiTransactionManager::transaction_manager_status_mut(conn)
        .transaction_depth()
        .map_err(jobqueue_core::Error::Database)?;
    Ok(depth.map(std::num::NonZeroU32::get))
}

/// Tells `registry`'s lifecycle handlers ([`crate::Lifecycle`]) of job
/// `id` if the outcome just written for it on `conn` failed it for good or
/// cancelled it, as a runner's completer does: in the transaction `conn`
/// is in, each call in a savepoint of its own. The testing kit's drain
/// calls it after each outcome it writes.
pub fn tell_lifecycle(
    registry: &Registry,
    conn: &mut PgConnection,
    id: jobqueue_core::JobId,
) -> Result<(), jobqueue_core::Error> {
    crate::lifecycle::tell_ended(conn, id, registry.lifecycle_handlers())
}
