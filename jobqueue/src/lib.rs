//! Durable background jobs for Rust applications that already run on
//! PostgreSQL. Jobs are rows of `jobqueue_jobs`: an application enqueues
//! them inside its own Diesel transaction, so a job exists if and only if
//! the work that asked for it committed, and a runner claims them with
//! `FOR UPDATE SKIP LOCKED` and works them on a pool of threads.
//!
//! This crate is the one an application depends on. Its top level is
//! `jobqueue-core`'s: the [`Job`](trait@Job) trait and its derive, enqueue
//! and its options and outcomes, errors, migrations and the admin calls.
//! Its features add the rest:
//!
//! | feature | adds |
//! | --- | --- |
//! | `runner` (default) | [`Perform`], [`JobContext`], [`JobError`], [`Registry`], [`Runner`], [`RunnerConfig`]; the whole runner crate as [`runner`] |
//! | `cli` (default) | [`Cli`]: the command line of the application's worker binary; the whole cli crate (exit codes, errors) as [`cli`] |
//! | `dashboard` | the web dashboard to mount in the application, as `dashboard` |
//! | `testing` | the testing kit, as `testing`: assertions on what was enqueued, draining queues inline, one handler on its own (for `[dev-dependencies]`) |
//!
//! The crates its public signatures use are re-exported at the versions it
//! was built with: [`diesel`] (connections are `diesel::PgConnection`),
//! [`chrono`] (times), [`uuid`] (job ids) and [`serde_json`] (payloads).
//!
//! ```no_run
//! use diesel::prelude::*;
//! use jobqueue::prelude::*;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Job)]
//! #[job(type = "email.send", queue = "mail", max_attempts = 5)]
//! struct SendEmail {
//!     to: String,
//! }
//!
//! impl Perform for SendEmail {
//!     fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
//!         println!("mail to {}", self.to);
//!         Ok(())
//!     }
//! }
//!
//! # fn signup(conn: &mut PgConnection) -> QueryResult<()> {
//! conn.transaction(|conn| {
//!     // ... the application's own writes, then:
//!     SendEmail { to: "a@example.com".into() }.enqueue(conn)?;
//!     Ok(())
//! })
//! # }
//! # fn main() {}
//! ```

pub use jobqueue_core::*;

#[cfg(feature = "runner")]
pub use jobqueue_runner::{
    JobContext, JobError, Perform, Registry, Runner, RunnerConfig, RunnerError, RunnerHandle,
};

/// The runner: every item of the `jobqueue-runner` crate (metrics modes,
/// its statistics, shutdown triggers, ...).
#[cfg(feature = "runner")]
pub use jobqueue_runner as runner;

#[cfg(feature = "cli")]
pub use jobqueue_cli::Cli;

/// The command line: every item of the `jobqueue-cli` crate ([`Cli`], its
/// error and the exit codes a worker binary returns).
#[cfg(feature = "cli")]
pub use jobqueue_cli as cli;

/// The web dashboard, to mount in an application or serve on its own.
#[cfg(feature = "dashboard")]
pub use jobqueue_dashboard as dashboard;

/// The testing kit: every item of the `jobqueue-testing` crate. Enable the
/// feature in `[dev-dependencies]` only: the production build then carries
/// none of it.
#[cfg(feature = "testing")]
pub use jobqueue_testing as testing;

pub use chrono;
pub use diesel;
pub use serde_json;
pub use uuid;

/// What job types and their handlers use: `use jobqueue::prelude::*;`.
pub mod prelude {
    pub use jobqueue_core::{EnqueueOutcome, Job, JobId, JobOptions};
    #[cfg(feature = "runner")]
    pub use jobqueue_runner::{JobContext, JobError, Perform};
}
