//! Test your jobs: what an application's tests need to check that its
//! transactions enqueue the jobs they should, and that its handlers do
//! what they should with them.
//!
//! - **Assertions** on what was enqueued, typed by the job struct:
//!   [`assert_enqueued`], [`refute_enqueued`], [`all_enqueued`], and
//!   [`expect`] for more conditions (queue, priority, when due, unique
//!   key, status, how many). A failing one says what *was* enqueued.
//! - **[`Drain`]**: works the due jobs inline on the test's connection, the
//!   way a runner works them (the registry's handler, its
//!   [`JobContext`](jobqueue_runner::JobContext) and application state,
//!   progress, snoozes, retries with their errors and backoff, permanent
//!   failures, cancellation), and reports what became of each
//!   ([`Drained`]). Options: a queue, jobs scheduled up to a time of the
//!   test's choosing, the jobs its jobs enqueue, a bound on jobs.
//! - **[`perform`]**: one handler on its own, with a payload and the
//!   application's state, without a runner: its outcome, its progress
//!   reports, its snooze or cancellation.
//! - [`enqueue_schedule`]: a periodic job's payload, enqueued as one of its
//!   slots would enqueue it; [`connect`]: a test's connection.
//!
//! **What needs a database.** The assertions, [`Drain`] and
//! [`enqueue_schedule`] read and write the queue's tables: they need a
//! PostgreSQL database with the queue's schema ([`connect`] migrates it).
//! They work on the connection they are given, inside Diesel's
//! `begin_test_transaction`: a test sees its own uncommitted jobs, and
//! leaves nothing behind. [`perform`] needs none: its handler gets no
//! connection unless the test gives it one ([`Inline::conn`]).
//!
//! Everything a drained handler does on its
//! [`ctx.conn()`](jobqueue_runner::JobContext::conn) is on the test's
//! connection, inside its transaction. A handler that takes a connection
//! of its own (from a pool in the application's state) does not see the
//! test's uncommitted rows, and may wait on the rows the test's
//! transaction holds.
//!
//! This crate is for an application's `[dev-dependencies]`, directly or
//! as the front crate's `testing` feature (`jobqueue::testing`), so that
//! its production build carries none of it.
//!
//! ```no_run
//! use diesel::prelude::*;
//! use jobqueue_core::Job;
//! use jobqueue_runner::{JobContext, JobError, Perform, Registry};
//! use jobqueue_testing::{Drain, Ended, assert_enqueued};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Job)]
//! #[job(type = "email.send", queue = "mail")]
//! struct SendEmail { to: String }
//!
//! impl Perform for SendEmail {
//!     fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
//!         Ok(())
//!     }
//! }
//!
//! fn sign_up(conn: &mut PgConnection, email: &str) -> jobqueue_core::Result<()> {
//!     conn.transaction(|conn| {
//!         SendEmail { to: email.into() }.enqueue(conn)?;
//!         Ok(())
//!     })
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut conn = jobqueue_testing::connect("postgres://postgres@127.0.0.1/app_test")?;
//! sign_up(&mut conn, "ada@example.com")?;
//! assert_enqueued::<SendEmail>(&mut conn, |email| email.to == "ada@example.com");
//!
//! let registry = Registry::new().register::<SendEmail>();
//! let drained = Drain::new(&registry).queue("mail").run(&mut conn)?;
//! assert_eq!(drained.jobs[0].ended, Ended::Completed, "{drained}");
//! # Ok(())
//! # }
//! ```

mod connect;
mod database;
mod drain;
mod drained;
mod enqueued;
mod expect;
mod listing;
mod perform;
mod schedule;
mod write;

pub use connect::connect;
pub use database::{Template, TestDatabase, TestDatabaseError};
pub use drain::Drain;
pub use drained::{Drained, Ended, Stop, Worked};
pub use enqueued::EnqueuedJob;
pub use expect::{Expect, all_enqueued, assert_enqueued, expect, refute_enqueued};
pub use perform::perform;
pub use schedule::enqueue_schedule;

/// One job worked inline, what its attempt came to, and the reports its
/// handler made: the runner's own types (`jobqueue_runner::inline`).
pub use jobqueue_runner::inline::{Attempt, Inline, Outcome, Report};
