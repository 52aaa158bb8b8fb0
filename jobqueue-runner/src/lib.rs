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
//! a runner that handles it starts. SIGINT/SIGTERM shut down gracefully.
//!
//! The [`cli::Cli`] gives an application the whole `jobqueue` command line
//! with its own handlers:
//!
//! ```no_run
//! use jobqueue_core::Job;
//! use jobqueue_runner::{JobContext, JobError, Perform};
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
//! fn main() -> std::process::ExitCode {
//!     jobqueue_runner::cli::Cli::new().register::<SendEmail>().main()
//! }
//! ```

pub mod bench;
pub mod cli;
mod completer;
mod config;
mod context;
mod db;
pub mod demo;
mod error;
mod fetcher;
mod job_error;
mod lease_keeper;
mod listener;
mod maintenance;
mod messages;
mod perform;
pub mod postgres;
mod registry;
mod runner;
mod shared;
mod tool_db;
mod worker;

pub use config::RunnerConfig;
pub use context::JobContext;
pub use error::RunnerError;
pub use job_error::JobError;
pub use perform::Perform;
pub use registry::Registry;
pub use runner::{RunSummary, Runner, RunnerHandle, ShutdownTrigger};
pub use shared::RunnerStats;
