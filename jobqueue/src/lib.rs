//! Durable background jobs for Rust applications that already run on
//! PostgreSQL. Jobs are rows of `jobqueue_jobs`: an application enqueues
//! them inside its own Diesel transaction, so a job exists if and only if
//! the work that asked for it committed, and a runner claims them with
//! `FOR UPDATE SKIP LOCKED` and works them on a pool of threads.
//!
//! This crate is the one an application depends on. Its top level is what
//! an application uses: the [`Job`](trait@Job) trait and its derive,
//! enqueue and its options and outcomes, errors, migrations, queue control
//! and queues declared in code, periodic jobs, workflows and batches, and
//! the admin calls. The building blocks a runner is made of are in
//! [`unstable`], outside the semver promise. Its features add the rest:
//!
//! | feature | adds |
//! | --- | --- |
//! | `runner` (default) | [`Perform`], [`JobContext`], [`JobError`], [`Registry`], [`Middleware`] and [`Next`], [`Lifecycle`], [`Runner`], [`RunnerConfig`], [`RunSummary`], [`MetricsMode`], [`ShutdownTrigger`]; the whole runner crate as [`runner`] |
//! | `cli` (default) | [`Cli`]: the command line of the application's worker binary; the whole cli crate (exit codes, errors) as [`cli`] |
//! | `dashboard` | the web dashboard to mount in the application, as `dashboard` |
//! | `testing` | the testing kit, as `testing`: a database per test, assertions on what was enqueued, draining queues inline, one handler on its own (for `[dev-dependencies]`) |
//! | `async` | enqueue on diesel-async's `AsyncPgConnection`: `Job::enqueue_async`, `enqueue_async`, `enqueue_many_async`; with `runner`, async handlers: `AsyncPerform`, run as tasks of a tokio runtime (`Registry::register_async`) |
//! | `tracing` | `tracing` spans of enqueues and of each attempt, with the enqueuer's OpenTelemetry trace context carried to the job's attempts |
//!
//! A crate that only enqueues (an application's web crate) needs neither
//! default feature: `jobqueue = { version = "0.1", default-features = false }`
//! builds without the runner and the command line (no clap, HTTP server or
//! tokio).
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

// What an application uses, by topic; the building blocks of a runner are
// under `unstable`.

// Job types and enqueue; errors; the schema.
pub use jobqueue_core::{
    Duplicate, EnqueueBuilder, EnqueueHook, EnqueueOutcome, Enqueued, Error, Job, JobId,
    JobOptions, NewJob, Result, RetryPolicy, SchemaVersions, add_enqueue_hook, enqueue,
    enqueue_many, pending_migrations, run_migrations,
};
// One job: its row, its status, what became of it; cancel and retry.
pub use jobqueue_core::{
    CancelOutcome, ID_CLOCK_TOLERANCE, JobLookup, JobRow, JobStatus, Missing, MissingJob, cancel,
    get_job, retry_failed, retry_job,
};
// Queues: their state, pause, limits, and their settings declared in code.
pub use jobqueue_core::{
    Counting, Declared, GlobalLimit, KeyLimit, MAX_RATE_PERIOD, MAX_RATE_STARTS, MIN_RATE_MARGIN,
    MIN_RATE_PERIOD, Override, QueueChange, QueueConfig, QueueInfo, RateLimit, declare_queue,
    declare_queues, list_queues, pause_queue, resume_queue, set_queue_key_limit, set_queue_limit,
    set_queue_rate_limit,
};
// Periodic jobs.
pub use jobqueue_core::{
    CronSchedule, Missed, Periodic, ScheduleInfo, list_schedules, run_schedule_now,
    set_schedule_paused,
};
// Workflows and batches.
pub use jobqueue_core::{
    Batch, EnqueuedWorkflow, MAX_WORKFLOW_NAME, MAX_WORKFLOW_STEPS, ON_FINISH, ON_SUCCESS,
    OnFailure, Step, StepInfo, Workflow, WorkflowInfo, WorkflowLookup, WorkflowSummary,
    get_workflow, list_workflows,
};
// Operations: the doctor, runners, statistics, retention.
pub use jobqueue_core::{
    Check, CheckStatus, DoctorOptions, Retention, RunnerRow, TypeStats, VERSION, doctor,
    list_runners, redact_url, type_stats,
};
#[cfg(feature = "async")]
pub use jobqueue_core::{enqueue_async, enqueue_many_async, result_async, wait_result_async};
// Results an enqueuer awaits.
pub use jobqueue_core::{JobResult, kept_result, result, wait_result};

/// What `#[derive(Job)]`'s generated code names; not a public API.
#[doc(hidden)]
pub use jobqueue_core::__private;

/// The building blocks a runner is made of (claim, fence, complete, the
/// maintenance statements), the Diesel schema of jobqueue's tables, the
/// dashboard's paged reads, the embedded migrations and the limits on
/// names. For tools and tests that go below the runner; **outside the
/// semver promise**: they change when the runner does.
pub mod unstable {
    pub use jobqueue_core::{MIGRATIONS, browse, engine, human, limits, schema};
}

#[cfg(feature = "runner")]
pub use jobqueue_runner::{
    JobContext, JobError, Lifecycle, MetricsMode, Middleware, Next, Perform, Registry, RunSummary,
    Runner, RunnerConfig, RunnerError, RunnerHandle, ShutdownTrigger,
};

#[cfg(all(feature = "runner", feature = "async"))]
pub use jobqueue_runner::AsyncPerform;

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
    #[cfg(all(feature = "runner", feature = "async"))]
    pub use jobqueue_runner::AsyncPerform;
    #[cfg(feature = "runner")]
    pub use jobqueue_runner::{JobContext, JobError, Perform};
}
