//! The jobqueue runner: works jobs from PostgreSQL on a pool of OS threads.
//!
//! A [`Runner`] claims batches of due jobs from its queues (one
//! `FOR UPDATE SKIP LOCKED` statement per batch), runs each job's
//! [`Perform::perform`] on a worker thread, and writes outcomes in batches.
//! Idle runners are woken by `LISTEN`/`NOTIFY` as jobs are enqueued, with a
//! slow poll as fallback. Leases of in-flight jobs are renewed on a
//! connection of their own; expired leases (a runner that died) are
//! recovered by any runner. A job of a type missing from the runner's
//! [`Registry`] is set aside as unhandled, without using up an attempt, until
//! a runner that handles it starts. [`RunnerHandle::shutdown`] stops it
//! gracefully.
//!
//! Handlers reach the application's state (an HTTP client, a pool, a
//! configuration) given once with [`Registry::state`], through
//! [`JobContext::state`]; they use `?` on any error ([`JobError`] says which
//! convert). The runner installs no signal handler and logs through `log`:
//! an application embedding it decides when it stops
//! ([`RunnerHandle::trigger`]) and brings the logger.
//!
//! ```no_run
//! use jobqueue_core::Job;
//! use jobqueue_runner::{JobContext, JobError, Perform, Registry, Runner, RunnerConfig};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendEmail { to: String }
//! impl Job for SendEmail { const JOB_TYPE: &'static str = "email.send"; }
//! impl Perform for SendEmail {
//!     fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
//!         ctx.progress(100, "sent")
//!     }
//! }
//!
//! # fn main() -> Result<(), jobqueue_runner::RunnerError> {
//! let config = RunnerConfig::new("postgres://localhost/app").concurrency(16);
//! let runner = Runner::new(config, Registry::new().register::<SendEmail>()).start()?;
//! // ... until the application shuts down:
//! let summary = runner.shutdown();
//! println!("{:?}", summary.stats);
//! # Ok(())
//! # }
//! ```
//!
//! [`inline`] works one job on the caller's own thread and connection,
//! without a runner, by the same path: what the testing kit
//! (`jobqueue-testing`) is built on.
//!
//! This crate is the runner alone. The `jobqueue` command line for an
//! application's own worker binary (`migrate`, `work`, `enqueue`, `list`,
//! ...) is the `jobqueue-cli` crate:
//! `jobqueue_cli::Cli::new().register::<SendEmail>().main()`.

#[cfg(feature = "async")]
mod async_attempt;
#[cfg(feature = "async")]
mod async_drive;
#[cfg(feature = "async")]
mod async_runtime;
mod attempt;
mod backoff;
mod claimer;
mod completer;
mod config;
mod connector;
mod context;
mod counters;
mod db;
mod dispatch;
mod durable;
mod error;
mod exposition;
mod hang_guard;
mod health;
mod horizon;
pub mod inline;
mod inline_host;
mod job_error;
mod job_state;
mod lease_keeper;
mod lifecycle;
mod listener;
pub mod maintenance;
mod maintenance_progress;
mod messages;
mod metrics;
mod metrics_server;
mod panics;
mod progress_note;
mod registry;
mod runner;
mod shared;
mod sync;
mod trace;
mod worker;

/// This crate's version (`major.minor.patch`), for tools that report what
/// they ran.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use attempt::{Middleware, Next};
pub use config::{MetricsMode, RunnerConfig};
pub use context::JobContext;
pub use counters::RunnerStats;
pub use error::RunnerError;
pub use job_error::JobError;
pub use lifecycle::Lifecycle;
pub use metrics_server::MetricsLimits;
#[cfg(feature = "async")]
pub use registry::AsyncPerform;
pub use registry::Perform;
pub use registry::Registry;
pub use runner::{RunSummary, Runner, RunnerHandle, ShutdownTrigger};
